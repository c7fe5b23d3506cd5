package browser_test

import (
	"bytes"
	"flag"
	"fmt"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestTools drives one headless Chromium (shared by the subtests, which run
// in order) through the tools against a local site.
func TestTools(t *testing.T) {
	needChromium(t)
	t.Parallel()
	s := newSite(t)
	b := browser.New(&browser.Options{Allow: allowOnly(s.Server), MaxSnapshotBytes: 16 << 10, MaxTabs: 3, RefusalHint: "start it with --browser-allow"})
	t.Cleanup(func() { b.Close() })
	ts := b.Tools()

	t.Run("form", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/login"})
		mustContain(t, snap, `Page title: "Sign in"`, `- heading "Sign in" [level=1]`)
		user := ref(t, snap, "textbox", "User name")
		pass := ref(t, snap, "textbox", "Password")
		call(t, ts, "browser_type", map[string]any{"element": "user name", "ref": user, "text": "someone"})
		// Typing again replaces what the field holds.
		call(t, ts, "browser_type", map[string]any{"element": "user name", "ref": user, "text": "ada"})
		// Typing into the password field is for a person to approve
		// (password_test.go): here, one who does.
		out := callApproved(t, ts, "browser_type", map[string]any{"element": "password", "ref": pass, "text": "s3cret", "submit": true})
		mustContain(t, out, "/account", `Page title: "Account"`, "Balance: 4217 credits")
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.logins) != 1 || s.logins[0].Get("user") != "ada" || s.logins[0].Get("pass") != "s3cret" {
			t.Fatalf("the server received %v, want one login of ada with her password", s.logins)
		}
	})

	t.Run("script", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/script"})
		mustContain(t, snap, `- heading "Made by script" [level=2]`)
		btn := ref(t, snap, "button", "Press me")
		out := call(t, ts, "browser_click", map[string]any{"element": "the button", "ref": btn})
		mustContain(t, out, `- button "Clicked 1" [ref=`+btn+`]`)
		// Nothing changed since: the snapshot says so instead of repeating.
		out = call(t, ts, "browser_press_key", map[string]any{"key": "Escape"})
		mustContain(t, out, "The page snapshot is unchanged since the last one")
	})

	t.Run("back", func(t *testing.T) {
		call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/"})
		snap := call(t, ts, "browser_snapshot", struct{}{})
		out := call(t, ts, "browser_click", map[string]any{"element": "link", "ref": ref(t, snap, "link", "Second page")})
		mustContain(t, out, `Page title: "Second"`, "/second")
		out = call(t, ts, "browser_navigate_back", struct{}{})
		mustContain(t, out, `Page title: "Home"`, "The home page.")
	})

	t.Run("select", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/select"})
		sel := ref(t, snap, "combobox", "Colour")
		out := call(t, ts, "browser_select_option", map[string]any{"element": "colour", "ref": sel, "values": []string{"Green"}})
		mustContain(t, out, `Selected "Green"`, "Chosen: g")
		_, err := invoke(ts, "browser_select_option", map[string]any{"element": "colour", "ref": sel, "values": []string{"Blue"}})
		if err == nil || !strings.Contains(err.Error(), `no option has the value or label "Blue"`) {
			t.Fatalf("selecting a missing option: %v", err)
		}
	})

	t.Run("new tab", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/opener"})
		out := call(t, ts, "browser_click", map[string]any{"element": "link", "ref": ref(t, snap, "link", "Open in a new tab")})
		mustContain(t, out, "opened a new tab (index 1)", "Tabs: 2 open, the current one is 1")
		// The new tab may still be loading when it is adopted.
		out = call(t, ts, "browser_wait_for", map[string]any{"text": "The second page"})
		mustContain(t, out, `Page title: "Second"`)
		out = call(t, ts, "browser_tabs", map[string]any{"action": "list"})
		mustContain(t, out, `0: "Opener"`, `* 1: "Second"`)
		out = call(t, ts, "browser_tabs", map[string]any{"action": "close"})
		mustContain(t, out, "Closed tab 1", `Page title: "Opener"`)
		if _, err := invoke(ts, "browser_tabs", map[string]any{"action": "select", "index": 5}); err == nil || !strings.Contains(err.Error(), "no tab has the index 5") {
			t.Fatalf("selecting a missing tab: %v", err)
		}
	})

	t.Run("bounded tabs", func(t *testing.T) {
		// MaxTabs is 3 here.
		for i := 1; i < 3; i++ {
			call(t, ts, "browser_tabs", map[string]any{"action": "new"})
		}
		if _, err := invoke(ts, "browser_tabs", map[string]any{"action": "new"}); err == nil || !strings.Contains(err.Error(), "at most 3 tabs") {
			t.Fatalf("a fourth tab: %v", err)
		}
		// The first tab (the one the browser started with) can close too.
		out := call(t, ts, "browser_tabs", map[string]any{"action": "close", "index": 0})
		mustContain(t, out, "Closed tab 0")
		call(t, ts, "browser_tabs", map[string]any{"action": "close"})
		out = call(t, ts, "browser_tabs", map[string]any{"action": "list"})
		if strings.Contains(out, "1: ") || strings.Contains(out, "Opener") {
			t.Fatalf("tabs left open:\n%s", out)
		}
		out = call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/second"})
		mustContain(t, out, `Page title: "Second"`)
		if _, err := invoke(ts, "browser_tabs", map[string]any{"action": "close"}); err == nil || !strings.Contains(err.Error(), "only tab") {
			t.Fatalf("closing the only tab: %v", err)
		}
	})

	t.Run("wait for", func(t *testing.T) {
		out := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/slow"})
		mustContain(t, out, "Loading")
		s.closeReady()
		out = call(t, ts, "browser_wait_for", map[string]any{"text": "The report is ready"})
		mustContain(t, out, `The text "The report is ready" appeared.`, "The report is ready")
		out = call(t, ts, "browser_wait_for", map[string]any{"textGone": "Loading"})
		mustContain(t, out, "is gone")
	})

	t.Run("keys and hover", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/keys"})
		q := ref(t, snap, "textbox", "Search")
		call(t, ts, "browser_type", map[string]any{"element": "search", "ref": q, "text": "x"})
		out := call(t, ts, "browser_press_key", map[string]any{"key": "ArrowDown"})
		mustContain(t, out, "key ArrowDown")
		snap = call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/hover"})
		out = call(t, ts, "browser_hover", map[string]any{"element": "button", "ref": ref(t, snap, "button", "Hover me")})
		mustContain(t, out, "Tooltip shown")
	})

	t.Run("dialog", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/dialog"})
		out := call(t, ts, "browser_click", map[string]any{"element": "delete", "ref": ref(t, snap, "button", "Delete")})
		mustContain(t, out, `confirm dialog, dismissed: "Delete everything?"`, `- text: "no"`)
	})

	t.Run("stale ref", func(t *testing.T) {
		snap := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/"})
		link := ref(t, snap, "link", "Second page")
		call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/second"})
		_, err := invoke(ts, "browser_click", map[string]any{"element": "old link", "ref": link})
		if err == nil || !strings.Contains(err.Error(), "take a new snapshot") {
			t.Fatalf("a stale ref: %v", err)
		}
		_, err = invoke(ts, "browser_click", map[string]any{"element": "made up", "ref": "e99999"})
		if err == nil || !strings.Contains(err.Error(), "no element has the ref") {
			t.Fatalf("an unknown ref: %v", err)
		}
	})

	t.Run("bounded snapshot", func(t *testing.T) {
		out := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/long"})
		mustContain(t, out, "[snapshot cut after")
		if len(out) > 17<<10 {
			t.Fatalf("the result holds %d bytes", len(out))
		}
		out = call(t, ts, "browser_scroll", map[string]any{"direction": "down", "amount": 500})
		mustContain(t, out, "Scrolled down; the viewport shows 500 to")
	})

	t.Run("screenshot", func(t *testing.T) {
		call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/"})
		out, err := ts.Invoke(t.Context(), llm.ToolCall{Name: "browser_take_screenshot", Arguments: llm.Arguments(`{}`)}, nil)
		if err != nil || out.IsError {
			t.Fatalf("screenshot: %v %+v", err, out)
		}
		var img *llm.Part
		for i := range out.Content {
			if out.Content[i].Kind == llm.PartImage {
				img = &out.Content[i]
			}
		}
		if img == nil || img.Media.MIMEType != "image/jpeg" {
			t.Fatalf("no JPEG image part in %+v", out.Content)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(img.Media.Data))
		if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
			t.Fatalf("the screenshot is %+v (%v), want 1280x800", cfg, err)
		}
	})

	t.Run("address policy", func(t *testing.T) {
		// A service on loopback that the policy does not allow.
		var mu sync.Mutex
		var hits []string
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, r.URL.Path)
			mu.Unlock()
			fmt.Fprint(w, "internal secret")
		}))
		defer other.Close()
		s.other = other.URL

		out := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/leak"})
		mustContain(t, out, "The address policy refused", other.URL+"/img.png", other.URL+"/api", "not on the public internet", "(start it with --browser-allow)")
		out = call(t, ts, "browser_wait_for", map[string]any{"text": "fetch failed"})
		mustContain(t, out, "fetch failed")

		_, err := invoke(ts, "browser_navigate", map[string]any{"url": s.URL + "/redirect"})
		if err == nil || !strings.Contains(err.Error(), other.URL+"/secret") || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("a redirect to a refused address: %v", err)
		}
		_, err = invoke(ts, "browser_navigate", map[string]any{"url": other.URL + "/direct"})
		if err == nil || !strings.Contains(err.Error(), "refused to open") || !strings.Contains(err.Error(), "(start it with --browser-allow)") {
			t.Fatalf("opening a refused address: %v", err)
		}
		for _, u := range []string{"http://0x7f000001/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:1/"} {
			if _, err := invoke(ts, "browser_navigate", map[string]any{"url": u}); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("opening %s: %v", u, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(hits) > 0 {
			t.Fatalf("the refused server was reached: %v", hits)
		}
		// Chromium's connections go through the proxy, loopback included.
		if n := b.ProxyServed(); n == 0 {
			t.Fatal("no request went through the address-policy proxy")
		}
	})

	t.Run("snapshot golden", func(t *testing.T) {
		out := call(t, ts, "browser_navigate", map[string]any{"url": s.URL + "/golden"})
		_, snap, ok := strings.Cut(out, "Page snapshot:\n")
		if !ok {
			t.Fatalf("no snapshot:\n%s", out)
		}
		// Refs depend on what the browser showed before: number them from 1.
		seen := map[string]string{}
		snap = regexp.MustCompile(`ref=e\d+`).ReplaceAllStringFunc(snap, func(r string) string {
			if _, ok := seen[r]; !ok {
				seen[r] = fmt.Sprintf("ref=e%d", len(seen)+1)
			}
			return seen[r]
		})
		golden := filepath.Join("testdata", "golden.snapshot")
		if *update {
			if err := os.WriteFile(golden, []byte(snap+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if snap+"\n" != string(want) {
			t.Errorf("the snapshot differs from %s (go test -run TestTools/snapshot -update to accept it):\n%s", golden, snap)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"browser_navigate", map[string]any{"url": "file:///etc/passwd"}, `the scheme "file:" is not allowed`},
			{"browser_navigate", map[string]any{"url": "javascript:alert(1)"}, `the scheme "javascript:" is not allowed`},
			{"browser_press_key", map[string]any{"key": "Hyper+x"}, "unknown modifier"},
			{"browser_press_key", map[string]any{"key": "NoSuchKey"}, "unknown key"},
			{"browser_wait_for", map[string]any{}, "give text, textGone or time"},
			{"browser_wait_for", map[string]any{"time": 3600}, "time may be at most"},
			{"browser_tabs", map[string]any{"action": "explode"}, "action"},
			{"browser_select_option", map[string]any{"element": "x", "ref": "e1", "values": []string{}}, ""},
		} {
			_, err := invoke(ts, c.tool, c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %v: %v, want an error with %q", c.tool, c.args, err, c.want)
			}
		}
	})
}

// TestToolNames checks the toolset against Names: the names models know
// from Playwright MCP.
func TestToolNames(t *testing.T) {
	b := browser.New(nil)
	defer b.Close()
	ts := b.Tools()
	got := ts.Names()
	want := browser.Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tools %v, Names %v", got, want)
	}
	for _, name := range []string{"browser_click", "browser_type", "browser_select_option", "browser_hover"} {
		def, _ := ts.Lookup(name)
		for _, p := range []string{`"element"`, `"ref"`} {
			if !strings.Contains(string(def.InputSchema), p) {
				t.Errorf("%s lacks %s: %s", name, p, def.InputSchema)
			}
		}
	}
}
