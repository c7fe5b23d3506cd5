package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// uiPrefix is the path prefix the web page's tests serve the server
// under, as a reverse proxy would.
const uiPrefix = "/hrns"

// newUIEnv is a real server behind the path prefix uiPrefix, with an
// "ops" agent whose deploy tool needs approval and returns hostile text.
func newUIEnv(t *testing.T, replies ...openaitest.Reply) *env {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	deploy := loop.NewTool("deploy", "Deploys a service.", func(_ context.Context, in struct {
		Service string `json:"service"`
	}) (string, error) {
		return hostile + " deployed " + in.Service + disguised, nil
	})
	deploy.RequiresApproval = true
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Agents:   map[string]*session.AgentConfig{"ops": {Description: "Deploys.", Toolsets: []string{"deploy"}}},
		Toolsets: map[string]*loop.Toolset{"deploy": loop.MustToolset(deploy)},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, server.New(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL + uiPrefix, st: st}
}

// hostile is tool output that would run script if the page parsed it as
// HTML.
const hostile = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`

// disguised is tool output with a terminal escape, a right-to-left
// override and a zero-width space, which the page shows as escapes.
const disguised = " \x1b[31mred \u202eevil\u200b"

// disguisedShown is how the page shows disguised.
const disguisedShown = ` \u001b[31mred \u202eevil\u200b`

func TestUICookieLogin(t *testing.T) {
	e := newUIEnv(t, calls(openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`)))
	// The page and its security headers.
	r := e.expect(e.do("GET", "/ui/", "", nil), http.StatusOK)
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	if !strings.Contains(string(r.body), `src="app.js"`) || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("page: %v\n%s", r.header, r.body)
	}
	e.expect(e.do("GET", "/ui/app.js", "", nil), http.StatusOK)
	e.expect(e.do("GET", "/ui/nothing.js", "", nil), http.StatusNotFound)
	// /ui redirects relatively, so that a path prefix survives.
	req, _ := http.NewRequest("GET", e.url+"/ui", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "ui/" {
		t.Errorf("GET /ui: %d %q", resp.StatusCode, loc)
	}

	// Login: a wrong key is refused, a form post is refused (415), a
	// page of another origin is refused (403).
	e.expect(e.do("POST", "/ui/login", "", `{"key":"sk-wrong"}`), http.StatusUnauthorized)
	e.expect(e.do("POST", "/ui/login", "", `{"key":"sk-alice"}`, "Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType)
	e.expect(e.do("POST", "/ui/login", "", `{"key":"sk-alice"}`, "Origin", "https://evil.example"), http.StatusForbidden)
	r = e.expect(e.do("POST", "/ui/login", "", `{"key":"sk-alice"}`), http.StatusOK)
	var login struct {
		CSRF     string `json:"csrf"`
		LoggedIn bool   `json:"logged_in"`
	}
	r.json(&login)
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" || cookies[0].Secure {
		t.Fatalf("cookies = %+v", cookies)
	}
	if login.CSRF == "" || !login.LoggedIn || strings.Contains(cookies[0].Value, keyAlice) {
		t.Fatalf("login = %+v, cookie %q", login, cookies[0].Value)
	}
	cookie := "hrns_ui=" + cookies[0].Value
	r = e.expect(e.do("GET", "/ui/session", "", nil, "Cookie", cookie), http.StatusOK)
	if !strings.Contains(string(r.body), login.CSRF) {
		t.Errorf("session = %s", r.body)
	}

	// The API takes the cookie: reads as is, changes only with the CSRF
	// token.
	id := e.create(keyAlice, `{"agent":"ops","messages":"deploy api"}`)
	e.expect(e.do("GET", "/api/v2/sessions/"+id, "", nil, "Cookie", cookie), http.StatusOK)
	e.expect(e.do("GET", "/api/v2/sessions", "", nil, "Cookie", "hrns_ui=forged"), http.StatusUnauthorized)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/pause", "", nil, "Cookie", cookie), http.StatusForbidden)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/pause", "", nil, "Cookie", cookie, "X-CSRF-Token", "wrong"), http.StatusForbidden)
	e.expect(e.do("DELETE", "/api/v2/sessions/"+id, "", nil, "Cookie", cookie), http.StatusForbidden)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/pause", "", nil, "Cookie", cookie, "X-CSRF-Token", login.CSRF), http.StatusAccepted)
	// Another key's cookie does not see the session.
	var bob struct{ CSRF string }
	rb := e.expect(e.do("POST", "/ui/login", "", `{"key":"sk-bob"}`), http.StatusOK)
	rb.json(&bob)
	bobCookie := "hrns_ui=" + (&http.Response{Header: rb.header}).Cookies()[0].Value
	e.expect(e.do("GET", "/api/v2/sessions/"+id, "", nil, "Cookie", bobCookie), http.StatusNotFound)

	// Logout needs the token too, then the cookie is dead.
	e.expect(e.do("POST", "/ui/logout", "", nil, "Cookie", cookie), http.StatusForbidden)
	e.expect(e.do("POST", "/ui/logout", "", nil, "Cookie", cookie, "X-CSRF-Token", login.CSRF), http.StatusNoContent)
	e.expect(e.do("GET", "/api/v2/sessions/"+id, "", nil, "Cookie", cookie), http.StatusUnauthorized)
}

