package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/hrns-dev/hrns/internal/netpolicy"
)

// A tab is one page target and what the tools keep about it.
type tab struct {
	b      *Browser
	ctx    context.Context // the chromedp context of the target
	cancel context.CancelFunc
	id     target.ID

	// refs name elements of the snapshots: the same element keeps its
	// ref across snapshots, until the page is replaced.
	refs    map[string]cdp.BackendNodeID
	byNode  map[cdp.BackendNodeID]string
	nextRef int
	last    string // the last snapshot returned

	// opened counts the windows the page opened during actions
	// (Page.windowOpen), so that the new tabs are waited for.
	opened int

	mu      sync.Mutex
	dialogs []string // dialogs handled since the last result
	chooser *chooser // a file chooser waiting for browser_file_upload
}

// target returns the chromedp target of the tab.
func (t *tab) target() *chromedp.Target { return chromedp.FromContext(t.ctx).Target }

// attach starts the tab's guards: the Fetch domain pauses every request
// for the address policy, and dialogs are answered so that no page stalls.
func (t *tab) attach(ctx context.Context) error {
	tg := t.target()
	paused, cancelPaused := tg.Subscribe(fetch.RequestPaused.Method)
	dialogs, cancelDialogs := tg.Subscribe(page.JavascriptDialogOpening.Method)
	if _, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		cancelPaused()
		cancelDialogs()
		return fmt.Errorf("browser: intercepting requests: %w", err)
	}
	if _, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: int64(t.b.o.ViewportWidth), Height: int64(t.b.o.ViewportHeight), DeviceScaleFactor: 1}); err != nil {
		cancelPaused()
		cancelDialogs()
		return fmt.Errorf("browser: setting the viewport: %w", err)
	}
	if t.b.o.Files != "" {
		if err := t.watchChoosers(ctx); err != nil {
			cancelPaused()
			cancelDialogs()
			return err
		}
	}
	sem := make(chan struct{}, 8)
	go func() {
		defer cancelPaused()
		for {
			select {
			case <-t.ctx.Done():
				return
			case raw, ok := <-paused:
				if !ok {
					return
				}
				var ev fetch.EventRequestPaused
				if json.Unmarshal(raw, &ev) != nil || ev.Request == nil {
					continue
				}
				select {
				case sem <- struct{}{}:
				case <-t.ctx.Done():
					return
				}
				go func() {
					defer func() { <-sem }()
					t.judge(&ev)
				}()
			}
		}
	}()
	go func() {
		defer cancelDialogs()
		for {
			select {
			case <-t.ctx.Done():
				return
			case raw, ok := <-dialogs:
				if !ok {
					return
				}
				var ev page.EventJavascriptDialogOpening
				if json.Unmarshal(raw, &ev) != nil {
					continue
				}
				t.dialog(&ev)
			}
		}
	}()
	return nil
}

