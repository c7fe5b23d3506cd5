package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Options configure a [Browser]. A nil *Options, and the zero value of each
// field, mean the documented defaults.
type Options struct {
	// ExecPath is the Chromium (or Chrome) binary. "" means the first of
	// chromium, chromium-browser, google-chrome and google-chrome-stable
	// found on PATH. Nothing is ever downloaded.
	ExecPath string
	// StartURL, when set, is opened in the first tab when the browser
	// starts. It is judged by the address policy like any other URL.
	StartURL string
	// Headed shows a window (it needs a display). The zero value runs
	// Chromium headless.
	Headed bool
	// ProfileDir is the browser's profile (cookies, storage, cache). ""
	// means a fresh temporary directory, removed by [Browser.Close]. A
	// directory given here is created if needed and kept: the cookies
	// and the open tabs are saved in it when the browser closes and
	// restored when it starts again, which is how a session's browser
	// survives the session waiting (see docs/browser.md). Browsers take
	// a kept directory in turn: [Browser.Close] returns once its
	// Chromium's processes are gone (killed, waited for at most 5 s) and
	// their lock removed; a browser of this process starting on it
	// waits (at most 30 s) for another one's Close, and for a lock that
	// another process or host holds on it (then kills this host's
	// processes on it, or removes another host's lock).
	ProfileDir string

	// AllowPrivate lets pages reach addresses that are not on the public
	// internet (loopback, private, link-local, metadata...). By default
	// every request a page makes is judged by the policy of web_fetch
	// (internal/netpolicy) and such addresses are refused.
	AllowPrivate bool
	// Allow, when set, lets single addresses through the policy: an
	// operator's allow-list, or the httptest servers of tests.
	Allow func(netip.AddrPort) bool
	// RefusalHint, when set, ends the note of requests the policy
	// refused: the way out for the person who runs the browser (the CLI
	// names --browser-allow).
	RefusalHint string

	// ActionTimeout bounds each tool call's browser work (navigation
	// included). 0 means 30 seconds.
	ActionTimeout time.Duration
	// LaunchTimeout bounds starting Chromium. 0 means 60 seconds.
	LaunchTimeout time.Duration
	// MaxTabs bounds the open tabs; tabs a page opens beyond it are
	// closed. 0 means 8.
	MaxTabs int
	// MaxSnapshotNodes and MaxSnapshotBytes bound a snapshot; a longer
	// one is cut, and says so. 0 means 3000 nodes and 48 KiB.
	MaxSnapshotNodes int
	MaxSnapshotBytes int
	// ViewportWidth and ViewportHeight are the window's size in CSS
	// pixels. 0 means 1280 by 800.
	ViewportWidth, ViewportHeight int
	// MaxScreenshotBytes bounds a screenshot (JPEG; its quality is
	// lowered until it fits). 0 means 1 MiB.
	MaxScreenshotBytes int
	// LiveFrames keeps a picture of the current tab for a live view
	// ([Browser.Frame]): one is taken at the end of each tool call, and
	// between calls when asked for. The model never sees these.
	LiveFrames bool
	// PageChars, when > 0, bounds the characters of page text the agent
	// reads per page: a snapshot (and, with Multimodal, the page's
	// Markdown) longer than that is cut, saying how much was left out.
	// It is the web environment's page_chars.
	PageChars int
	// Multimodal shows, with every report of the page an action gives
	// (navigate, click, type, snapshot...), a screenshot of the viewport
	// and the page as Markdown (made by PageMarkdown), besides the
	// snapshot whose refs the tools take: the web environment's
	// "multimodal" mode.
	Multimodal bool
	// PageMarkdown converts the page's HTML (at most 4 MiB of it) to
	// Markdown of at most maxBytes bytes, links resolved against base,
	// for Multimodal (hrns uses tools.HTMLToMarkdown, web_fetch's
	// converter). Nil shows no Markdown.
	PageMarkdown func(ctx context.Context, html string, base *url.URL, maxBytes int) (string, error)
	// Files, when set, is the folder of files the browser shares with
	// its user (a session's workspace's files/ folder, made if needed,
	// and opened from its parent so that a link in its place leads
	// nowhere): what pages
	// download is saved there (within MaxDownloadBytes and
	// MaxDownloads, reported in the next tool result), and
	// browser_file_upload gives pages files from there. "" refuses
	// downloads, and browser_file_upload says there is no folder.
	Files string
	// MaxDownloadBytes bounds one download (a bigger one is cancelled,
	// and the model told); 0 means 64 MiB. MaxDownloads bounds the
	// downloads one browser saves (later ones are cancelled); 0 means 50.
	MaxDownloadBytes int64
	MaxDownloads     int
	// Logger receives the browser's logs; nil discards them.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.ActionTimeout <= 0 {
		v.ActionTimeout = 30 * time.Second
	}
	if v.LaunchTimeout <= 0 {
		v.LaunchTimeout = time.Minute
	}
	if v.MaxTabs <= 0 {
		v.MaxTabs = 8
	}
	if v.MaxSnapshotNodes <= 0 {
		v.MaxSnapshotNodes = 3000
	}
	if v.MaxSnapshotBytes <= 0 {
		v.MaxSnapshotBytes = 48 << 10
		// Room for page_chars characters of up to 4 bytes each.
		if v.PageChars > 0 {
			v.MaxSnapshotBytes = min(max(v.MaxSnapshotBytes, 4*v.PageChars), MaxPageChars*4)
		}
	}
	if v.ViewportWidth <= 0 || v.ViewportHeight <= 0 {
		v.ViewportWidth, v.ViewportHeight = 1280, 800
	}
	if v.MaxScreenshotBytes <= 0 {
		v.MaxScreenshotBytes = 1 << 20
	}
	if v.MaxDownloadBytes <= 0 {
		v.MaxDownloadBytes = MaxDownloadBytes
	}
	if v.MaxDownloads <= 0 {
		v.MaxDownloads = MaxDownloads
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// ErrNoChromium is returned when no Chromium binary is found.
var ErrNoChromium = errors.New("browser: no Chromium found (install the distribution's chromium package, or set the path)")

// FindChromium returns the path of the Chromium binary [Options.ExecPath]
// "" would use, or [ErrNoChromium].
func FindChromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// A Browser is one Chromium process with its own profile, driven through
// the DevTools protocol, and the tools that let a model use it
// ([Browser.Tools]). It starts on the first tool call, not before. Tool
// calls are serialised. Close it when done: the process and its children
// are killed and a temporary profile is removed.
type Browser struct {
	o   Options
	pol *policy

	mu sync.Mutex
	// the following are guarded by mu
	closed      bool
	started     bool
	profile     string // the profile directory in use
	tempProfile bool
	// release gives the kept profile up to the next browser of this
	// process (profilelock.go); nil when none is held.
	release     func()
	px          *proxy
	allocCancel context.CancelFunc
	bctx        context.Context // the chromedp browser context (its first tab)
	bcancel     context.CancelFunc
	tabs        []*tab
	cur         int
	restarted   string // a note for the next result
	launched    bool   // Chromium was started since New
	files       *files // downloads and uploads, with Options.Files

	// frame is the latest picture for a live view (Options.LiveFrames),
	// guarded by fmu, not mu: it is read while a tool call holds mu.
	fmu   sync.Mutex
	frame Frame

	// the calls sent to a person for typing into a password field
	// (password.go)
	passwords
}

// New returns a browser; Chromium starts on the first tool call.
func New(opts *Options) *Browser {
	o := opts.withDefaults()
	return &Browser{o: o, pol: &policy{allowPrivate: o.AllowPrivate, allow: o.Allow, log: o.Logger}}
}

// launch starts Chromium. b.mu is held.
func (b *Browser) launch(ctx context.Context) (err error) {
	path := b.o.ExecPath
	if path == "" {
		if path, err = FindChromium(); err != nil {
			return err
		}
	}
	b.profile, b.tempProfile = b.o.ProfileDir, false
	if b.profile == "" {
		if b.profile, err = os.MkdirTemp("", "hrns-browser-"); err != nil {
			return fmt.Errorf("browser: creating the profile: %w", err)
		}
		b.tempProfile = true
	} else if err := os.MkdirAll(b.profile, 0o700); err != nil {
		return fmt.Errorf("browser: creating the profile: %w", err)
	} else if b.release, err = takeProfile(b.profile); err != nil {
		return err
	} else if err := awaitProfile(b.profile); err != nil {
		b.release()
		b.release = nil
		return err
	}
	if b.px, err = startProxy(b.pol); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			b.stop(false)
		}
	}()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(b.profile),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(b.o.ViewportWidth, b.o.ViewportHeight),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		// Every connection through the policy proxy, loopback included.
		chromedp.ProxyServer("http://" + b.px.addr()),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// Chromium gets a small environment of its own: none of this
		// process's variables (API keys among them) reach it.
		chromedp.NoInheritEnv,
		chromedp.Env(browserEnv(b.profile, b.o.Headed)...),
	}
	if !b.o.Headed {
		opts = append(opts, chromedp.Headless)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b.allocCancel, b.bctx, b.bcancel = acancel, bctx, bcancel

	// The first Run starts the browser; it must not carry a timeout (that
	// would stop the browser), so the bound is a timer.
	timer := time.AfterFunc(b.o.LaunchTimeout, acancel)
	stopOnCancel := context.AfterFunc(ctx, acancel)
	err = chromedp.Do(bctx)
	timer.Stop()
	stopOnCancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("browser: starting Chromium (%s): %w", path, err)
	}
	c := chromedp.FromContext(bctx)
	lctx, cancel := context.WithTimeout(ctx, b.o.ActionTimeout)
	defer cancel()
	if b.o.Files != "" {
		if err := b.startFiles(lctx); err != nil {
			return err
		}
	} else if _, err := cdp.Call(lctx, c.Browser, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny}); err != nil {
		return fmt.Errorf("browser: refusing downloads: %w", err)
	}
	first := &tab{b: b, ctx: bctx, id: c.Target.TargetID}
	if err := first.attach(lctx); err != nil {
		return err
	}
	b.tabs, b.cur = []*tab{first}, 0
	b.started, b.launched = true, true

	urls := b.restore(lctx)
	if len(urls) == 0 && b.o.StartURL != "" {
		urls = []string{b.o.StartURL}
	}
	for i, u := range urls {
		t := first
		if i > 0 {
			if t, err = b.newTab(lctx); err != nil {
				return err
			}
		}
		if err := t.navigate(lctx, u); err != nil {
			b.o.Logger.Warn("browser: opening a start page", "url", u, "err", err)
		}
	}
	b.cur = 0
	return nil
}

