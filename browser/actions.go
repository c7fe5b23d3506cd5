package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
)

// callOn calls a JavaScript function with the element as this, and
// decodes its value into out (which may be nil).
func (t *tab) callOn(ctx context.Context, id cdp.BackendNodeID, fn string, out any, args ...any) error {
	return t.callOnIn(ctx, 0, id, fn, out, args...)
}

// callOnIn is callOn in the execution context world (0: the page's own);
// see [tab.isolatedWorld].
func (t *tab) callOnIn(ctx context.Context, world runtime.ExecutionContextID, id cdp.BackendNodeID, fn string, out any, args ...any) error {
	obj, err := cdp.Call(ctx, t.target(), dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: id, ExecutionContextID: world})
	if err != nil || obj.Object == nil {
		return fmt.Errorf("the element is no longer in the page: take a new snapshot")
	}
	defer cdp.Call(context.WithoutCancel(ctx), t.target(), runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: obj.Object.ObjectID})
	var cargs []*runtime.CallArgument
	for _, a := range args {
		v, err := json.Marshal(a)
		if err != nil {
			return err
		}
		cargs = append(cargs, &runtime.CallArgument{Value: jsonv2.Value(v)})
	}
	res, err := cdp.Call(ctx, t.target(), runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: fn, ObjectID: obj.Object.ObjectID, Arguments: cargs,
		ReturnByValue: ptr(true), AwaitPromise: ptr(true), UserGesture: ptr(true),
	})
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		msg := res.ExceptionDetails.Text
		if ex := res.ExceptionDetails.Exception; ex != nil && ex.Description != "" {
			msg = ex.Description
		}
		msg, _, _ = strings.Cut(msg, "\n")
		return errors.New(strings.TrimPrefix(msg, "Error: "))
	}
	if out != nil && res.Result != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// center scrolls the element into view and returns the middle of its
// first box, in viewport coordinates.
func (t *tab) center(ctx context.Context, id cdp.BackendNodeID) (float64, float64, error) {
	tg := t.target()
	cdp.Call(ctx, tg, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: id})
	q, err := cdp.Call(ctx, tg, dom.GetContentQuads, dom.GetContentQuadsParams{BackendNodeID: id})
	if err != nil || len(q.Quads) == 0 || len(q.Quads[0]) < 8 {
		return 0, 0, errors.New("the element is not visible (it has no box on the page)")
	}
	quad := q.Quads[0]
	var x, y float64
	for i := 0; i < 8; i += 2 {
		x += quad[i]
		y += quad[i+1]
	}
	return x / 4, y / 4, nil
}

func (t *tab) mouse(ctx context.Context, typ input.DispatchMouseEventType, x, y float64, button input.MouseButton, clicks int64) error {
	p := input.DispatchMouseEventParams{Type: typ, X: x, Y: y, Button: button, ClickCount: clicks}
	if button == input.MouseButtonLeft && typ == input.DispatchMouseEventTypeMousePressed {
		p.Buttons = 1
	}
	_, err := cdp.Call(ctx, t.target(), input.DispatchMouseEvent, p)
	return err
}

// click clicks the middle of the element with the left button.
func (t *tab) click(ctx context.Context, id cdp.BackendNodeID) error {
	x, y, err := t.center(ctx, id)
	if err != nil {
		return err
	}
	if err := t.mouse(ctx, input.DispatchMouseEventTypeMouseMoved, x, y, input.MouseButtonNone, 0); err != nil {
		return err
	}
	if err := t.mouse(ctx, input.DispatchMouseEventTypeMousePressed, x, y, input.MouseButtonLeft, 1); err != nil {
		return err
	}
	return t.mouse(ctx, input.DispatchMouseEventTypeMouseReleased, x, y, input.MouseButtonLeft, 1)
}

// hover moves the mouse over the element.
func (t *tab) hover(ctx context.Context, id cdp.BackendNodeID) error {
	x, y, err := t.center(ctx, id)
	if err != nil {
		return err
	}
	return t.mouse(ctx, input.DispatchMouseEventTypeMouseMoved, x, y, input.MouseButtonNone, 0)
}