// judge lets a paused request go on, or fails it when the policy refuses
// its URL.
func (t *tab) judge(ev *fetch.EventRequestPaused) {
	ctx, cancel := context.WithTimeout(t.ctx, 15*time.Second)
	defer cancel()
	tg := t.target()
	u := ev.Request.URL + ev.Request.URLFragment
	if strings.HasPrefix(u, "data:") || strings.HasPrefix(u, "blob:") {
		cdp.Call(ctx, tg, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		return
	}
	if err := t.b.pol.checkURL(ctx, u); err != nil {
		t.b.pol.logRefusal("a request for "+quote(u, 200), err)
		t.b.pol.note(fmt.Sprintf("a request for %s: %s", quote(u, 200), reasonText(err)))
		cdp.Call(ctx, tg, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		return
	}
	cdp.Call(ctx, tg, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
}

// hint is the way out of a refusal by the policy (Options.RefusalHint),
// to end its message with; "" for other errors or when there is none.
func (b *Browser) hint(err error) string {
	if _, ok := errors.AsType[*netpolicy.BlockedError](err); !ok || b.o.RefusalHint == "" {
		return ""
	}
	return " (" + b.o.RefusalHint + ")"
}

func reasonText(err error) string {
	if text, ok := netpolicy.Describe(err); ok {
		// Without the address the name resolved to: the model may work
		// for an API key of hrns serve, who must not learn what the
		// deployment's names resolve to.
		return text
	}
	return err.Error()
}

// dialog answers a JavaScript dialog: alerts and "leave page?" are
// accepted, confirm and prompt dismissed; the model is told.
func (t *tab) dialog(ev *page.EventJavascriptDialogOpening) {
	accept := ev.Type == page.DialogTypeAlert || ev.Type == page.DialogTypeBeforeunload
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	defer cancel()
	cdp.Call(ctx, t.target(), page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
	verb := "dismissed"
	if accept {
		verb = "accepted"
	}
	t.mu.Lock()
	if len(t.dialogs) < 10 {
		t.dialogs = append(t.dialogs, fmt.Sprintf("The page showed a %s dialog, %s: %s", ev.Type, verb, quote(ev.Message, 500)))
	}
	t.mu.Unlock()
}

func (t *tab) takeDialogs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.dialogs
	t.dialogs = nil
	return d
}

// navigate loads u in the tab and waits for it to load.
func (t *tab) navigate(ctx context.Context, u string) error {
	if u == "about:blank" {
		// The empty page: nothing to judge.
	} else if err := t.b.pol.checkURL(ctx, u); err != nil {
		t.b.pol.logRefusal("opening "+quote(u, 200), err)
		return fmt.Errorf("refused to open %s: %s%s", quote(u, 200), reasonText(err), t.b.hint(err))
	}
	var errText string
	err := t.settleAfter(ctx, func(ctx context.Context) error {
		res, err := cdp.Call(ctx, t.target(), page.Navigate, page.NavigateParams{URL: u})
		if err != nil {
			return err
		}
		errText = res.ErrorText
		if res.IsDownload && t.b.o.Files == "" {
			errText = "the URL is a download, and downloads are disabled"
		}
		return nil
	})
	if err != nil {
		return err
	}
	if errText != "" {
		return fmt.Errorf("opening %s failed: %s", quote(u, 200), errText)
	}
	return nil
}

// settleAfter runs act and then waits for what it set off: a navigation
// that starts soon after it is waited for until its page has loaded.
func (t *tab) settleAfter(ctx context.Context, act func(ctx context.Context) error) error {
	tg := t.target()
	started, c1 := tg.Subscribe(page.FrameStartedLoading.Method)
	defer c1()
	stopped, c2 := tg.Subscribe(page.FrameStoppedLoading.Method)
	defer c2()
	opened, c3 := tg.Subscribe(page.WindowOpen.Method)
	defer c3()
	if err := act(ctx); err != nil {
		return err
	}
	loading := 0
	grace := time.NewTimer(150 * time.Millisecond)
	defer grace.Stop()
	for {
		select {
		case <-ctx.Done():
			if loading > 0 {
				return nil // the page is slow: the result says what it shows so far
			}
			return ctx.Err()
		case <-opened:
			t.opened++
		case <-started:
			loading++
		case <-stopped:
			loading--
			if loading <= 0 {
				// A page's scripts may go on to navigate again.
				loading = 0
				grace.Reset(100 * time.Millisecond)
			}
		case <-grace.C:
			if loading == 0 {
				return nil
			}
		}
	}
}

// eval evaluates a JavaScript expression in the page and decodes its value
// into out (which may be nil).
func (t *tab) eval(ctx context.Context, expr string, out any) error {
	return t.evalIn(ctx, 0, expr, out)
}

// evalIn is eval in the execution context world (0: the page's own); see
// [tab.isolatedWorld].
func (t *tab) evalIn(ctx context.Context, world runtime.ExecutionContextID, expr string, out any) error {
	res, err := cdp.Call(ctx, t.target(), runtime.Evaluate, runtime.EvaluateParams{
		Expression: expr, ReturnByValue: ptr(true), AwaitPromise: ptr(true), ContextID: world,
	})
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("script error: %s", res.ExceptionDetails.Text)
	}
	if out == nil || res.Result == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// isolatedWorld returns an execution context of the tab's main frame in
// a JavaScript world of hrns's own (Page.createIsolatedWorld): it sees
// the page's DOM, but not what the page's scripts did to their own
// globals and prototypes. What is read there of an element (its type,
// its document's origin) is what the browser says, not what the page
// redefined it to answer: a page can give Node.prototype.ownerDocument
// or an input's type any getter it likes in its own world.
func (t *tab) isolatedWorld(ctx context.Context) (runtime.ExecutionContextID, error) {
	tree, err := cdp.Call(ctx, t.target(), page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return 0, err
	}
	if tree.FrameTree == nil || tree.FrameTree.Frame == nil {
		return 0, errors.New("the page has no main frame")
	}
	w, err := cdp.Call(ctx, t.target(), page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: tree.FrameTree.Frame.ID, WorldName: "hrns"})
	if err != nil {
		return 0, err
	}
	if w.ExecutionContextID == 0 {
		return 0, errors.New("the page gave no isolated world")
	}
	return w.ExecutionContextID, nil
}

// location returns the tab's URL ("" when it cannot be read).
func (t *tab) location(ctx context.Context) string {
	var u string
	if t.eval(ctx, "location.href", &u) != nil {
		return ""
	}
	return u
}

// title returns the tab's title.
func (t *tab) title(ctx context.Context) string {
	var s string
	t.eval(ctx, "document.title", &s)
	return s
}

func ptr[T any](v T) *T { return &v }

// quote renders untrusted page text for the model: quoted, control
// characters escaped, at most n bytes.
func quote(s string, n int) string {
	cut := false
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
		cut = true
	}
	q, _ := json.Marshal(s)
	out := string(q)
	if cut {
		out += "…"
	}
	return out
}
