package browser

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// Names returns the names of the browser tools, in the order [Browser.Tools]
// gives them.
func Names() []string {
	return []string{
		"browser_navigate", "browser_navigate_back", "browser_snapshot", "browser_click",
		"browser_type", "browser_press_key", "browser_select_option", "browser_hover",
		"browser_scroll", "browser_wait_for", "browser_take_screenshot", "browser_tabs", "browser_file_upload",
	}
}

// Tools returns the browser tools, with the names and arguments of
// Playwright MCP: browser_navigate, browser_navigate_back,
// browser_snapshot, browser_click, browser_type, browser_press_key,
// browser_select_option, browser_hover, browser_scroll, browser_wait_for,
// browser_take_screenshot, browser_tabs and browser_file_upload (which
// gives a file chooser the page opened files of Options.Files). Each
// action returns the page's
// URL and title and a fresh snapshot (or says it is unchanged), what the
// page did meanwhile (dialogs, new tabs, requests refused by the address
// policy), so that a model needs few round trips. The tools share the
// browser: they are sequential.
func (b *Browser) Tools() *loop.Toolset {
	timeout := b.o.ActionTimeout + b.o.LaunchTimeout + 10*time.Second
	ts := &loop.Toolset{}
	add := func(def *loop.ToolDef) {
		def.Timeout = timeout
		// For the permission policy: looking (navigating, reading,
		// screenshots, tabs, waiting, scrolling, hovering) changes
		// nothing the user keeps and runs in plan mode; clicking,
		// typing, keys and choosing options may submit forms, so they
		// stay of unknown access (asked or refused as the mode says).
		// URL rules (web_fetch(domain:...) and the like) match
		// browser_navigate's url.
		switch def.Name {
		case "browser_navigate":
			def.Access, def.Subject = loop.AccessRead, loop.Subject{Kind: loop.SubjectURL, Argument: "url"}
		case "browser_navigate_back", "browser_snapshot", "browser_take_screenshot", "browser_tabs",
			"browser_wait_for", "browser_scroll", "browser_hover":
			def.Access = loop.AccessRead
		case "browser_type", "browser_press_key":
			// Typing into a password field needs a person
			// (password.go).
			def.AskPerson = b.askPerson(def.Name)
		}
		if err := ts.Add(def); err != nil {
			panic(err)
		}
	}
	where := " Only public internet addresses can be reached."
	if b.o.AllowPrivate {
		where = ""
	}
	add(loop.NewTool("browser_navigate", "Opens a URL (http or https) in the current tab and returns the page's snapshot."+where,
		func(ctx context.Context, in navigateArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				return "", t.navigate(ctx, withScheme(in.URL))
			})
		}))
	add(loop.NewTool("browser_navigate_back", "Goes back to the previous page of the current tab.",
		func(ctx context.Context, _ struct{}) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) { return "", t.back(ctx) })
		}))
	add(loop.NewTool("browser_snapshot", "Returns the current page as an accessibility snapshot: its text and elements, "+
		"each element you can act on marked with a ref (for example [ref=e5]) to pass to the other tools. Better than a screenshot for acting on the page.",
		func(ctx context.Context, _ struct{}) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				t.last = "" // always the whole snapshot
				return "", nil
			})
		}))
	add(loop.NewTool("browser_click", "Clicks an element of the page, named by its ref from the latest snapshot.",
		func(ctx context.Context, in elementArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				id, err := t.node(ctx, in.Ref, in.Element)
				if err != nil {
					return "", err
				}
				return "", t.settleAfter(ctx, func(ctx context.Context) error { return t.click(ctx, id) })
			})
		}))
	add(loop.NewTool("browser_type", "Types text into an editable element (it replaces what the field holds), named by its ref; submit presses Enter after it.",
		func(ctx context.Context, in typeArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				key := askKey("browser_type", strings.TrimSpace(in.Ref), in.Text)
				guard := b.passwordGuard(key)
				id, err := t.node(ctx, in.Ref, in.Element)
				if err != nil {
					// A password field a person approved typing into
					// before the browser was started again.
					rid, rguard, ok := b.relocate(ctx, t, key)
					if !ok {
						return "", err
					}
					id, guard = rid, rguard
				}
				if err := t.fill(ctx, id, in.Text, guard); err != nil {
					return "", err
				}
				if !in.Submit {
					return "", nil
				}
				return "", t.settleAfter(ctx, func(ctx context.Context) error { return t.key(ctx, "Enter") })
			})
		}))
	add(loop.NewTool("browser_press_key", "Presses a key in the page, as Playwright names it: a character, Enter, Tab, Escape, Backspace, "+
		"Delete, ArrowLeft, ArrowUp, ArrowRight, ArrowDown, Home, End, PageUp, PageDown, Space, F1-F12, optionally with modifiers (Control+a, Shift+Tab).",
		func(ctx context.Context, in keyArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				if _, _, err := parseKey(in.Key); err != nil {
					return "", err
				}
				if typingKey(in.Key) {
					if err := b.checkPassword(ctx, t, "browser_press_key", askKey("browser_press_key", in.Key)); err != nil {
						return "", err
					}
				}
				return "", t.settleAfter(ctx, func(ctx context.Context) error { return t.key(ctx, in.Key) })
			})
		}))
	add(loop.NewTool("browser_select_option", "Selects options of a dropdown (a select element), named by its ref; values are the options' values or labels.",
		func(ctx context.Context, in selectArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				id, err := t.node(ctx, in.Ref, in.Element)
				if err != nil {
					return "", err
				}
				if len(in.Values) == 0 {
					return "", errors.New("values is empty: name at least one option")
				}
				var labels []string
				err = t.settleAfter(ctx, func(ctx context.Context) error {
					var err error
					labels, err = t.selectOptions(ctx, id, in.Values)
					return err
				})
				if err != nil {
					return "", err
				}
				q := make([]string, len(labels))
				for i, l := range labels {
					q[i] = quote(l, 100)
				}
				return "Selected " + strings.Join(q, ", ") + ".", nil
			})
		}))
	add(loop.NewTool("browser_hover", "Moves the mouse over an element of the page, named by its ref.",
		func(ctx context.Context, in elementArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				id, err := t.node(ctx, in.Ref, in.Element)
				if err != nil {
					return "", err
				}
				return "", t.settleAfter(ctx, func(ctx context.Context) error { return t.hover(ctx, id) })
			})
		}))
	add(loop.NewTool("browser_scroll", "Scrolls the page, or the scrollable part of it in the middle of the viewport.",
		func(ctx context.Context, in scrollArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				amount := float64(in.Amount)
				if amount <= 0 {
					amount = float64(b.o.ViewportHeight) * 0.8
				}
				amount = min(amount, 100000)
				var dx, dy float64
				switch in.Direction {
				case "down":
					dy = amount
				case "up":
					dy = -amount
				case "right":
					dx = amount
				case "left":
					dx = -amount
				default:
					return "", fmt.Errorf("direction must be up, down, left or right, not %s", quote(in.Direction, 20))
				}
				if err := t.scroll(ctx, dx, dy); err != nil {
					return "", err
				}
				var pos struct{ X, Y, H, VH float64 }
				t.eval(ctx, `({X: scrollX, Y: scrollY, H: document.documentElement.scrollHeight, VH: innerHeight})`, &pos)
				return fmt.Sprintf("Scrolled %s; the viewport shows %.0f to %.0f of %.0f pixels of the page's height.", in.Direction, pos.Y, pos.Y+pos.VH, pos.H), nil
			})
		}))
	add(loop.NewTool("browser_wait_for", "Waits until a text appears in the page (text), or disappears (textGone), or for a number of seconds (time).",
		func(ctx context.Context, in waitArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				return t.waitFor(ctx, &in, b.o.ActionTimeout)
			})
		}))
	add(loop.NewTool("browser_take_screenshot", "Takes a screenshot of the current tab's viewport, as an image you can see. "+
		"To act on the page, use browser_snapshot: a screenshot has no refs.",
		func(ctx context.Context, _ struct{}) (*loop.Output, error) {
			return b.screenshot(ctx)
		}))
	add(loop.NewTool("browser_tabs", "Lists, opens, closes or selects tabs: action is list, new, close or select; index (from 0) names the tab to close or select (close without index closes the current tab).",
		func(ctx context.Context, in tabsArgs) (*loop.Output, error) {
			return b.act(ctx, in.Action != "list", func(ctx context.Context, t *tab) (string, error) {
				return b.tabsAction(ctx, &in)
			})
		}))
	add(loop.NewTool("browser_file_upload", "Chooses files for the file chooser the page opened (click a file input, or the button that opens one, first): "+
		"paths are files of your files folder, as files/NAME (the files of the user's messages are there, and what the browser downloads is saved there). No paths cancels the chooser.",
		func(ctx context.Context, in uploadArgs) (*loop.Output, error) {
			return b.act(ctx, true, func(ctx context.Context, t *tab) (string, error) {
				return b.upload(ctx, t, in.Paths)
			})
		}))
	return ts
}

