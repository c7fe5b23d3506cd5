package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/hrns-dev/hrns/browser/userdata"
	"github.com/hrns-dev/hrns/internal/netpolicy"
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
		// Not browser_file_upload: hrns run's browser has no files
		// folder (naming it in --tools gives it, saying so when called).
		for _, n := range browser.Names() {
			if n != "browser_file_upload" {
				picked = append(picked, n)
			}
		}
	}
	if len(picked) == 0 {
		return rest, nil, func() {}, nil
	}
	allow, err := browser.ParseAllowList(o.browserAllow)
	if err != nil {
		return nil, nil, nil, usagef("--browser-allow: %v", err)
	}
	bo := &browser.Options{Allow: allow, RefusalHint: browserHint("hrns")}
	cleanup := func() {}
	if o.browserProfile != "" {
		dir, err := copyProfile(o.browserProfile)
		if err != nil {
			return nil, nil, nil, usagef("--browser-profile: %v", err)
		}
		bo.ProfileDir = filepath.Join(dir, "p")
		cleanup = func() { os.RemoveAll(dir) }
	}
	b := browser.New(bo)
	closeAll := func() {
		b.Close()
		cleanup()
	}
	all := b.Tools()
	ts := &loop.Toolset{}
	for _, n := range browser.Names() {
		if slices.Contains(picked, n) {
			def, _ := all.Lookup(n)
			if err := ts.Add(&def); err != nil {
				closeAll()
				return nil, nil, nil, err
			}
		}
	}
	return rest, ts, closeAll, nil
}

// maxProfileArchive bounds the archive --browser-profile reads.
const maxProfileArchive = 1 << 30

// copyProfile unpacks the archive of a user-data directory at path into
// DIR/p, DIR a new temporary directory (0700), checked as hrns serve
// checks uploaded profiles (package browser/userdata), and returns DIR.
func copyProfile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	archive, err := io.ReadAll(io.LimitReader(f, maxProfileArchive+1))
	if err != nil {
		return "", err
	}
	if len(archive) > maxProfileArchive {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxProfileArchive)
	}
	dir, err := os.MkdirTemp("", "hrns-browser-profile-")
	if err != nil {
		return "", err
	}
	if err := userdata.Extract(archive, filepath.Join(dir, "p"), nil); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
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
	opts.SessionEnvironments["web"] = webEnvironment(root, allow, &profileBounds{unpacked: o.profileLimits.Unpacked, maxArchive: o.profileLimits.MaxArchiveBytes}, &o.live, log)
	return nil
}

// safeName matches the session IDs used as profile directory names.
var safeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// liveFrame is the server's LiveFrame: the latest picture of a session's
// browser while it runs.
func (o *serveOptions) liveFrame(ctx context.Context, id string) ([]byte, time.Time, error) {
	f, err := o.live.Frame(ctx, id)
	return f.JPEG, f.At, err
}

// webEnvironment gives a session web_fetch and a browser of its own, set
// up from the session's web environment entry (start_url, headless, mode).
// A session whose entry names a browser profile (p.Profile) starts from a
// copy of it: the first time the environment runs for the session here,
// the profile's archive is unpacked (checked again, within lim) into the
// session's profile directory, which the browser then keeps and changes
// as its own; the stored profile is changed only with
// persist_browser_profile (p.Profile.Persist), when a run that started
// the browser stops (persistProfile). While the session runs, its
// browser is in live under the session's ID, keeping frames for the
// page's live view.
func webEnvironment(root string, allow func(netip.AddrPort) bool, bounds *profileBounds, live *browser.Live, log *slog.Logger) session.EnvironmentFunc {
	lim := &bounds.unpacked
	fetch := tools.Web(&tools.WebOptions{Logger: sessionLog(log)})
	// Unpacking a profile holds its archive in memory: two at once.
	seeding := make(chan struct{}, 2)
	turns := &profileTurns{busy: map[string]chan struct{}{}}
	return func(p *session.EnvironmentParams) (_ *loop.Toolset, _ func(bool), err error) {
		env, err := browser.ParseEnvironment(p.Config)
		if err != nil {
			return nil, nil, err
		}
		release := func() {}
		if p.Session != "" {
			// The session's last run may still be closing its browser
			// (its close runs after the commit that let this run
			// start): this run's browser starts once it is done.
			var waited bool
			if release, waited = turns.take(p.Session, turnWait); waited {
				log.Warn("a session's last browser did not close in time: its next run goes on", "session", p.Session, "waited", turnWait)
			}
			defer func() {
				if err != nil {
					release()
				}
			}()
		}
		blog := log
		if p.Session != "" {
			blog = log.With("session", p.Session)
		}
		o := browser.Options{Allow: allow, Logger: blog, MaxScreenshotBytes: 512 << 10, RefusalHint: browserHint("hrns serve"), LiveFrames: p.Session != "", PageMarkdown: pageMarkdown, Files: p.Files}
		env.Apply(&o)
		if p.Session != "" {
			if !safeName().MatchString(p.Session) {
				return nil, nil, fmt.Errorf("session id %q cannot name a browser profile", p.Session)
			}
			o.ProfileDir = filepath.Join(root, p.Session)
			if p.Profile != nil {
				seeding <- struct{}{}
				err := seedProfile(p.Profile, root, o.ProfileDir, lim)
				<-seeding
				if err != nil {
					return nil, nil, err
				}
			}
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
		live.Add(p.Session, b)
		return ts, func(ended bool) {
			live.Remove(p.Session, b)
			if err := b.Close(); err != nil {
				log.Warn("closing a session's browser", "session", p.Session, "err", err)
			}
			if p.Profile != nil && p.Profile.Persist != nil && b.Launched() {
				seeding <- struct{}{}
				err := persistProfile(p.Profile, o.ProfileDir, bounds)
				<-seeding
				if err != nil {
					log.Warn("writing a session's browser back into its profile", "session", p.Session, "profile", p.Profile.ID, "err", err)
				}
			}
			if ended {
				os.RemoveAll(o.ProfileDir)
			}
			release()
		}, nil
	}
}

// turnWait bounds the wait of a session's run for its last run's browser
// to close: Close (its state saved within 5 s, its processes killed and
// waited for within 5 s) and persistProfile (a minute) take less.
const turnWait = 2 * time.Minute

// profileTurns make the runs of a session on this replica take its
// browser in turn. A run parks in a commit that lets the session run
// again at once (an approval or a tool result posted just after), and
// closes its browser only afterwards; the next run's Chromium must not
// start on the profile before the last one is gone (it would not start:
// the profile is locked), nor read the profile before the last one has
// saved its cookies and tabs (and written it back, with
// persist_browser_profile).
type profileTurns struct {
	mu   sync.Mutex
	busy map[string]chan struct{} // session ID: closed when its run's browser is closed
}

// take waits until no other run of session id holds its browser, within
// wait, and holds it until release is called. waited is true when the
// bound passed: the run goes on without its turn (launching Chromium
// still waits for the last one's processes and lock, see
// browser.Options.ProfileDir).
func (t *profileTurns) take(id string, wait time.Duration) (release func(), waited bool) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	mine := make(chan struct{})
	for {
		t.mu.Lock()
		held := t.busy[id]
		if held == nil || waited {
			t.busy[id] = mine
			t.mu.Unlock()
			break
		}
		t.mu.Unlock()
		select {
		case <-held:
		case <-timer.C:
			waited = true
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			if t.busy[id] == mine {
				delete(t.busy, id)
			}
			t.mu.Unlock()
			close(mine)
		})
	}, waited
}

