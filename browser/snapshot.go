package browser

import (
	"context"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
)

// The snapshot is the page's accessibility tree as indented text, in the
// form Playwright MCP gives models:
//
//	- heading "Sign in" [level=1]
//	- textbox "User name" [ref=e3]
//	- button "Sign in" [ref=e5]
//
// Every element a model can act on carries a ref; the tools take it to
// name the element. Names and values come from the page: they are quoted
// (JSON string syntax, so no control character or line break passes) and
// cut, and the whole is bounded in nodes and bytes.

// interactive roles get a ref; so does any focusable node.
var interactive = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true,
	"radio": true, "combobox": true, "listbox": true, "option": true, "menuitem": true,
	"menuitemcheckbox": true, "menuitemradio": true, "tab": true, "switch": true,
	"slider": true, "spinbutton": true, "treeitem": true, "MenuListOption": true,
	"ListBoxOption": true, "textField": true, "TextField": true, "PopUpButton": true,
}

// transparent roles are not shown themselves when they have no name; their
// children are shown in their place.
var transparent = map[string]bool{
	"generic": true, "none": true, "presentation": true, "GenericContainer": true,
	"RootWebArea": true, "WebArea": true, "LayoutTable": true, "LayoutTableRow": true,
	"LayoutTableCell": true, "Section": true, "InlineTextBox": true, "MenuListPopup": true,
	"IframePresentational": true, "LabelText": true, "Legend": true, "emphasis": true, "strong": true,
}

// alwaysHidden roles are never shown themselves: the page (its title is
// in the report) and the text boxes that repeat their parent's text.
var alwaysHidden = map[string]bool{"RootWebArea": true, "WebArea": true, "InlineTextBox": true, "LineBreak": true, "ListMarker": true}

// fields hold their text in their value: their children are not shown.
var fields = map[string]bool{"textbox": true, "searchbox": true, "TextField": true, "textField": true}

// A snapshot is a rendered accessibility tree.
type snapshot struct {
	text  string
	nodes int
	cut   bool
}

// snapshot renders the tab's accessibility tree, assigning refs.
func (t *tab) snapshot(ctx context.Context) (*snapshot, error) {
	res, err := cdp.Call(ctx, t.target(), accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return nil, fmt.Errorf("reading the page's accessibility tree: %w", err)
	}
	if t.refs == nil || len(t.refs) > 20000 {
		t.refs, t.byNode = map[string]cdp.BackendNodeID{}, map[cdp.BackendNodeID]string{}
	}
	r := &renderer{t: t, byID: map[accessibility.NodeID]*accessibility.Node{}, maxNodes: t.b.o.MaxSnapshotNodes, maxBytes: t.b.o.MaxSnapshotBytes}
	t.eval(ctx, "location.origin", &r.origin) // links of the page's own origin are shown as paths
	var root *accessibility.Node
	for _, n := range res.Nodes {
		r.byID[n.NodeID] = n
		if root == nil && n.ParentID == "" {
			root = n
		}
	}
	if root == nil {
		return &snapshot{text: "(the page is empty)"}, nil
	}
	r.walk(root, 0, 0, "")
	s := &snapshot{text: strings.TrimRight(r.b.String(), "\n"), nodes: r.nodes, cut: r.cut}
	if s.text == "" {
		s.text = "(the page shows nothing accessible)"
	}
	if s.cut {
		s.text += fmt.Sprintf("\n[snapshot cut after %d elements (%d bytes): the page holds more; scroll, or act on what is shown]", r.nodes, r.b.Len())
	}
	return s, nil
}

type renderer struct {
	t        *tab
	byID     map[accessibility.NodeID]*accessibility.Node
	b        strings.Builder
	nodes    int
	maxNodes int
	maxBytes int
	cut      bool
	origin   string // the page's origin, "" if unknown
}

const maxDepth = 200

