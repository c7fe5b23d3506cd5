package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// needChromium skips a test when no Chromium is installed, except in CI,
// where .ci/run installs it and its absence is a failure.
func needChromium(t testing.TB) {
	t.Helper()
	if _, err := browser.FindChromium(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have Chromium (.ci/run installs it): %v", err)
		}
		t.Skip(err)
	}
}

// A site is a test web site with real HTML and JavaScript, served on
// loopback.
type site struct {
	*httptest.Server
	mu     sync.Mutex
	logins []url.Values  // what /login received
	hits   []string      // paths requested
	ready  chan struct{} // closing it lets /slow/data answer
	// other is the URL of a server the policy must keep pages from.
	other string
}

const loginPage = `<!doctype html><title>Sign in</title>
<h1>Sign in</h1>
<form method="post" action="/login">
<label>User name <input name="user" autocomplete="off"></label>
<label>Password <input name="pass" type="password"></label>
<button type="submit">Sign in</button>
</form>`

func newSite(t testing.TB) *site {
	s := &site{ready: make(chan struct{})}
	mux := http.NewServeMux()
	page := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		})
	}
	page("/{$}", `<!doctype html><title>Home</title><h1>Welcome</h1><p>The home page.</p><a href="/second">Second page</a>`)
	page("/second", `<!doctype html><title>Second</title><h1>The second page</h1><a href="/">Home</a>`)
	page("/login", loginPage)
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		s.mu.Lock()
		s.logins = append(s.logins, r.PostForm)
		s.mu.Unlock()
		if r.PostForm.Get("user") != "ada" || r.PostForm.Get("pass") != "s3cret" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><title>Sign in</title><p role="alert">Wrong user name or password.</p>`)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "ok-ada", Path: "/", HttpOnly: true})
		http.Redirect(w, r, "/account", http.StatusSeeOther)
	})
	mux.HandleFunc("/account", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if c, err := r.Cookie("sid"); err != nil || c.Value != "ok-ada" {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		fmt.Fprint(w, `<!doctype html><title>Account</title><h1>Account of ada</h1><p>Balance: 4217 credits</p>`)
	})
	page("/script", `<!doctype html><title>Script</title><div id="out"></div>
<script>document.getElementById("out").innerHTML = "<h2>Made by script</h2><button onclick=\"this.textContent='Clicked '+(++window.n||(window.n=1))\">Press me</button>";</script>`)
	page("/slow", `<!doctype html><title>Slow</title><p id="s">Loading…</p>
<script>fetch("/slow/data").then(r => r.text()).then(t => { document.getElementById("s").textContent = t; });</script>`)
	mux.HandleFunc("/slow/data", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.ready:
			fmt.Fprint(w, "The report is ready")
		case <-r.Context().Done():
		}
	})
	page("/select", `<!doctype html><title>Select</title>
<label for="c">Colour</label><select id="c"><option value="">Pick one</option><option value="r">Red</option><option value="g">Green</option></select>
<p id="chosen">Nothing chosen</p>
<script>document.getElementById("c").addEventListener("change", e => { document.getElementById("chosen").textContent = "Chosen: " + e.target.value; });</script>`)
	page("/opener", `<!doctype html><title>Opener</title><a href="/second" target="_blank">Open in a new tab</a>`)
	page("/keys", `<!doctype html><title>Keys</title><input aria-label="Search" id="q"><p id="k">none</p>