// fill focuses an editable element, selects what it holds and types text
// in its place, as a person would.
//
// guard, when set, is called once the field has the focus (what it is
// then is what gets the text), with whether it is a password field; an
// error it returns stops the typing.
func (t *tab) fill(ctx context.Context, id cdp.BackendNodeID, text string, guard func(password bool) error) error {
	const focus = `function() {
		this.scrollIntoView({block: "center", inline: "nearest"});
		const editable = this.isContentEditable ||
			this.tagName === "TEXTAREA" ||
			(this.tagName === "INPUT" && !["button","checkbox","radio","submit","reset","image","file","hidden","range","color"].includes(this.type));
		if (!editable) throw new Error("the element is not a text field (it is a " + this.tagName.toLowerCase() + (this.type ? " of type " + this.type : "") + ")");
		if (this.disabled || this.readOnly) throw new Error("the text field is disabled or read-only");
		this.focus();
		if (this.isContentEditable) {
			const r = document.createRange(); r.selectNodeContents(this);
			const s = getSelection(); s.removeAllRanges(); s.addRange(r);
		} else {
			this.select();
		}
		const ac = (this.getAttribute("autocomplete") || "").toLowerCase().split(/\s+/);
		const password = this.tagName === "INPUT" && (this.type === "password" || ac.includes("current-password") || ac.includes("new-password"));
		return {had: this.isContentEditable ? this.textContent.length : this.value.length, password};
	}`
	var got struct {
		Had      int  `json:"had"`
		Password bool `json:"password"`
	}
	if err := t.callOn(ctx, id, focus, &got); err != nil {
		return err
	}
	if guard != nil {
		if err := guard(got.Password); err != nil {
			return err
		}
	}
	had := got.Had
	if text == "" {
		if had > 0 {
			return t.key(ctx, "Delete")
		}
		return nil
	}
	_, err := cdp.Call(ctx, t.target(), input.InsertText, input.InsertTextParams{Text: text})
	return err
}

// selectOptions selects the options of a <select> whose value or label is
// one of values, and returns their labels.
func (t *tab) selectOptions(ctx context.Context, id cdp.BackendNodeID, values []string) ([]string, error) {
	const sel = `function(values) {
		if (this.tagName !== "SELECT") throw new Error("the element is not a select element (it is a " + this.tagName.toLowerCase() + ")");
		if (this.disabled) throw new Error("the select element is disabled");
		const opts = Array.from(this.options);
		const picked = [];
		for (const v of values) {
			const o = opts.find(o => o.value === v) || opts.find(o => o.label === v || o.text.trim() === v);
			if (!o) throw new Error("no option has the value or label " + JSON.stringify(v) + "; the options are " + JSON.stringify(opts.slice(0, 50).map(o => o.label)));
			if (o.disabled) throw new Error("the option " + JSON.stringify(v) + " is disabled");
			picked.push(o);
		}
		if (!this.multiple && picked.length > 1) throw new Error("the select element takes one value");
		this.focus();
		for (const o of opts) o.selected = picked.includes(o);
		this.dispatchEvent(new Event("input", {bubbles: true}));
		this.dispatchEvent(new Event("change", {bubbles: true}));
		return picked.map(o => o.label);
	}`
	var labels []string
	err := t.callOn(ctx, id, sel, &labels, values)
	return labels, err
}

// A keyDef is how a key is dispatched.
type keyDef struct {
	key, code, text string
	vk              int64
}

var namedKeys = map[string]keyDef{
	"Enter":      {"Enter", "Enter", "\r", 13},
	"Tab":        {"Tab", "Tab", "", 9},
	"Escape":     {"Escape", "Escape", "", 27},
	"Backspace":  {"Backspace", "Backspace", "", 8},
	"Delete":     {"Delete", "Delete", "", 46},
	"ArrowLeft":  {"ArrowLeft", "ArrowLeft", "", 37},
	"ArrowUp":    {"ArrowUp", "ArrowUp", "", 38},
	"ArrowRight": {"ArrowRight", "ArrowRight", "", 39},
	"ArrowDown":  {"ArrowDown", "ArrowDown", "", 40},
	"Home":       {"Home", "Home", "", 36},
	"End":        {"End", "End", "", 35},
	"PageUp":     {"PageUp", "PageUp", "", 33},
	"PageDown":   {"PageDown", "PageDown", "", 34},
	"Space":      {" ", "Space", " ", 32},
	"Insert":     {"Insert", "Insert", "", 45},
}

var modifierBits = map[string]int64{"Alt": 1, "Control": 2, "Ctrl": 2, "Meta": 4, "Shift": 8}

