package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUIBrowserDesktopLive watches a session's desktop in a headless
// Chromium: a real sandboxed desktop (Xvfb, in the sandbox) that the
// agent drives with one computer call of several actions. While the model
// thinks about the next step, the page shows the desktop's latest picture
// live, with the call's actions drawn on it where they happened (the
// click's mark over the click's pixel of the picture) and listed with
// what was typed and pressed, as text: a typed "<b>" is no element, and
// a bidi override shows as an escape. Another key gets no picture. Once
// the session has ended there is no live picture; the page, opened
// again, shows the call's screenshot from the events, with the same
// actions drawn.
func TestUIBrowserDesktopLive(t *testing.T) {
	for _, tool := range []string{"Xvfb", "xdotool", "xwd", "xmessage"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	const call = `{"action":"batch","actions":[` +
		`{"action":"left_click","coordinate":[500,420]},` +
		`{"action":"type","text":"<b>bold</b>\u202eevil"},` +
		`{"action":"key","text":"ctrl+a"},` +
		`{"action":"scroll","coordinate":[300,200],"scroll_direction":"down","scroll_amount":3},` +
		`{"action":"left_click_drag","start_coordinate":[10,10],"coordinate":[200,150]}]}`
	gate := make(chan struct{}, 1)
	model := openaitest.NewServer(
		calls(openaitest.ToolCall("call_1", "computer", call)),
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			select {
			case <-gate:
			case <-time.After(time.Minute):
			}
			return openaitest.Reply{Text: "clicked, typed and scrolled"}
		}},
	)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var live desktop.Live
	apps := [][]string{{"xmessage", "-geometry", "+60+80", "-buttons", "Apple,Banana", "Pick a fruit"}}
	work := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		l := desktop.NewLazy(&desktop.SandboxOptions{Width: 800, Height: 600, Apps: apps, WindowManager: []string{}, Options: desktop.Options{LiveFrames: p.Session != ""}})
		if p.Session == "" {
			return l.Tools(), nil, nil
		}
		live.Add(p.Session, l)
		return l.Tools(), func(bool) { live.Remove(p.Session, l); l.Close() }, nil
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		SessionEnvironments: map[string]session.EnvironmentFunc{"workstation": work},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	frame := func(ctx context.Context, id string) ([]byte, time.Time, error) {
		f, err := live.Frame(ctx, id)
		return f.JPEG, f.At, err
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, LiveDesktopFrame: frame})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL + uiPrefix, st: st}

	b := newUIBrowser(t)
	b.login(e)
	id := e.create(keyAlice, `{"agent":{"name":"deskbot","environments":["workstation"]},"messages":"click, type and scroll"}`)

	type shown struct {
		Size    []int      `json:"size"`
		Marks   []string   `json:"marks"`
		Click   []float64  `json:"click"` // the click mark's centre, and where [500, 420] of the picture is on the page
		Lines   []string   `json:"lines"`
		Bold    int        `json:"bold"`
		Drag    string     `json:"drag"`
		Scroll  int        `json:"scroll"`
		Frames  int        `json:"frames"`
		Sources [][]string `json:"sources"`
	}
	read := `(() => {
		const box = document.querySelector('#desk'), img = document.querySelector('#desk-img');
		const c = document.querySelector('#desk .mark[data-kind="left_click"] circle').getBoundingClientRect();
		const r = img.getBoundingClientRect();
		return {
			size: [img.naturalWidth, img.naturalHeight],
			marks: [...document.querySelectorAll('#desk .mark')].map((g) => g.dataset.n + ' ' + g.dataset.kind + ' ' + (g.dataset.x || '') + ' ' + (g.dataset.y || '')),
			click: [c.left + c.width / 2, c.top + c.height / 2, r.left + 500 / img.naturalWidth * r.width, r.top + 420 / img.naturalHeight * r.height],
			lines: [...document.querySelectorAll('#desk-actions li')].map((li) => li.textContent),
			bold: document.querySelectorAll('#desk-actions b, #desk b').length,
			drag: (document.querySelector('#desk .mark[data-kind="left_click_drag"] polyline') || {getAttribute: () => ''}).getAttribute('points'),
			scroll: document.querySelectorAll('#desk .mark[data-kind="scroll"] line').length,
			frames: Number(box.dataset.frames || 0),
		};
	})()`
	wantLines := []string{
		"1. left click at [500, 420]",
		`2. typed "<b>bold</b>\u202eevil"`,
		`3. pressed keys "ctrl+a"`,
		"4. scrolled down by 3 at [300, 200]",
		"5. dragged from [10, 10] to [200, 150]",
	}
	check := func(when string, s shown) {
		t.Helper()
		if len(s.Size) != 2 || s.Size[0] != 800 || s.Size[1] != 600 {
			t.Errorf("%s: a picture of %v", when, s.Size)
		}
		if strings.Join(s.Marks, "|") != "1 left_click 500 420|4 scroll 300 200|5 left_click_drag 200 150" {
			t.Errorf("%s: marks %q", when, s.Marks)
		}
		if len(s.Click) != 4 || abs(s.Click[0]-s.Click[2]) > 2 || abs(s.Click[1]-s.Click[3]) > 2 {
			t.Errorf("%s: the click is drawn at %v", when, s.Click)
		}
		if strings.Join(s.Lines, "\n") != strings.Join(wantLines, "\n") || s.Bold != 0 {
			t.Errorf("%s: lines\n%s\nwant\n%s\n(%d bold elements)", when, strings.Join(s.Lines, "\n"), strings.Join(wantLines, "\n"), s.Bold)
		}
		if s.Drag != "10,10 200,150" || s.Scroll != 1 {
			t.Errorf("%s: drag %q, %d scroll arrows", when, s.Drag, s.Scroll)
		}
	}
	var got shown
	b.step("live, with the call drawn",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.Poll[chromedp.Void](`(() => { const i = document.querySelector('#desk[data-source="live"] #desk-img'); return !!(i && i.complete && i.naturalWidth && document.querySelectorAll('#desk .mark').length === 3 && Number(document.querySelector('#desk').dataset.frames) >= 2); })()`),
		eval(read, &got),
	)
	check("live", got)
	// Another key sees nothing of it; the key's own gets a JPEG.
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live/desktop", keyBob, nil), http.StatusNotFound)
	r := e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live/desktop", keyAlice, nil), http.StatusOK)
	if r.header.Get("Content-Type") != "image/jpeg" || r.header.Get("Cache-Control") != "no-store" || !bytes.HasPrefix(r.body, []byte{0xff, 0xd8}) {
		t.Errorf("a live frame: %v, %d bytes", r.header, len(r.body))
	}
	// The picture is the display's: the dialog shows in it (white, at
	// +60+80), in a frame taken between calls if it mapped after the
	// call's screenshot. (The click is away from it: a click on one of
	// its buttons would close it.)
	b.step("the dialog, live",
		chromedp.Poll[chromedp.Void](`(() => {
			const i = document.querySelector('#desk[data-source="live"] #desk-img');
			if (!i || !i.complete || !i.naturalWidth) return false;
			const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
			const g = c.getContext('2d'); g.drawImage(i, 0, 0);
			const [r, gr, b] = g.getImageData(120, 84, 1, 1).data;
			return r > 200 && gr > 200 && b > 200;
		})()`),
	)
	if shots := os.Getenv("HRNS_UI_SCREENSHOTS"); shots != "" {
		b.shot(filepath.Join(shots, "ui-desktop.png"))
	}
	gate <- struct{}{}
	var note string
	b.step("ended",
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#desk-note').textContent.startsWith('the session has ended')`),
		eval(`document.querySelector('#desk-note').textContent`, &note),
	)
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live/desktop", keyAlice, nil), http.StatusNotFound)
	// Opened again: the screenshot of the events, with the same call.
	b.step("from the events",
		eval(`location.hash = '#/'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`#sessions`)),
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.Poll[chromedp.Void](`(() => { const i = document.querySelector('#desk[data-source="event"] #desk-img'); return !!(i && i.complete && i.naturalWidth && document.querySelectorAll('#desk .mark').length === 3); })()`),
		eval(read, &got),
	)
	check("from the events", got)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