// walk renders n and its children; parentName is the name of the nearest
// node shown above it, whose text its children need not repeat.
func (r *renderer) walk(n *accessibility.Node, depth, hops int, parentName string) {
	if r.cut || hops > maxDepth {
		return
	}
	role := axString(n.Role)
	name := strings.TrimSpace(axString(n.Name))
	shown := !n.Ignored && !(transparent[role] && name == "") && !alwaysHidden[role] &&
		!(role == "StaticText" && (name == "" || parentName != "" && strings.Contains(parentName, name)))
	if shown {
		line, link := r.line(n, role, name)
		indent := strings.Repeat("  ", min(depth, 40))
		if link != "" {
			line += "\n" + indent + "  - /url: " + link
		}
		if r.nodes >= r.maxNodes || r.b.Len()+len(indent)+len(line) > r.maxBytes {
			r.cut = true
			return
		}
		r.nodes++
		r.b.WriteString(indent)
		r.b.WriteString(line)
		r.b.WriteByte('\n')
		depth++
		parentName = name
	}
	if role == "StaticText" || fields[role] {
		return // InlineTextBox children repeat a text, a field's text is its value
	}
	for _, id := range n.ChildIDs {
		if c := r.byID[id]; c != nil {
			r.walk(c, depth, hops+1, parentName)
		}
	}
}

// line renders one node, and the URL of a link (quoted), if any.
func (r *renderer) line(n *accessibility.Node, role, name string) (string, string) {
	if role == "StaticText" {
		return "- text: " + quote(name, 1000), ""
	}
	link := ""
	var b strings.Builder
	b.WriteString("- ")
	b.WriteString(role)
	if name != "" {
		b.WriteByte(' ')
		b.WriteString(quote(name, 300))
	}
	focusable := false
	for _, p := range n.Properties {
		v := axString(p.Value)
		switch p.Name {
		case accessibility.PropertyNameFocusable:
			focusable = v == "true"
		case accessibility.PropertyNameChecked, accessibility.PropertyNamePressed:
			if v == "true" || v == "mixed" {
				fmt.Fprintf(&b, " [%s", p.Name)
				if v == "mixed" {
					b.WriteString("=mixed")
				}
				b.WriteByte(']')
			}
		case accessibility.PropertyNameDisabled, accessibility.PropertyNameSelected,
			accessibility.PropertyNameExpanded, accessibility.PropertyNameRequired:
			if v == "true" {
				fmt.Fprintf(&b, " [%s]", p.Name)
			}
		case "url":
			if role == "link" && v != "" {
				if r.origin != "" && r.origin != "null" && strings.HasPrefix(v, r.origin+"/") {
					v = strings.TrimPrefix(v, r.origin)
				}
				link = quote(v, 500)
			}
		case accessibility.PropertyNameLevel:
			if role == "heading" {
				fmt.Fprintf(&b, " [level=%s]", quoteBare(v))
			}
		}
	}
	if n.BackendDOMNodeID != 0 && (interactive[role] || focusable) {
		fmt.Fprintf(&b, " [ref=%s]", r.t.ref(n.BackendDOMNodeID))
	}
	if v := axString(n.Value); v != "" {
		b.WriteString(": ")
		b.WriteString(quote(v, 300))
	}
	return b.String(), link
}

// ref returns the ref of a DOM node, assigning one the first time.
func (t *tab) ref(id cdp.BackendNodeID) string {
	if r, ok := t.byNode[id]; ok {
		return r
	}
	t.nextRef++
	r := fmt.Sprintf("e%d", t.nextRef)
	t.byNode[id] = r
	t.refs[r] = id
	return r
}

// node returns the DOM node a ref names, checking that it is still in the
// page. element is the model's description of it, for messages.
func (t *tab) node(ctx context.Context, ref, element string) (cdp.BackendNodeID, error) {
	id, ok := t.refs[strings.TrimSpace(ref)]
	if !ok {
		return 0, fmt.Errorf("no element has the ref %s (%s): take a new snapshot with browser_snapshot and use a ref from it", quote(ref, 40), quote(element, 100))
	}
	// A node of a page the tab has left may still resolve: it must be in a
	// document that is still shown.
	var live bool
	if err := t.callOn(ctx, id, `function() { return this.isConnected && this.ownerDocument.defaultView !== null }`, &live); err != nil || !live {
		delete(t.refs, ref)
		delete(t.byNode, id)
		return 0, fmt.Errorf("the element %s (ref %s) is no longer in the page: take a new snapshot with browser_snapshot and use a ref from it", quote(element, 100), ref)
	}
	return id, nil
}

// axString returns a value as text: a string as it is, any other JSON
// value as written.
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if jsonv2.Unmarshal(v.Value, &s) == nil {
		return s
	}
	return string(v.Value)
}

// quoteBare renders a short value from the page without quotes when it is
// plain (digits and letters), quoted otherwise.
func quoteBare(s string) string {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return quote(s, 40)
		}
	}
	if len(s) > 40 {
		return quote(s, 40)
	}
	return s
}
