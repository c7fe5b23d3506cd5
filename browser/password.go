package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
)

// Typing into a password field needs a person: browser_type into an input
// of type password (or whose autocomplete says current-password or
// new-password), and browser_press_key of a key that types a character
// while such a field has the focus, go to the agent's approver whatever
// the mode and the allow rules say ([loop.ToolDef.AskPerson]), shown what
// the page says of the field (its label, the page's origin), not what the
// model calls it, with the text typed. The page is read before the call
// (the tool's AskPerson) and again when it types: a field that has become
// a password field since is not typed into without that approval. What
// is not seen: a password field in a cross-origin frame (its focus is the
// frame), a page that types what it is sent into a field of its own, and
// text that is a password typed into any other field.

// passwordCheckTimeout bounds reading the page for the approval.
const passwordCheckTimeout = 3 * time.Second

// maxAsked bounds the calls remembered as sent to a person.
const maxAsked = 32

// passwords remembers the calls sent to a person for typing into a
// password field, so that the call, when it runs, may type there; and
// where each field is (locators), so that a call approved after the
// browser was closed and started again on its profile (hrns serve closes
// a session's browser while it waits for the decision, and the snapshot's
// refs die with it) finds the field again.
type passwords struct {
	amu      sync.Mutex
	asked    map[string]bool
	locators []fieldLocator // oldest first; nil until loaded
	loaded   bool
}

