package browser

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// An Environment is what the browser reads of a web environment entry of
// the sessions API:
//
//	{"kind": "web", "start_url": "https://example.com", "headless": true,
//	 "mode": {"type": "visual", "width": 1200, "height": 900},
//	 "page_chars": 20000}
//
// Other fields of the entry (host, lazy, vault_id, profiles, network...)
// are not the browser's: they are left to the server.
type Environment struct {
	// StartURL is opened in the first tab when the browser starts.
	StartURL string `json:"start_url"`
	// Headless false asks for a visible window: it is shown when the
	// server has a display, and ignored otherwise.
	Headless *bool `json:"headless"`
	// Mode is how the agent perceives the page: "visual" (the default:
	// snapshots and screenshots, width and height setting the viewport),
	// "multimodal" (the same, and every report of the page also carries
	// a screenshot and the page as Markdown) or "text" (snapshots only:
	// no screenshot tool); {"type": "visual", "markdown": true} is the
	// multimodal mode too. The entry gives it as an object with a type,
	// or as the type alone ("mode": "multimodal").
	Mode *Mode `json:"mode"`
	// PageChars bounds the characters of page text the agent reads per
	// page (snapshots, and the Markdown of the multimodal mode); 0
	// means the browser's bounds.
	PageChars int `json:"page_chars"`
}

// Mode is a web environment's mode.
type Mode struct {
	Type   string `json:"type"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Markdown asks, in the visual mode, for the page as Markdown with
	// each screenshot: what the multimodal mode is.
	Markdown bool `json:"markdown"`
}

// multimodal reports whether the mode shows screenshots and Markdown
// with every report of the page.
func (m *Mode) multimodal() bool {
	return m != nil && (m.Type == "multimodal" || (m.Type == "" || m.Type == "visual") && m.Markdown)
}

// UnmarshalJSON reads an object with a type, or the type alone.
func (m *Mode) UnmarshalJSON(b []byte) error {
	if t := strings.TrimSpace(string(b)); strings.HasPrefix(t, `"`) {
		*m = Mode{}
		return json.Unmarshal(b, &m.Type)
	}
	type plain Mode
	return json.Unmarshal(b, (*plain)(m))
}

// ParseEnvironment reads a web environment entry; nil or a JSON string
// (the bare kind, "web") is the zero Environment. Every field it reads is
// checked: a bad one is an error that names it.
func ParseEnvironment(raw []byte) (*Environment, error) {
	e := &Environment{}
	if b := strings.TrimSpace(string(raw)); b == "" || b == "null" || strings.HasPrefix(b, `"`) {
		return e, nil
	}
	if err := json.Unmarshal(raw, e); err != nil {
		return nil, fmt.Errorf("the web environment: %v", err)
	}
	if e.StartURL != "" {
		u, err := url.Parse(e.StartURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(e.StartURL) > 8192 {
			return nil, errors.New("the web environment: start_url must be an http or https URL")
		}
	}
	if m := e.Mode; m != nil {
		switch m.Type {
		case "", "visual", "multimodal", "text":
		default:
			return nil, fmt.Errorf("the web environment: mode.type must be visual, multimodal or text, not %q", m.Type)
		}
		if m.Width < 0 || m.Height < 0 || m.Width > 4096 || m.Height > 4096 || (m.Width == 0) != (m.Height == 0) {
			return nil, errors.New("the web environment: mode.width and mode.height must be given together, from 1 to 4096 pixels")
		}
	}
	if e.PageChars < 0 || e.PageChars > MaxPageChars {
		return nil, fmt.Errorf("the web environment: page_chars must be from 1 to %d", MaxPageChars)
	}
	return e, nil
}

// Apply sets the options the entry chooses: the start URL, a visible
// window (when the server has a display), the viewport, the page text's
// bound and the multimodal mode.
func (e *Environment) Apply(o *Options) {
	if e.StartURL != "" {
		o.StartURL = e.StartURL
	}
	if e.Headless != nil && !*e.Headless && (os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "") {
		o.Headed = true
	}
	if m := e.Mode; m != nil && m.Width > 0 {
		o.ViewportWidth, o.ViewportHeight = m.Width, m.Height
	}
	if e.PageChars > 0 {
		o.PageChars = e.PageChars
	}
	o.Multimodal = e.Mode.multimodal()
}

// TextOnly reports whether the entry asks for text mode: no screenshots.
func (e *Environment) TextOnly() bool { return e.Mode != nil && e.Mode.Type == "text" }

// SweepProfiles removes the profile directories under root that have not
// been used for olderThan: those of sessions that ended while no browser
// ran for them (cancelled while waiting, deleted). It returns how many it
// removed.
func SweepProfiles(root string, olderThan time.Duration) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || time.Since(info.ModTime()) < olderThan {
			continue
		}
		if os.RemoveAll(filepath.Join(root, e.Name())) == nil {
			n++
		}
	}
	return n
}