// ensure starts the browser if it is not running (again, if it died).
// b.mu is held.
func (b *Browser) ensure(ctx context.Context) error {
	if b.closed {
		return errors.New("the browser is closed")
	}
	if b.started && b.bctx.Err() == nil {
		return nil
	}
	if b.started {
		b.stop(false)
		b.restarted = "The browser had stopped; it was started again (open pages were reloaded, what they held is lost)."
	}
	return b.launch(ctx)
}

// newTab opens a tab and makes it current. b.mu is held.
func (b *Browser) newTab(ctx context.Context) (*tab, error) {
	if len(b.tabs) >= b.o.MaxTabs {
		return nil, fmt.Errorf("at most %d tabs may be open; close one first", b.o.MaxTabs)
	}
	tctx, cancel := chromedp.NewContext(b.bctx)
	stop := context.AfterFunc(ctx, cancel)
	err := chromedp.Do(tctx)
	stop()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	t := &tab{b: b, ctx: tctx, cancel: cancel, id: chromedp.FromContext(tctx).Target.TargetID}
	if err := t.attach(ctx); err != nil {
		cancel()
		return nil, err
	}
	b.tabs = append(b.tabs, t)
	b.cur = len(b.tabs) - 1
	return t, nil
}

// adoptOpened adopts the tabs pages opened; when a page said it opened a
// window (Page.windowOpen) and no new tab is there yet, it waits a little
// for the tab to appear. b.mu is held.
func (b *Browser) adoptOpened(ctx context.Context) string {
	want := 0
	for _, t := range b.tabs {
		want += t.opened
		t.opened = 0
	}
	before := len(b.tabs)
	notes := b.adopt(ctx)
	for i := 0; want > 0 && len(b.tabs) == before && notes == "" && i < 50 && ctx.Err() == nil; i++ {
		time.Sleep(50 * time.Millisecond)
		if n := b.adopt(ctx); n != "" {
			notes = strings.TrimPrefix(notes+"\n"+n, "\n")
		}
	}
	return notes
}