// parseKey reads a key as Playwright names it: "Enter", "ArrowDown", "a",
// "Control+a", "Shift+Tab", "F5".
func parseKey(s string) (keyDef, int64, error) {
	parts := strings.Split(s, "+")
	if s == "+" || strings.HasSuffix(s, "++") {
		parts = append(parts[:len(parts)-2], "+")
	}
	var mods int64
	for _, m := range parts[:len(parts)-1] {
		bit, ok := modifierBits[m]
		if !ok {
			return keyDef{}, 0, fmt.Errorf("unknown modifier %s (use Alt, Control, Meta or Shift)", quote(m, 20))
		}
		mods |= bit
	}
	name := parts[len(parts)-1]
	if k, ok := namedKeys[name]; ok {
		return k, mods, nil
	}
	if len(name) >= 2 && len(name) <= 3 && name[0] == 'F' {
		var n int64
		if _, err := fmt.Sscanf(name[1:], "%d", &n); err == nil && n >= 1 && n <= 12 {
			return keyDef{name, name, "", 111 + n}, mods, nil
		}
	}
	if r := []rune(name); len(r) == 1 {
		k := keyDef{key: name, text: name}
		c := r[0]
		switch {
		case c >= 'a' && c <= 'z':
			k.code, k.vk = "Key"+strings.ToUpper(name), int64(c-'a'+'A')
		case c >= 'A' && c <= 'Z':
			k.code, k.vk = "Key"+name, int64(c)
		case c >= '0' && c <= '9':
			k.code, k.vk = "Digit"+name, int64(c)
		}
		if mods&^8 != 0 {
			k.text = "" // a shortcut types nothing
		}
		return k, mods, nil
	}
	return keyDef{}, 0, fmt.Errorf("unknown key %s: use a character or one of Enter, Tab, Escape, Backspace, Delete, ArrowLeft, ArrowUp, ArrowRight, ArrowDown, Home, End, PageUp, PageDown, Space, Insert, F1 to F12, optionally after modifiers (Control+a)", quote(name, 40))
}

// key presses and releases a key.
func (t *tab) key(ctx context.Context, name string) error {
	k, mods, err := parseKey(name)
	if err != nil {
		return err
	}
	down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Modifiers: mods, Key: k.key, Code: k.code,
		WindowsVirtualKeyCode: k.vk, NativeVirtualKeyCode: k.vk, Text: k.text, UnmodifiedText: k.text}
	if k.text == "" {
		down.Type = input.DispatchKeyEventTypeRawKeyDown
	}
	if _, err := cdp.Call(ctx, t.target(), input.DispatchKeyEvent, down); err != nil {
		return err
	}
	up := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Modifiers: mods, Key: k.key, Code: k.code,
		WindowsVirtualKeyCode: k.vk, NativeVirtualKeyCode: k.vk}
	_, err = cdp.Call(ctx, t.target(), input.DispatchKeyEvent, up)
	return err
}

// scroll scrolls what is under the middle of the viewport: the nearest
// scrollable element there, else the page.
func (t *tab) scroll(ctx context.Context, dx, dy float64) error {
	const fn = `(function(dx, dy) {
		let el = document.elementFromPoint(innerWidth / 2, innerHeight / 2);
		for (; el && el !== document.body && el !== document.documentElement; el = el.parentElement) {
			const s = getComputedStyle(el);
			if ((dy && el.scrollHeight > el.clientHeight && /(auto|scroll)/.test(s.overflowY)) ||
				(dx && el.scrollWidth > el.clientWidth && /(auto|scroll)/.test(s.overflowX))) {
				el.scrollBy({left: dx, top: dy, behavior: "instant"});
				return;
			}
		}
		window.scrollBy({left: dx, top: dy, behavior: "instant"});
	})(%g, %g)`
	return t.eval(ctx, fmt.Sprintf(fn, dx, dy), nil)
}

// back goes one entry back in the tab's history.
func (t *tab) back(ctx context.Context) error {
	h, err := cdp.Call(ctx, t.target(), page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		return err
	}
	if h.CurrentIndex <= 0 || int(h.CurrentIndex) >= len(h.Entries)+1 {
		return errors.New("there is no previous page in this tab's history")
	}
	prev := h.Entries[h.CurrentIndex-1]
	if err := t.b.pol.checkURL(ctx, prev.URL); err != nil && prev.URL != "about:blank" {
		return fmt.Errorf("refused to go back to %s: %s%s", quote(prev.URL, 200), reasonText(err), t.b.hint(err))
	}
	return t.settleAfter(ctx, func(ctx context.Context) error {
		_, err := cdp.Call(ctx, t.target(), page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: prev.ID})
		return err
	})
}

// screenshot captures the viewport as JPEG, lowering the quality until it
// fits max bytes.
func (t *tab) screenshot(ctx context.Context, max int) ([]byte, error) {
	for _, q := range []int64{80, 60, 40, 25} {
		res, err := cdp.Call(ctx, t.target(), page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatJpeg, Quality: ptr(q), OptimizeForSpeed: ptr(true)})
		if err != nil {
			return nil, fmt.Errorf("taking the screenshot: %w", err)
		}
		data := []byte(res.Data)
		if len(data) <= max {
			return data, nil
		}
	}
	return nil, fmt.Errorf("the screenshot does not fit in %d bytes even at low quality", max)
}