// seedProfile unpacks the browser profile into dir, the session's profile
// directory, unless dir exists (the session ran here before: its browser
// keeps what it changed). The archive is unpacked beside dir and renamed
// into place, so that a failure leaves no half profile.
func seedProfile(p *session.BrowserProfile, root, dir string, lim *userdata.Limits) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("the browser profiles' directory: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	archive, err := p.Archive(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(root, ".seed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := userdata.Extract(archive, filepath.Join(tmp, "p"), lim); err != nil {
		return fmt.Errorf("browser profile %s: %w", p.ID, err)
	}
	if err := os.Rename(filepath.Join(tmp, "p"), dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("browser profile %s: %w", p.ID, err)
	}
	return nil
}

// profileBounds bound the profiles a session's browser starts from and
// writes back: what an archive unpacks to, and its own size (0: 64 MiB).
type profileBounds struct {
	unpacked   userdata.Limits
	maxArchive int64
}

// persistProfile writes the session's profile directory dir back into
// the profile p (persist_browser_profile), after its browser closed: dir
// is archived without caches and links (userdata.Archive), checked with
// the rules of uploads (userdata.Check) and bounded as an upload is
// (--browser-profile-max-bytes), then stored in one write (p.Persist):
// a profile that would be refused as an upload is not written, and the
// stored one stays as it was.
func persistProfile(p *session.BrowserProfile, dir string, bounds *profileBounds) error {
	archive, err := userdata.Archive(dir, &bounds.unpacked)
	if err != nil {
		return err
	}
	max := bounds.maxArchive
	if max <= 0 {
		max = 64 << 20
	}
	if int64(len(archive)) > max {
		return fmt.Errorf("the session's profile packs to %d bytes, more than the %d a profile may hold (--browser-profile-max-bytes): not written back", len(archive), max)
	}
	if _, err := userdata.Check(archive, &bounds.unpacked); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.Persist(ctx, archive)
}

// browserHint is the way out a browser's refusal names: the flag of cmd.
func browserHint(cmd string) string {
	return "to let the browser reach such an address, the person running " + cmd +
		" can start it with --browser-allow ADDRESS, PREFIX or ADDRESS:PORT (127.0.0.1:8080)"
}

// webFetchOptions are web_fetch's options from --web-allow: the addresses
// it may reach beyond the public internet (never a cloud metadata
// address, whatever prefix holds it), and its refusals' way out.
func webFetchOptions(list string) (*tools.WebOptions, error) {
	allow, err := netpolicy.ParseAllowList(list)
	if err != nil {
		return nil, usagef("--web-allow: %v", err)
	}
	o := &tools.WebOptions{RefusalHint: "to let web_fetch reach such an address, the person running hrns can pass --web-allow ADDRESS, PREFIX or ADDRESS:PORT (127.0.0.1:8080)"}
	if allow != nil {
		o.Allow = func(ap netip.AddrPort) bool { return allow(ap) && !netpolicy.IsMetadata(ap.Addr()) }
	}
	return o, nil
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