// adopt attaches the tabs that pages opened (window.open, target=_blank)
// since the last call, closing those beyond MaxTabs, and returns a note
// for the model. b.mu is held.
func (b *Browser) adopt(ctx context.Context) string {
	c := chromedp.FromContext(b.bctx)
	infos, err := cdp.Call(ctx, c.Browser, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return ""
	}
	known := map[target.ID]bool{}
	for _, t := range b.tabs {
		known[t.id] = true
	}
	var notes []string
	for _, in := range infos.TargetInfos {
		if in.Type != "page" || known[in.TargetID] {
			continue
		}
		if len(b.tabs) >= b.o.MaxTabs {
			cdp.Call(ctx, c.Browser, target.CloseTarget, target.CloseTargetParams{TargetID: in.TargetID})
			notes = append(notes, fmt.Sprintf("The page opened a tab (%s), which was closed: at most %d tabs may be open.", quote(in.URL, 200), b.o.MaxTabs))
			continue
		}
		tctx, cancel := chromedp.NewContext(b.bctx, chromedp.WithTargetID(in.TargetID))
		stop := context.AfterFunc(ctx, cancel)
		err := chromedp.Do(tctx)
		stop()
		if err != nil {
			cancel()
			continue
		}
		t := &tab{b: b, ctx: tctx, cancel: cancel, id: in.TargetID}
		if err := t.attach(ctx); err != nil {
			cancel()
			continue
		}
		b.tabs = append(b.tabs, t)
		b.cur = len(b.tabs) - 1
		notes = append(notes, fmt.Sprintf("The page opened a new tab (index %d), which is now the current tab.", b.cur))
	}
	// Tabs that closed themselves (window.close()).
	alive := map[target.ID]bool{}
	for _, in := range infos.TargetInfos {
		alive[in.TargetID] = true
	}
	kept := b.tabs[:0]
	for i, t := range b.tabs {
		if alive[t.id] || i == 0 && len(b.tabs) == 1 {
			kept = append(kept, t)
			continue
		}
		if t.cancel != nil {
			t.cancel()
		}
		notes = append(notes, "A tab closed itself.")
	}
	b.tabs = kept
	b.cur = max(min(b.cur, len(b.tabs)-1), 0)
	if len(b.tabs) == 0 {
		if _, err := b.newTab(ctx); err != nil {
			notes = append(notes, "Every tab closed, and no new one could be opened: "+err.Error())
		}
	}
	return strings.Join(notes, "\n")
}