// A fieldLocator finds again a password field a person was asked about:
// the page's URL and the element's path from the document's root, with
// the reason the person was given.
type fieldLocator struct {
	Key    string `json:"key"`
	URL    string `json:"url"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// locatorsFile holds a kept profile's locators, beside Chromium's files.
const locatorsFile = "hrns-password-fields.json"

// locatorJS returns where the element it is called on is: its page's URL
// and its path of tag:nth-of-type steps from the root (null in a frame or
// a shadow root, or deeper than 64).
const locatorJS = `function() {
	if (this.ownerDocument !== document || !this.isConnected) return null;
	const parts = [];
	for (let e = this; e && e !== document.documentElement; e = e.parentElement) {
		if (parts.length >= 64) return null;
		let i = 1;
		for (let s = e.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === e.tagName) i++;
		parts.unshift(e.tagName.toLowerCase() + ":nth-of-type(" + i + ")");
	}
	if (this.getRootNode() !== document) return null;
	return {url: location.href, path: "html > " + parts.join(" > ")};
}`

// loadLocators reads a kept profile's locators once. p.amu is held.
func (b *Browser) loadLocators() {
	if b.loaded {
		return
	}
	b.loaded = true
	if b.o.ProfileDir == "" {
		return
	}
	data, err := os.ReadFile(filepath.Join(b.o.ProfileDir, locatorsFile))
	if err != nil || len(data) > 1<<20 {
		return
	}
	var ls []fieldLocator
	if json.Unmarshal(data, &ls) == nil && len(ls) <= maxAsked {
		b.locators = ls
	}
}

// saveLocators writes a kept profile's locators. p.amu is held.
func (b *Browser) saveLocators() {
	if b.o.ProfileDir == "" {
		return
	}
	data, _ := json.Marshal(b.locators)
	if err := os.WriteFile(filepath.Join(b.o.ProfileDir, locatorsFile), data, 0o600); err != nil {
		b.o.Logger.Debug("browser: keeping a password field's place", "err", err)
	}
}

// keepLocator remembers where the field of a call sent to a person is.
func (b *Browser) keepLocator(l fieldLocator) {
	b.amu.Lock()
	defer b.amu.Unlock()
	b.loadLocators()
	b.locators = slices.DeleteFunc(b.locators, func(o fieldLocator) bool { return o.Key == l.Key })
	if len(b.locators) >= maxAsked {
		b.locators = b.locators[1:]
	}
	b.locators = append(b.locators, l)
	b.saveLocators()
}

// locator returns where the field of a call sent to a person is; take
// forgets it.
func (b *Browser) locator(key string, take bool) *fieldLocator {
	b.amu.Lock()
	defer b.amu.Unlock()
	b.loadLocators()
	for i, l := range b.locators {
		if l.Key == key {
			if take {
				b.locators = slices.Delete(b.locators, i, i+1)
				b.saveLocators()
			}
			return &l
		}
	}
	return nil
}

func (p *passwords) markAsked(key string) {
	p.amu.Lock()
	defer p.amu.Unlock()
	if p.asked == nil || len(p.asked) >= maxAsked {
		p.asked = map[string]bool{}
	}
	p.asked[key] = true
}

func (p *passwords) takeAsked(key string) bool {
	p.amu.Lock()
	defer p.amu.Unlock()
	ok := p.asked[key]
	delete(p.asked, key)
	return ok
}

// fieldInfo is what the page says of a field.
type fieldInfo struct {
	Password bool   `json:"password"`
	Label    string `json:"label"`
	Origin   string `json:"origin"`
	Tag      string `json:"tag"`
}

// fieldJS describes the element it is called on (this), or with no this,
// the element that has the focus, through shadow roots and same-origin
// frames.
const fieldJS = `function() {
	let e = this;
	if (!e || e === window || e.nodeType !== 1) {
		e = document.activeElement;
		for (let i = 0; e && i < 16; i++) {
			if (e.shadowRoot && e.shadowRoot.activeElement) { e = e.shadowRoot.activeElement; continue; }
			let inner = null;
			try { inner = (e.tagName === "IFRAME" || e.tagName === "FRAME") && e.contentDocument ? e.contentDocument.activeElement : null; } catch (_) {}
			if (inner) { e = inner; continue; }
			break;
		}
	}
	if (!e || e.nodeType !== 1) return {password: false, label: "", origin: location.origin, tag: ""};
	const ac = (e.getAttribute("autocomplete") || "").toLowerCase().split(/\s+/);
	const password = e.tagName === "INPUT" && (e.type === "password" || ac.includes("current-password") || ac.includes("new-password"));
	let label = "";
	if (e.labels && e.labels.length) label = e.labels[0].innerText || e.labels[0].textContent || "";
	label = label || e.getAttribute("aria-label") || e.getAttribute("placeholder") || e.getAttribute("name") || e.id || "";
	return {password, label: String(label).trim().slice(0, 200), origin: e.ownerDocument.location.origin, tag: e.tagName.toLowerCase() + (e.type ? " of type " + e.type : "")};
}`

// typingKey reports whether a browser_press_key key types a character.
func typingKey(key string) bool {
	k, mods, err := parseKey(key)
	if err != nil || k.text == "" || strings.ContainsAny(k.text, "\r\n\t\b\x1b\x7f") {
		return false // Enter, Tab, Backspace, Escape, Delete type nothing
	}
	return mods&^modifierBits["Shift"] == 0
}

// askKey is the key under which a call is remembered as sent to a person.
func askKey(tool string, parts ...string) string {
	return tool + "\x00" + strings.Join(parts, "\x00")
}

// askPerson is the AskPerson of browser_type and browser_press_key: why
// the call needs a person, when it types into a password field of the
// current tab, or "" (also when the browser has not started, or the ref
// is unknown: the call fails then without typing).
func (b *Browser) askPerson(tool string) func(json.RawMessage) string {
	return func(args json.RawMessage) string {
		var in struct {
			Ref  string `json:"ref"`
			Text string `json:"text"`
			Key  string `json:"key"`
		}
		if json.Unmarshal(args, &in) != nil {
			return ""
		}
		if tool == "browser_press_key" && !typingKey(in.Key) {
			return ""
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.started || b.closed || len(b.tabs) == 0 {
			return ""
		}
		t := b.tabs[b.cur]
		ctx, cancel := context.WithTimeout(context.Background(), passwordCheckTimeout)
		defer cancel()
		var f fieldInfo
		var loc *fieldLocator
		// Read in a world of hrns's own, which the page's scripts cannot
		// change: what the person is told is what the browser says.
		world, err := t.isolatedWorld(ctx)
		if err != nil {
			return ""
		}
		if tool == "browser_type" {
			id, ok := t.refs[strings.TrimSpace(in.Ref)]
			if !ok {
				// A call sent to a person before the browser
				// was started again is sent again.
				if l := b.locator(askKey(tool, strings.TrimSpace(in.Ref), in.Text), false); l != nil {
					return l.Reason
				}
				return ""
			}
			err = t.callOnIn(ctx, world, id, fieldJS, &f)
			if err == nil && f.Password {
				loc = &fieldLocator{}
				if t.callOn(ctx, id, locatorJS, loc) != nil || loc.Path == "" {
					loc = nil
				}
			}
		} else {
			err = t.evalIn(ctx, world, "("+fieldJS+")()", &f)
		}
		if err != nil || !f.Password {
			return ""
		}
		what, key := fmt.Sprintf("the text %s", quote(in.Text, 200)), askKey(tool, strings.TrimSpace(in.Ref), in.Text)
		if tool == "browser_press_key" {
			what, key = fmt.Sprintf("the key %s", quote(in.Key, 40)), askKey(tool, in.Key)
		}
		b.markAsked(key)
		// The origin first: the label is the page's words, which may
		// say another origin in the place of this one.
		why := fmt.Sprintf("typing into a password field on %s: the page's field %s (an %s) gets %s", quote(f.Origin, 200), quote(f.Label, 100), f.Tag, what)
		if loc != nil {
			loc.Key, loc.Reason = key, why
			b.keepLocator(*loc)
		}
		return why
	}
}

// relocate finds again, in a browser started again, the password field a
// call was sent to a person about (its ref is gone with the browser it
// came from): on the page it was on, at the same place. The field must
// still be a password field to be typed into (the guard).
func (b *Browser) relocate(ctx context.Context, t *tab, key string) (cdp.BackendNodeID, func(bool) error, bool) {
	l := b.locator(key, true)
	if l == nil || t.location(ctx) != l.URL {
		return 0, nil, false
	}
	res, err := cdp.Call(ctx, t.target(), runtime.Evaluate, runtime.EvaluateParams{Expression: "document.querySelector(" + string(mustJSON(l.Path)) + ")"})
	if err != nil || res.Result == nil || res.Result.ObjectID == "" {
		return 0, nil, false
	}
	defer cdp.Call(context.WithoutCancel(ctx), t.target(), runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: res.Result.ObjectID})
	n, err := cdp.Call(ctx, t.target(), dom.DescribeNode, dom.DescribeNodeParams{ObjectID: res.Result.ObjectID})
	if err != nil || n.Node == nil {
		return 0, nil, false
	}
	// The person approved typing into a password field there: what is
	// there now must be one.
	guard := func(password bool) error {
		if !password {
			return errors.New("the element where the approved password field was is no longer a password field: nothing was typed; take a new snapshot")
		}
		return nil
	}
	return n.Node.BackendNodeID, guard, true
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// passwordGuard is browser_type's guard of the field it types into, once
// the field has the focus: a password field no person was asked about
// (it became one since the call was approved, say on focus) is refused.
func (b *Browser) passwordGuard(key string) func(bool) error {
	return func(password bool) error {
		if !password || b.takeAsked(key) {
			return nil
		}
		return errors.New("the field is a password field: typing into it needs a person's approval, which this call did not get (the field became one after it was checked); call browser_type again to ask for it")
	}
}

// checkPassword refuses a key that types into a password field that has
// the focus, unless a person was asked about the call (the field got the
// focus after it was checked, or the call comes without its AskPerson).
func (b *Browser) checkPassword(ctx context.Context, t *tab, tool, key string) error {
	var f fieldInfo
	world, err := t.isolatedWorld(ctx)
	if err == nil {
		err = t.evalIn(ctx, world, "("+fieldJS+")()", &f)
	}
	if err != nil {
		return fmt.Errorf("could not tell whether the field is a password field, so nothing was typed: %w", err)
	}
	if !f.Password || b.takeAsked(key) {
		return nil
	}
	return fmt.Errorf("the field %s on %s, which has the focus, is a password field: typing into it needs a person's approval, which this call did not get; call %s again to ask for it", quote(f.Label, 100), quote(f.Origin, 200), tool)
}