type uploadArgs struct {
	Paths []string `json:"paths,omitempty" jsonschema:"the paths of the files to upload (files/NAME), one or more; omitted or empty cancels the file chooser"`
}

type navigateArgs struct {
	URL string `json:"url" jsonschema:"the URL to open"`
}

type elementArgs struct {
	Element string `json:"element" jsonschema:"a human-readable description of the element, used in messages"`
	Ref     string `json:"ref" jsonschema:"the element's ref from the page snapshot, for example e5"`
}

type typeArgs struct {
	Element string `json:"element" jsonschema:"a human-readable description of the element, used in messages"`
	Ref     string `json:"ref" jsonschema:"the element's ref from the page snapshot, for example e5"`
	Text    string `json:"text" jsonschema:"the text to type"`
	Submit  bool   `json:"submit,omitempty" jsonschema:"whether to press Enter after typing"`
}

type keyArgs struct {
	Key string `json:"key" jsonschema:"the key to press, for example Enter, ArrowDown, a or Control+a"`
}

type selectArgs struct {
	Element string   `json:"element" jsonschema:"a human-readable description of the element, used in messages"`
	Ref     string   `json:"ref" jsonschema:"the element's ref from the page snapshot, for example e5"`
	Values  []string `json:"values" jsonschema:"the values or labels of the options to select (one, unless the list allows several)"`
}