// Close saves the profile's state when it is kept, kills Chromium and its
// children, and removes a temporary profile. It is idempotent and safe to
// call concurrently: it waits for a tool call in progress (bounded by the
// action timeout), and later calls fail.
func (b *Browser) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	return b.stop(true)
}

// Launched reports whether Chromium was started (by a tool call) since
// [New]: whether the profile may have changed.
func (b *Browser) Launched() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.launched
}

// stop ends the browser process; save keeps the state of a kept profile.
// b.mu is held.
func (b *Browser) stop(save bool) error {
	var err error
	if b.started && save && !b.tempProfile {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = b.save(ctx)
		cancel()
	}
	var own []int
	if b.profile != "" && !b.tempProfile {
		own = ownProcs(b.profile) // before the main process dies and its helpers lose their parent
	}
	if b.allocCancel != nil {
		b.allocCancel()
		b.allocCancel = nil
	}
	if b.bcancel != nil {
		b.bcancel()
	}
	if b.profile != "" && !b.tempProfile {
		// The next browser on the kept profile starts once these
		// processes are gone and their lock with them. Only this
		// browser's: another process's browser may have started on the
		// profile since its main process died.
		if killAndWait(b.profile, own) {
			removeOwnLock(b.profile, own)
		}
		if b.release != nil {
			b.release()
			b.release = nil
		}
	} else if b.profile != "" {
		killLeftovers(b.profile)
	}
	if b.px != nil {
		b.px.close()
		b.px = nil
	}
	if b.files != nil {
		os.RemoveAll(b.files.scratch)
		b.files = nil
	}
	if b.tempProfile && b.profile != "" {
		err = errors.Join(err, removeAllRetry(b.profile))
	} else if b.profile != "" {
		now := time.Now()
		os.Chtimes(b.profile, now, now) // used now, for SweepProfiles
	}
	b.started, b.tabs, b.cur = false, nil, 0
	return err
}