// TestUIBrowser drives the page in a headless Chromium: log in, watch a
// session's events arrive live, approve a call whose result is hostile
// HTML (shown as text, nothing runs), pause and resume a session, answer
// its client tool by hand, and look at both pages on a phone's viewport.
func TestUIBrowser(t *testing.T) {
	path, err := browser.FindChromium()
	if err != nil {
		t.Skip(err)
	}
	e := newUIEnv(t,
		calls(openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`)),
		openaitest.Reply{Text: "done " + hostile},
		calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)),
		openaitest.Reply{Text: "4242 shipped"},
		openaitest.Reply{Text: "you are welcome"},
	)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	// The browser starts on bctx, so that it outlives ctx for the failure
	// screenshot.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	// A bound on the whole run, not a threshold: the waits below end on
	// events of the page.
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	// shot writes a PNG of the page: name is a path, or a file name under
	// testdata.
	shot := func(name string) {
		sctx, scancel := context.WithTimeout(bctx, 10*time.Second)
		defer scancel()
		if buf, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)); err == nil {
			if !strings.Contains(name, "/") {
				name = filepath.Join("testdata", name)
			}
			os.WriteFile(name, buf, 0o644)
		}
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			shot("ui-failure.png")
			dctx, dcancel := context.WithTimeout(bctx, 5*time.Second)
			text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			dcancel()
			t.Logf("the page:\n%s", text)
			t.Fatalf("%s: %v (screenshot in testdata/ui-failure.png)", name, err)
		}
	}
	// eval evaluates js into *v (nil: the result is dropped).
	eval := func(js string, v any) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			r, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
			if err != nil || v == nil {
				return err
			}
			return json.Unmarshal(r, v)
		})
	}

	step("login",
		chromedp.Navigate(e.url+"/ui"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), keyAlice),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#sessions")),
	)

	// The list shows a new session without a reload.
	a := e.create(keyAlice, `{"agent":"ops","messages":"deploy api"}`)
	step("list", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+a+`"] a`)))
	if os.Getenv("HRNS_UI_SCREENSHOTS") != "" {
		step("list shows awaiting", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+a+`"] [data-state="awaiting_tool_results"]`)))
	}
	var scripts int
	step("open session",
		chromedp.Click(chromedp.CSS(`tr[data-id="`+a+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`.approval[data-call="call_1"] button.approve`)),
		eval(`document.scripts.length`, &scripts),
	)
	// Approving runs the tool; its result and the answer arrive over the
	// stream while the page stays open.
	var got struct {
		Pwned   string `json:"pwned"`
		Scripts int    `json:"scripts"`
		Imgs    int    `json:"imgs"`
		Result  string `json:"result"`
		Answer  string `json:"answer"`
	}
	step("approve",
		chromedp.Click(chromedp.CSS(`.approval[data-call="call_1"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
		eval(`({pwned: typeof window.pwned, scripts: document.scripts.length, imgs: document.querySelectorAll('img').length,
			result: document.querySelector('.ev.tool_result pre').textContent,
			answer: document.querySelector('.ev.answer_event .answer').textContent})`, &got),
	)
	if got.Pwned != "undefined" || got.Scripts != scripts || got.Imgs != 0 {
		t.Errorf("hostile output ran or became elements: %+v (scripts before %d)", got, scripts)
	}
	if !strings.Contains(got.Result, hostile+" deployed api"+disguisedShown) || !strings.Contains(got.Answer, "done "+hostile) {
		t.Errorf("hostile output not shown as text: %+v", got)
	}
	// HRNS_UI_SCREENSHOTS=dir writes the pictures of docs/serve.md.
	shots := os.Getenv("HRNS_UI_SCREENSHOTS")
	if shots != "" {
		shot(filepath.Join(shots, "ui-session.png"))
	}

	// A client tool: pause and resume the waiting session, then answer
	// the call by hand.
	b := e.create(keyAlice, orderAgent)
	step("open client-tool session",
		eval(`location.hash = '#/s/`+b+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`.client-tool[data-call="call_1"] textarea`)),
		chromedp.Click(chromedp.CSS(`#btn-pause`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev[data-type="AgentRunStatusChangeEvent"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="paused"]`)),
		chromedp.Click(chromedp.CSS(`#btn-resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="awaiting_tool_results"]`)),
		chromedp.SendKeys(chromedp.CSS(`.client-tool[data-call="call_1"] textarea`), `{"state":"shipped"}`),
		chromedp.Click(chromedp.CSS(`.client-tool[data-call="call_1"] .send-result`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
	)
	var flows []string
	step("flows", eval(`[...document.querySelectorAll('.ev.flow_event')].map(e => e.textContent)`, &flows))
	if strings.Join(flows, ",") != "pause,resume" {
		t.Errorf("flow events shown = %q", flows)
	}
	// A message from the page restarts the finished session.
	var answers []string
	step("send a message",
		chromedp.SendKeys(chromedp.CSS(`#message`), "thanks"),
		chromedp.Click(chromedp.CSS(`#send button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event ~ .ev.answer_event`)),
		eval(`[...document.querySelectorAll('.ev.answer_event .answer')].map(e => e.textContent)`, &answers),
	)
	if strings.Join(answers, "|") != "4242 shipped|you are welcome" {
		t.Errorf("answers shown = %q", answers)
	}
	reqs := e.model.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, `{\"state\":\"shipped\"}`) || !strings.Contains(last, "thanks") {
		t.Errorf("the model did not read the hand-written result:\n%s", last)
	}

	// A phone: both pages fit the width.
	for page, sel := range map[string]string{"#/": `#sessions tr`, "#/s/" + a: `.ev.answer_event`} {
		var overflow bool
		step("narrow "+page,
			chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
			eval(`location.hash = '`+page+`'`, nil),
			chromedp.WaitVisible(chromedp.CSS(sel)),
			eval(`document.documentElement.scrollWidth > window.innerWidth`, &overflow),
		)
		if overflow {
			shot("ui-failure-narrow.png")
			t.Errorf("%s overflows a 390px viewport", page)
		}
	}
	if shots != "" {
		shot(filepath.Join(shots, "ui-phone.png"))
	}

	// Share a session, log out, and open the link: a read-only view
	// without a key.
	var link, shared string
	step("share",
		chromedp.EmulateViewport(1280, 900),
		eval(`location.hash = '#/s/`+a+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`#btn-share`)),
		chromedp.Click(chromedp.CSS(`#btn-share`)),
		chromedp.WaitVisible(chromedp.CSS(`#share a`)),
		eval(`document.querySelector('#share a').href`, &link),
		chromedp.Click(chromedp.CSS(`#logout`)),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
	)
	step("open the shared link",
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error { return chromedp.Do(ctx, chromedp.Navigate(link)) }),
		chromedp.WaitVisible(chromedp.CSS(`#shared-answer`)),
		eval(`document.querySelector('#shared-answer').textContent`, &shared),
	)
	if !strings.HasPrefix(link, e.url+"/ui/#/shared/") || !strings.Contains(shared, "done <script>") {
		t.Errorf("shared link %q shows %q", link, shared)
	}
}