type scrollArgs struct {
	Direction string `json:"direction" enum:"up,down,left,right" jsonschema:"where to scroll"`
	Amount    int    `json:"amount,omitempty" jsonschema:"how far, in pixels; default most of the viewport"`
}

type waitArgs struct {
	Text     string  `json:"text,omitempty" jsonschema:"wait until this text appears"`
	TextGone string  `json:"textGone,omitempty" jsonschema:"wait until this text disappears"`
	Time     float64 `json:"time,omitempty" jsonschema:"wait this many seconds"`
}

type tabsArgs struct {
	Action string `json:"action" enum:"list,new,close,select" jsonschema:"what to do"`
	Index  *int   `json:"index,omitempty" jsonschema:"the tab's index, from 0 (close and select)"`
}

// act runs one tool call: it starts the browser if needed, runs fn on the
// current tab under the action timeout, and reports the page.
func (b *Browser) act(ctx context.Context, snap bool, fn func(ctx context.Context, t *tab) (string, error)) (*loop.Output, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lctx, lcancel := context.WithTimeout(ctx, b.o.LaunchTimeout+b.o.ActionTimeout)
	err := b.ensure(lctx)
	lcancel()
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, b.o.ActionTimeout)
	defer cancel()
	var notes []string
	if b.restarted != "" {
		notes = append(notes, b.restarted)
		b.restarted = ""
	}
	if len(b.tabs) == 0 {
		if _, err := b.newTab(actx); err != nil {
			return nil, fmt.Errorf("no tab is open, and none could be opened: %w", err)
		}
	}
	msg, err := fn(actx, b.tabs[b.cur])
	if msg != "" {
		notes = append(notes, msg)
	}
	// What the action set off, read with a fresh bound: the action's own
	// may be spent.
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if n := b.adoptOpened(rctx); n != "" {
		notes = append(notes, n)
	}
	if b.o.LiveFrames {
		b.takeFrame(rctx)
	}
	for _, t := range b.tabs {
		notes = append(notes, t.takeDialogs()...)
	}
	notes = append(notes, b.files.takeNotes()...)
	if len(b.tabs) > 0 {
		if n := b.tabs[b.cur].pendingChooser(); n != "" {
			notes = append(notes, n)
		}
	}
	if refused, dropped := b.pol.take(); len(refused) > 0 {
		s := "The address policy refused " + strings.Join(refused, "; ")
		if dropped > 0 {
			s += fmt.Sprintf("; and %d more", dropped)
		}
		if b.o.RefusalHint != "" {
			s += " (" + b.o.RefusalHint + ")"
		}
		notes = append(notes, s+".")
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("the browser did not finish within %v", b.o.ActionTimeout)
		}
		if len(notes) > 0 {
			err = fmt.Errorf("%w\n%s", err, strings.Join(notes, "\n"))
		}
		return nil, err
	}
	text := b.report(rctx, notes, snap)
	if !b.o.Multimodal || !snap {
		return loop.TextOutput(text), nil
	}
	return b.multimodal(rctx, b.tabs[b.cur], text), nil
}