<script>document.getElementById("q").addEventListener("keydown", e => { document.getElementById("k").textContent = "key " + e.key; });</script>`)
	page("/hover", `<!doctype html><title>Hover</title><button id="h" onmouseover="document.getElementById('tip').textContent='Tooltip shown'">Hover me</button><p id="tip"></p>`)
	page("/dialog", `<!doctype html><title>Dialog</title><button onclick="document.getElementById('r').textContent = confirm('Delete everything?') ? 'yes' : 'no'">Delete</button><p id="r"></p>`)
	mux.HandleFunc("/leak", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>Leak</title><img src="%[1]s/img.png" alt="pixel">
<p id="f">fetch pending</p>
<script>fetch("%[1]s/api").then(() => { document.getElementById("f").textContent = "fetch went through"; }, () => { document.getElementById("f").textContent = "fetch failed"; });</script>`, s.other)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.other+"/secret", http.StatusFound)
	})
	page("/golden", `<!doctype html><html lang="en"><title>Golden</title>
<nav><a href="/">Home</a> <a href="/second">Second page</a></nav>
<main><h1>Order <em>form</em></h1>
<p>Fill in the form. <strong>All fields</strong> are required.</p>
<ul><li>First item</li><li>Second item</li></ul>
<label><input type="checkbox" checked> Gift wrap</label>
<fieldset><legend>Speed</legend><label><input type="radio" name="s" checked> Fast</label><label><input type="radio" name="s"> Slow</label></fieldset>
<label>Name <input value="Ada &quot;the first&quot;" required></label>
<label>Notes <textarea>line one
line two</textarea></label>
<button disabled>Pay</button> <button aria-pressed="true">Bold</button>
<details><summary>More</summary><p>Hidden text</p></details>
<div tabindex="0" role="slider" aria-label="Volume" aria-valuenow="3" aria-valuemin="0" aria-valuemax="10"></div>
</main>`)
	page("/long", `<!doctype html><title>Long</title>`+strings.Repeat(`<p>filler paragraph</p><button>b</button>`, 400))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.Path)
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { s.closeReady() })
	return s
}

// allowOnly lets the policy through for the given test servers only.
func allowOnly(servers ...*httptest.Server) func(netip.AddrPort) bool {
	allowed := map[netip.AddrPort]bool{}
	for _, s := range servers {
		allowed[netip.MustParseAddrPort(s.Listener.Addr().String())] = true
	}
	return func(ap netip.AddrPort) bool { return allowed[ap] }
}

// call invokes a browser tool and returns its text, failing on an error.
func call(t testing.TB, ts *loop.Toolset, name string, args any) string {
	t.Helper()
	out, err := invoke(ts, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// callApproved is call for a call a person approves (typing into a
// password field).
func callApproved(t testing.TB, ts *loop.Toolset, name string, args any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	out, err := ts.Invoke(context.Background(), llm.ToolCall{Name: name, Arguments: llm.Arguments(b)}, &loop.InvokeOptions{Timeout: 2 * time.Minute,
		Approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Approve}, nil
		})})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, p := range out.Content {
		text.WriteString(p.Text)
	}
	return text.String()
}

func invoke(ts *loop.Toolset, name string, args any) (string, error) {
	b, _ := json.Marshal(args)
	out, err := ts.Invoke(context.Background(), llm.ToolCall{Name: name, Arguments: llm.Arguments(b)}, &loop.InvokeOptions{Timeout: 2 * time.Minute})
	if err != nil {
		return "", err
	}
	var text strings.Builder
	for _, p := range out.Content {
		text.WriteString(p.Text)
	}
	if out.IsError {
		return text.String(), fmt.Errorf("tool error: %s", text.String())
	}
	return text.String(), nil
}

// ref finds the ref of the element of a role whose name contains name in
// a snapshot.
func ref(t testing.TB, snap, role, name string) string {
	t.Helper()
	re := regexp.MustCompile(`- ` + regexp.QuoteMeta(role) + ` "[^"\n]*` + regexp.QuoteMeta(name) + `[^"\n]*"[^\n]*\[ref=(e\d+)\]`)
	m := re.FindStringSubmatch(snap)
	if m == nil {
		t.Fatalf("no %s %q with a ref in the snapshot:\n%s", role, name, snap)
	}
	return m[1]
}

func mustContain(t testing.TB, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("the result lacks %q:\n%s", w, got)
		}
	}
}

func (s *site) closeReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}
