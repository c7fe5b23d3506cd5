package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// needChromium skips a test when no Chromium is installed, except in CI,
// where .ci/run installs it.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := browser.FindChromium(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have Chromium (.ci/run installs it): %v", err)
		}
		t.Skip(err)
	}
}

// loginSite is a site whose account page, behind a login form, shows a
// balance.
func loginSite(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Sign in</title><form method="post" action="/login">
<label>User name <input name="user"></label><label>Password <input name="pass" type="password"></label>
<button>Sign in</button></form>`)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("user") != "ada" || r.FormValue("pass") != "s3cret" {
			http.Error(w, "wrong user name or password", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "ada-session", Path: "/", HttpOnly: true})
		http.Redirect(w, r, "/account", http.StatusSeeOther)
	})
	mux.HandleFunc("/account", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("sid"); err != nil || c.Value != "ada-session" {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		fmt.Fprint(w, `<!doctype html><title>Account</title><h1>Account of ada</h1><p>Balance: 4217 credits</p>`)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// refIn finds, in a request body (JSON), the ref of a textbox whose name
// holds name.
func refIn(body []byte, name string) string {
	re := regexp.MustCompile(`textbox \\"` + regexp.QuoteMeta(name) + `\\" \[ref=(e\d+)\]`)
	if m := re.FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return "e0"
}

var balanceRE = regexp.MustCompile(`Balance: (\d+) credits`)

// loginSteps is the scripted model: it logs in with the refs of the
// snapshot it was shown, then answers with the balance it reads.
func loginSteps() (typing, answer openaitest.Reply) {
	typing = openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{
			openaitest.ToolCall("call_user", "browser_type", fmt.Sprintf(`{"element":"user name","ref":%q,"text":"ada"}`, refIn(body, "User name"))),
			openaitest.ToolCall("call_pass", "browser_type", fmt.Sprintf(`{"element":"password","ref":%q,"text":"s3cret","submit":true}`, refIn(body, "Password"))),
		}}
	}}
	answer = openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		if m := balanceRE.FindSubmatch(body); m != nil {
			return openaitest.Reply{Text: "The balance is " + string(m[1]) + " credits."}
		}
		return openaitest.Reply{Text: "I could not read the balance."}
	}}
	return typing, answer
}

// TestRunBrowser: hrns run --browser, a scripted model logging into a
// local site and reading the value behind the login.
func TestRunBrowser(t *testing.T) {
	needChromium(t)
	t.Parallel()
	site := loginSite(t)
	typing, answer := loginSteps()
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_nav", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/login"))}},
		typing, answer,
	)
	defer model.Close()
	var out, errOut bytes.Buffer
	// Typing the password asks the person at the terminal, whatever
	// the mode (--yes), showing what the page says of the field.
	code := Run(t.Context(), []string{"run", "--base-url", model.URL(), "--model", "m", "--tools", "none", "--no-skills", "--yes",
		"--workdir", t.TempDir(), "--browser", "--browser-allow", site.Listener.Addr().String(), "What is my balance?"},
		&IO{In: strings.NewReader("y\n"), Interactive: func() bool { return true }, Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut.String())
	}
	if got := errOut.String(); strings.Count(got, "wants to run") != 1 || !strings.Contains(got, `typing into a password field on "http://`) || !strings.Contains(got, `: the page's field "Password"`) {
		t.Errorf("the person was not asked about the password, or about more:\n%s", got)
	}
	if !strings.Contains(out.String(), "The balance is 4217 credits.") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	// --browser offers every browser tool but browser_file_upload: hrns
	// run's browser has no files folder.
	if first := string(model.Requests()[0].Body); !strings.Contains(first, `"browser_tabs"`) || strings.Contains(first, "browser_file_upload") {
		t.Errorf("--browser offered:\n%s", first)
	}

	// Without --browser-allow the site, on loopback, is refused.
	model2 := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_nav", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/login"))}},
		openaitest.Reply{Text: "done"},
	)
	defer model2.Close()
	out.Reset()
	errOut.Reset()
	code = Run(t.Context(), []string{"run", "--base-url", model2.URL(), "--model", "m", "--tools", "browser_navigate,browser_snapshot", "--no-skills",
		"--workdir", t.TempDir(), "Open the site."},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	reqs := model2.Requests()
	if code != ExitOK || len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("not on the public internet")) {
		t.Fatalf("exit %d, %d requests; the tool result should refuse loopback:\n%s", code, len(reqs), errOut.String())
	}
	if bytes.Contains(reqs[0].Body, []byte("browser_click")) || !bytes.Contains(reqs[0].Body, []byte("browser_snapshot")) {
		t.Fatalf("--tools browser_navigate,browser_snapshot offered other tools:\n%s", reqs[0].Body)
	}

	// An unknown browser tool is a usage error.
	errOut.Reset()
	code = Run(t.Context(), []string{"run", "--base-url", model2.URL(), "--model", "m", "--tools", "browser_fly", "--no-skills", "x"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errOut.String(), `unknown browser tool "browser_fly"`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// TestServeBrowser: a hrns serve session with a web environment logs into
// a local site. Between the login and the reading, the session waits for a
// client-side tool, so its browser is closed and started again on the
// session's kept profile: the cookie and the page are back. The events
// carry the screenshot; the profile is removed when the session ends.
func TestServeBrowser(t *testing.T) {
	needChromium(t)
	t.Parallel()
	site := loginSite(t)
	_, answer := loginSteps()
	// The password first, alone: the session waits for a person's
	// approval with its browser closed, and the page is loaded again in
	// the next run's browser, empty; then the user name, submitted.
	typing := openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{
			openaitest.ToolCall("call_pass", "browser_type", fmt.Sprintf(`{"element":"password","ref":%q,"text":"s3cret"}`, refIn(body, "Password"))),
		}}
	}}
	user := openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{
			openaitest.ToolCall("call_user", "browser_type", fmt.Sprintf(`{"element":"user name","ref":%q,"text":"ada","submit":true}`, refIn(body, "User name"))),
		}}
	}}
	var mu sync.Mutex
	// liveStatus is the answer of GET .../live for the server's one
	// session: its status and content type.
	var serveURL string
	var liveWhileRunning, liveWhileWaiting string
	liveStatus := func() string {
		var list struct {
			Items []struct{ ID string } `json:"items"`
		}
		r, err := http.Get(serveURL + "/api/v2/sessions")
		if err != nil {
			return err.Error()
		}
		json.NewDecoder(r.Body).Decode(&list)
		r.Body.Close()
		if len(list.Items) != 1 {
			return fmt.Sprintf("%d sessions", len(list.Items))
		}
		r, err = http.Get(serveURL + "/api/v2/sessions/" + list.Items[0].ID + "/live")
		if err != nil {
			return err.Error()
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return fmt.Sprintf("%d %s %v", r.StatusCode, r.Header.Get("Content-Type"), bytes.HasPrefix(b, []byte{0xff, 0xd8}))
	}
	call := func(id, name, args string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, name, args)}}
	}
	model := openaitest.NewServer(
		call("call_look", "browser_snapshot", `{}`), // the start URL is open
		typing,
		user,
		call("call_shot", "browser_take_screenshot", `{}`),
		// While the session runs, its browser is live; the reply's Func
		// looks before answering.
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			got := liveStatus()
			mu.Lock()
			liveWhileRunning = got
			mu.Unlock()
			return call("call_ask", "confirm", `{"question":"Read the balance?"}`) // the session waits
		}},
		call("call_look2", "browser_snapshot", `{}`), // a new browser, same profile
		answer,
	)
	defer model.Close()
	profiles := t.TempDir()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", profiles)
	c := client.New(s.url, "", nil)
	serveURL = s.url

	var during []string // the profiles while the session waits
	confirm := client.Tool("confirm", loop.NewSimpleTool("Asks the user.", []loop.ToolArgument{{Name: "question", Type: "string"}}, func(map[string]any) string {
		mu.Lock()
		defer mu.Unlock()
		// The browser closes once the run has stopped, which may be just
		// after the call reached us: wait for it (bounded).
		for range 250 {
			if liveWhileWaiting = liveStatus(); strings.HasPrefix(liveWhileWaiting, "404 ") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		entries, _ := os.ReadDir(profiles)
		for _, e := range entries {
			during = append(during, e.Name())
		}
		return "yes"
	}))
	var env client.Environment
	if err := json.Unmarshal(fmt.Appendf(nil, `{"kind":"web","start_url":%q,"headless":true}`, site.URL+"/login"), &env); err != nil {
		t.Fatal(err)
	}
	req := &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "shopper", Environments: []client.Environment{env}}},
		Messages: client.Text("What is my balance?"),
	}
	h, err := c.StartSession(t.Context(), req, confirm)
	if err != nil {
		t.Fatal(err)
	}
	// Typing the password waits for a person, told what the page says
	// of the field: the test approves it through the API. The session
	// waits with its browser closed; the approved call finds the field
	// again in the browser started on the session's profile.
	approved := make(chan string, 1)
	go func() {
		defer close(approved)
		for ev, err := range h.Stream(t.Context()) {
			if err != nil {
				return
			}
			if ev.Type != "ActiveStateChangeEvent" {
				continue
			}
			var as session.ActiveState
			json.Unmarshal(ev.Data, &as)
			for _, p := range as.PendingApprovals {
				if p.ID == "call_pass" {
					approved <- p.Reason
					// At once, while the run that asked may still be
					// closing its browser: the next run's browser
					// starts on the same profile only once that one
					// is gone.
					h.Approve(t.Context(), p.ID, true, "")
					return
				}
			}
		}
	}()
	res, err := h.WaitForCompletion(t.Context(), confirm)
	if why := <-approved; !strings.Contains(why, `password field on "http://`) || !strings.Contains(why, `: the page's field "Password"`) || !strings.Contains(why, `"s3cret"`) {
		t.Errorf("the approval of the password's typing says %q", why)
	}
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "The balance is 4217 credits." {
		t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
	}
	mu.Lock()
	if len(during) != 1 || during[0] != h.ID() {
		t.Errorf("profiles while waiting: %v, want the session's (%s)", during, h.ID())
	}
	// The page's live view: a frame while the browser runs, none while
	// the session waits (its browser is closed).
	if liveWhileRunning != "200 image/jpeg true" || !strings.HasPrefix(liveWhileWaiting, "404 ") {
		t.Errorf("GET .../live: %q while running, %q while waiting", liveWhileRunning, liveWhileWaiting)
	}
	mu.Unlock()
	// The browser closes when the run stops, just after the session's
	// end is committed: wait for it (bounded).
	var left []os.DirEntry
	for range 500 {
		if left, _ = os.ReadDir(profiles); len(left) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) != 0 {
		t.Errorf("the ended session's profile is left: %v", left)
	}

	observed := false
	for ev, err := range h.Stream(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(ev); bytes.Contains(b, []byte(`"kind":"observation_event"`)) &&
			bytes.Contains(b, []byte(`"media_type":"image/jpeg"`)) && bytes.Contains(b, []byte(`"type":"web"`)) {
			observed = true
		}
	}
	if !observed {
		t.Error("no observation event carries the screenshot")
	}

	// A bad web environment is refused when the session is created.
	var badEnv client.Environment
	if err := json.Unmarshal([]byte(`{"kind":"web","start_url":"file:///etc/passwd"}`), &badEnv); err != nil {
		t.Fatal(err)
	}
	bad := &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "x", Environments: []client.Environment{badEnv}}},
		Messages: client.Text("go"),
	}
	if _, err := c.CreateSession(t.Context(), bad, nil); err == nil || !strings.Contains(err.Error(), "start_url must be an http or https URL") {
		t.Fatalf("a bad start_url: %v", err)
	}
}