// MaxPageChars bounds a web environment's page_chars.
const MaxPageChars = 1_000_000

// maxPageHTML bounds the HTML of a page converted to Markdown.
const maxPageHTML = 4 << 20

// multimodal adds to a report of the page the page as Markdown and a
// screenshot of the viewport (Options.Multimodal). What cannot be read
// is said instead.
func (b *Browser) multimodal(ctx context.Context, t *tab, text string) *loop.Output {
	var out strings.Builder
	out.WriteString(text)
	if b.o.PageMarkdown != nil {
		var html string
		err := t.eval(ctx, fmt.Sprintf("document.documentElement ? document.documentElement.outerHTML.slice(0, %d) : ''", maxPageHTML), &html)
		var md string
		if err == nil {
			base, _ := url.Parse(t.location(ctx))
			limit := b.o.MaxSnapshotBytes
			if b.o.PageChars > 0 {
				limit = 4 * b.o.PageChars
			}
			md, err = b.o.PageMarkdown(ctx, html, base, limit)
		}
		if err != nil {
			fmt.Fprintf(&out, "\n\n[no Markdown of the page: %v]", err)
		} else {
			out.WriteString("\n\nPage as Markdown:\n")
			out.WriteString(cutChars(strings.TrimSpace(md), b.o.PageChars))
		}
	}
	img, err := t.screenshot(ctx, b.o.MaxScreenshotBytes)
	if err != nil {
		fmt.Fprintf(&out, "\n\n[no screenshot: %v]", err)
		return loop.TextOutput(out.String())
	}
	fmt.Fprintf(&out, "\n\nScreenshot of the viewport (%dx%d, JPEG, %d KiB):", b.o.ViewportWidth, b.o.ViewportHeight, (len(img)+1023)/1024)
	return &loop.Output{Content: []llm.Part{llm.TextPart(out.String()), llm.ImagePart("image/jpeg", img)}}
}

// cutChars cuts s to n characters (n <= 0: no bound), saying how many
// it left out.
func cutChars(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	i, k := 0, 0
	for i = range s {
		if k == n {
			break
		}
		k++
	}
	rest := utf8.RuneCountInString(s[i:])
	return s[:i] + fmt.Sprintf("\n[cut: %d more characters of the page not shown (page_chars is %d)]", rest, n)
}

// report renders the current tab for the model.
func (b *Browser) report(ctx context.Context, notes []string, snap bool) string {
	var out strings.Builder
	if len(b.tabs) == 0 {
		return strings.Join(append(notes, "No tab is open."), "\n")
	}
	t := b.tabs[b.cur]
	for _, n := range notes {
		out.WriteString(n)
		out.WriteByte('\n')
	}
	if len(notes) > 0 {
		out.WriteByte('\n')
	}
	fmt.Fprintf(&out, "Page URL: %s\nPage title: %s\n", quote(t.location(ctx), 2000), quote(t.title(ctx), 300))
	if len(b.tabs) > 1 {
		fmt.Fprintf(&out, "Tabs: %d open, the current one is %d\n", len(b.tabs), b.cur)
	}
	if !snap {
		return strings.TrimRight(out.String(), "\n")
	}
	s, err := t.snapshot(ctx)
	if err != nil {
		fmt.Fprintf(&out, "\n[no snapshot: %v]", err)
		return out.String()
	}
	if s.text == t.last {
		out.WriteString("\nThe page snapshot is unchanged since the last one; its refs are still valid.")
		return out.String()
	}
	t.last = s.text
	out.WriteString("\nPage snapshot:\n")
	out.WriteString(cutChars(s.text, b.o.PageChars))
	return out.String()
}

// screenshot returns the current tab's viewport as an image part.
func (b *Browser) screenshot(ctx context.Context) (*loop.Output, error) {
	var img []byte
	out, err := b.act(ctx, false, func(ctx context.Context, t *tab) (string, error) {
		var err error
		img, err = t.screenshot(ctx, b.o.MaxScreenshotBytes)
		return "", err
	})
	if err != nil {
		return nil, err
	}
	text := out.Content[0].Text + fmt.Sprintf("\nScreenshot of the viewport (%dx%d, JPEG, %d KiB):", b.o.ViewportWidth, b.o.ViewportHeight, (len(img)+1023)/1024)
	return &loop.Output{Content: []llm.Part{llm.TextPart(text), llm.ImagePart("image/jpeg", img)}}, nil
}