// state is what a kept profile holds between runs, besides Chromium's own
// files: Chromium keeps neither session cookies nor open tabs on its own.
type state struct {
	Cookies []*network.Cookie `json:"cookies,omitempty"`
	Tabs    []string          `json:"tabs,omitempty"`
	Current int               `json:"current,omitempty"`
}

const stateFile = "hrns-state.json"

// save writes the cookies and the tabs' URLs in the profile.
func (b *Browser) save(ctx context.Context) error {
	if b.bctx == nil || b.bctx.Err() != nil {
		return nil
	}
	c := chromedp.FromContext(b.bctx)
	var st state
	if res, err := cdp.Call(ctx, c.Browser, storage.GetCookies, storage.GetCookiesParams{}); err == nil {
		st.Cookies = res.Cookies
	}
	for _, t := range b.tabs {
		if u := t.location(ctx); u != "" && u != "about:blank" {
			st.Tabs = append(st.Tabs, u)
		}
	}
	st.Current = b.cur
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.profile, stateFile), data, 0o600)
}

// restore sets the saved cookies and returns the saved tabs' URLs, the
// current one first.
func (b *Browser) restore(ctx context.Context) []string {
	if b.tempProfile {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(b.profile, stateFile))
	if err != nil || len(data) > 16<<20 {
		return nil
	}
	var st state
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	c := chromedp.FromContext(b.bctx)
	var params []*network.CookieParam
	for _, k := range st.Cookies {
		p := &network.CookieParam{Name: k.Name, Value: k.Value, Domain: k.Domain, Path: k.Path,
			Secure: k.Secure, HTTPOnly: k.HTTPOnly, SameSite: k.SameSite}
		if !k.Session && k.Expires > 0 {
			p.Expires = cdp.TimeSinceEpoch(k.Expires)
		}
		params = append(params, p)
	}
	if len(params) > 0 {
		if _, err := cdp.Call(ctx, c.Browser, storage.SetCookies, storage.SetCookiesParams{Cookies: params}); err != nil {
			b.o.Logger.Warn("browser: restoring cookies", "err", err)
		}
	}
	tabs := st.Tabs
	if len(tabs) > b.o.MaxTabs {
		tabs = tabs[:b.o.MaxTabs]
	}
	if st.Current > 0 && st.Current < len(tabs) {
		tabs[0], tabs[st.Current] = tabs[st.Current], tabs[0]
	}
	return tabs
}

// browserEnv is Chromium's environment: a home in its profile, a plain
// PATH, UTC, and the display variables when it shows a window.
func browserEnv(profile string, headed bool) []string {
	env := []string{"HOME=" + profile, "PATH=/usr/local/bin:/usr/bin:/bin", "TZ=UTC", "LANG=C.UTF-8"}
	if headed {
		for _, k := range []string{"DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XAUTHORITY"} {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	return env
}

// killLeftovers kills the processes started with the profile dir (Chromium's
// helpers can outlive the main process when it is killed).
func killLeftovers(dir string) {
	want := []byte("--user-data-dir=" + dir + "\x00")
	for pass := 0; pass < 3; pass++ {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		found := 0
		for _, e := range entries {
			pid := 0
			if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !strings.Contains(string(cmdline)+"\x00", string(want)) {
				continue
			}
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
				found++
			}
		}
		if found == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeAllRetry removes dir, retrying while a dying helper writes in it.
func removeAllRetry(dir string) error {
	var err error
	for range 10 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
