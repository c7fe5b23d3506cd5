package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

// browserTools takes the browser's tools out of a tool selection: --browser
// adds them all, browser_* names pick some (so that --tools and agent files
// can name them). It returns the other names, the browser's tools (nil when
// none is wanted) and a func that closes the browser, killing Chromium,
// when the run ends. Chromium starts on the first call of a tool, not here.
func browserTools(names []string, o *runOptions) ([]string, *loop.Toolset, func(), error) {
	var rest, picked []string
	for _, n := range names {
		if n = strings.TrimSpace(n); strings.HasPrefix(n, "browser_") {
			if !slices.Contains(browser.Names(), n) {
				return nil, nil, nil, usagef("unknown browser tool %q; the browser tools are %s", n, strings.Join(browser.Names(), ", "))
			}
			picked = append(picked, n)
			continue
		}
		rest = append(rest, n)
	}
	if o.browser {
		picked = browser.Names()
	}
	if len(picked) == 0 {
		return rest, nil, func() {}, nil
	}
	allow, err := browser.ParseAllowList(o.browserAllow)
	if err != nil {
		return nil, nil, nil, usagef("--browser-allow: %v", err)
	}
	b := browser.New(&browser.Options{Allow: allow})
	all := b.Tools()
	ts := &loop.Toolset{}
	for _, n := range browser.Names() {
		if slices.Contains(picked, n) {
			def, _ := all.Lookup(n)
			if err := ts.Add(&def); err != nil {
				b.Close()
				return nil, nil, nil, err
			}
		}
	}
	return rest, ts, func() { b.Close() }, nil
}

// addBrowser makes the web environment of hrns serve a real browser: each
// session gets its own Chromium (beside web_fetch) for as long as it runs,
// with its profile kept under --browser-profiles while it waits, and
// removed when it ends. Without Chromium, the web environment stays
// web_fetch alone, and the log says so.
func (o *serveOptions) addBrowser(opts *session.Options, log *slog.Logger) error {
	allow, err := browser.ParseAllowList(o.browserAllow)
	if err != nil {
		return usagef("--browser-allow: %v", err)
	}
	if _, err := browser.FindChromium(); err != nil {
		log.Warn("hrns serve: the web environment has web_fetch only", "err", err)
		return nil
	}
	root := o.browserProfiles
	if root == "" {
		root = filepath.Join(os.TempDir(), fmt.Sprintf("hrns-browser-profiles-%d", os.Getuid()))
	}
	// The directory is made (0700) when a session's browser first starts.
	if n := browser.SweepProfiles(root, 7*24*time.Hour); n > 0 {
		log.Info("hrns serve: removed browser profiles unused for a week", "count", n)
	}
	if opts.SessionEnvironments == nil {
		opts.SessionEnvironments = map[string]session.EnvironmentFunc{}
	}
	opts.SessionEnvironments["web"] = webEnvironment(root, allow, log)
	return nil
}

// safeName matches the session IDs used as profile directory names.
var safeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// webEnvironment gives a session web_fetch and a browser of its own, set
// up from the session's web environment entry (start_url, headless, mode).
func webEnvironment(root string, allow func(netip.AddrPort) bool, log *slog.Logger) session.EnvironmentFunc {
	fetch := tools.Web(nil)
	return func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		env, err := browser.ParseEnvironment(p.Config)
		if err != nil {
			return nil, nil, err
		}
		o := browser.Options{Allow: allow, Logger: log, MaxScreenshotBytes: 512 << 10, PageMarkdown: pageMarkdown}
		env.Apply(&o)
		if p.Session != "" {
			if !safeName().MatchString(p.Session) {
				return nil, nil, fmt.Errorf("session id %q cannot name a browser profile", p.Session)
			}
			o.ProfileDir = filepath.Join(root, p.Session)
		}
		// New starts nothing: Chromium starts on the first tool call.
		b := browser.New(&o)
		all := b.Tools()
		ts := &loop.Toolset{}
		for def := range fetch.All() {
			ts.Add(&def)
		}
		for def := range all.All() {
			if env.TextOnly() && def.Name == "browser_take_screenshot" {
				continue
			}
			ts.Add(&def)
		}
		if p.Session == "" {
			return ts, nil, nil
		}
		return ts, func(ended bool) {
			if err := b.Close(); err != nil {
				log.Warn("closing a session's browser", "session", p.Session, "err", err)
			}
			if ended {
				os.RemoveAll(o.ProfileDir)
			}
		}, nil
	}
}

// pageMarkdown converts a page's HTML to Markdown for the browser's
// multimodal mode, with web_fetch's converter.
func pageMarkdown(ctx context.Context, html string, base *url.URL, maxBytes int) (string, error) {
	md, err := tools.HTMLToMarkdown(ctx, html, base, maxBytes)
	if err != nil {
		return "", err
	}
	s := md.Text
	if md.Cut {
		s += "\n[the page's Markdown was cut to fit]"
	}
	return s, nil
}