// waitFor waits for a text to appear or go, or for a time.
func (t *tab) waitFor(ctx context.Context, in *waitArgs, limit time.Duration) (string, error) {
	switch {
	case in.Time > 0:
		d := time.Duration(in.Time * float64(time.Second))
		if d > limit-time.Second {
			return "", fmt.Errorf("time may be at most %v", (limit - time.Second).Round(time.Second))
		}
		select {
		case <-time.After(d):
			return fmt.Sprintf("Waited %v.", d), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	case in.Text == "" && in.TextGone == "":
		return "", errors.New("give text, textGone or time")
	}
	want, present := in.Text, true
	if want == "" {
		want, present = in.TextGone, false
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var found bool
		err := t.eval(ctx, fmt.Sprintf("document.body ? document.body.innerText.includes(%s) : false", quote(want, 1<<20)), &found)
		if err == nil && found == present {
			if present {
				return fmt.Sprintf("The text %s appeared.", quote(want, 200)), nil
			}
			return fmt.Sprintf("The text %s is gone.", quote(want, 200)), nil
		}
		select {
		case <-ctx.Done():
			if present {
				return "", fmt.Errorf("the text %s did not appear within %v", quote(want, 200), limit)
			}
			return "", fmt.Errorf("the text %s was still there after %v", quote(want, 200), limit)
		case <-tick.C:
		}
	}
}

// tabsAction lists, opens, closes or selects tabs. b.mu is held.
func (b *Browser) tabsAction(ctx context.Context, in *tabsArgs) (string, error) {
	index := b.cur
	if in.Index != nil {
		index = *in.Index
	}
	switch in.Action {
	case "list":
		var s strings.Builder
		for i, t := range b.tabs {
			mark := " "
			if i == b.cur {
				mark = "*"
			}
			fmt.Fprintf(&s, "%s %d: %s %s\n", mark, i, quote(t.title(ctx), 100), quote(t.location(ctx), 300))
		}
		return "Open tabs (* is the current one):\n" + strings.TrimRight(s.String(), "\n"), nil
	case "new":
		if _, err := b.newTab(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("Opened tab %d, now the current tab.", b.cur), nil
	case "select", "close":
		if index < 0 || index >= len(b.tabs) {
			return "", fmt.Errorf("no tab has the index %d (%d open, from 0)", index, len(b.tabs))
		}
		if in.Action == "select" {
			b.cur = index
			cdp.Call(ctx, b.tabs[index].target(), pageBringToFront, cdp.Empty{})
			return fmt.Sprintf("Tab %d is now the current tab.", index), nil
		}
		if len(b.tabs) == 1 {
			return "", errors.New("this is the only tab; it stays open (navigate elsewhere instead)")
		}
		t := b.tabs[index]
		c := b.browserSession()
		if _, err := cdp.Call(ctx, c, target.CloseTarget, target.CloseTargetParams{TargetID: t.id}); err != nil {
			return "", fmt.Errorf("closing tab %d: %w", index, err)
		}
		if t.cancel != nil {
			t.cancel()
		}
		b.tabs = append(b.tabs[:index], b.tabs[index+1:]...)
		if b.cur >= index && b.cur > 0 {
			b.cur--
		}
		return fmt.Sprintf("Closed tab %d; tab %d is now the current tab.", index, b.cur), nil
	}
	return "", fmt.Errorf("action must be list, new, close or select, not %s", quote(in.Action, 20))
}

var pageBringToFront = page.BringToFront

// browserSession is the DevTools session of the browser itself. b.mu is held.
func (b *Browser) browserSession() cdp.Session { return chromedp.FromContext(b.bctx).Browser }

// withScheme adds https:// to a URL written without a scheme
// ("example.com/a"), as an address bar does.
func withScheme(u string) string {
	u = strings.TrimSpace(u)
	if strings.Contains(u, "://") {
		return u
	}
	if scheme, _, ok := strings.Cut(u, ":"); ok {
		switch strings.ToLower(scheme) {
		case "about", "javascript", "data", "blob", "file", "chrome", "view-source", "mailto", "filesystem", "http", "https":
			return u
		}
	}
	return "https://" + u
}
