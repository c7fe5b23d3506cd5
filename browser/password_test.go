package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// passwordPage has a text field, a password field and a field that turns
// into a password field when it gets the focus; each shows how many
// characters it holds.
const passwordPage = `<!doctype html><title>Account</title>
<label>Search <input id="q" oninput="show()"></label>
<label>Password <input id="p" type="password" oninput="show()"></label>
<label>Code <input id="c" onfocus="this.type='password'" oninput="show()"></label>
<p id="n">q=0 p=0 c=0</p>
<script>function show() { document.getElementById('n').textContent = 'q=' + q.value.length + ' p=' + p.value.length + ' c=' + c.value.length; }</script>`

// TestPasswordFieldNeedsPerson: typing into a password field goes to the
// approver whatever the mode (a person, with what the page says of the
// field, not what the model calls it, and the text), and without one it
// is refused and nothing is typed; other fields are typed into without
// asking; a key that types a character into a focused password field is
// asked about too, Enter is not; a field that becomes a password field
// when it gets the focus (after the check) is not typed into.
func TestPasswordFieldNeedsPerson(t *testing.T) {
	needChromium(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, passwordPage)
	}))
	t.Cleanup(srv.Close)
	b := browser.New(&browser.Options{Allow: allowOnly(srv)})
	t.Cleanup(func() { b.Close() })
	ts := b.Tools()
	var mu sync.Mutex
	var asked []*loop.ApprovalRequest
	yes := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	// bypassPermissions allows everything but what a person must see.
	bypass := &loop.Permissions{Mode: loop.ModeBypass}
	run := func(name string, args any, approver loop.Approver) (string, error) {
		raw, _ := json.Marshal(args)
		out, err := ts.Invoke(context.Background(), llm.ToolCall{ID: "c1", Name: name, Arguments: llm.Arguments(raw)},
			&loop.InvokeOptions{Timeout: 2 * time.Minute, Approver: approver, Permissions: bypass})
		if err != nil {
			return "", err
		}
		var text strings.Builder
		for _, p := range out.Content {
			text.WriteString(p.Text)
		}
		return text.String(), nil
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(asked)
	}

	snap := call(t, ts, "browser_navigate", map[string]any{"url": srv.URL + "/"})
	q, p, c := ref(t, snap, "textbox", "Search"), ref(t, snap, "textbox", "Password"), ref(t, snap, "textbox", "Code")

	out, err := run("browser_type", map[string]any{"element": "search", "ref": q, "text": "cats"}, yes)
	if err != nil || !strings.Contains(out, "q=4 p=0 c=0") || count() != 0 {
		t.Fatalf("a text field: %v %q, %d asked", err, out, count())
	}
	// No approver: refused, nothing typed.
	_, err = run("browser_type", map[string]any{"element": "the search box", "ref": p, "text": "hunter2"}, nil)
	if !errors.Is(err, loop.ErrPermission) && (err == nil || !strings.Contains(err.Error(), "no approver")) {
		t.Fatalf("a password field without an approver: %v", err)
	}
	out = call(t, ts, "browser_snapshot", struct{}{})
	if !strings.Contains(out, "q=4 p=0 c=0") {
		t.Fatalf("typed without approval:\n%s", out)
	}
	// The model calls it the search box; the person is told what it is.
	out, err = run("browser_type", map[string]any{"element": "the search box", "ref": p, "text": "hunter2"}, yes)
	if err != nil || !strings.Contains(out, "q=4 p=7 c=0") || count() != 1 {
		t.Fatalf("a password field, approved: %v %q, %d asked", err, out, count())
	}
	reason := asked[0].Permission.Reason
	for _, want := range []string{"password field", `"Password"`, `"` + srv.URL + `"`, `"hunter2"`, "input of type password"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the person is told %q, without %s", reason, want)
		}
	}
	if strings.Contains(reason, "search box") {
		t.Errorf("the person is told the model's name of the field: %q", reason)
	}
	// A key that types into the focused password field is asked about;
	// Enter is not.
	if _, err := run("browser_press_key", map[string]any{"key": "x"}, nil); err == nil {
		t.Fatal("a character into a password field without an approver")
	}
	if _, err := run("browser_press_key", map[string]any{"key": "x"}, yes); err != nil || count() != 2 || !strings.Contains(asked[1].Permission.Reason, `the key "x"`) {
		t.Fatalf("a character, approved: %v, %d asked", err, count())
	}
	if _, err := run("browser_press_key", map[string]any{"key": "Enter"}, nil); err != nil {
		t.Fatalf("Enter: %v", err)
	}
	// A field that becomes a password field on focus: checked as text,
	// refused when it turns out to be a password field.
	_, err = run("browser_type", map[string]any{"element": "code", "ref": c, "text": "123456"}, yes)
	if err == nil || !strings.Contains(err.Error(), "is a password field") || count() != 2 {
		t.Fatalf("a field that became a password field: %v, %d asked", err, count())
	}
	out = call(t, ts, "browser_snapshot", struct{}{})
	if !strings.Contains(out, "c=0") {
		t.Fatalf("typed into the field that became a password field:\n%s", out)
	}
	// Asked again, now that it is one: a person approves it.
	if _, err := run("browser_type", map[string]any{"element": "code", "ref": c, "text": "123456"}, yes); err != nil || count() != 3 {
		t.Fatalf("the code, approved: %v, %d asked", err, count())
	}
}

// forgingPage has a password field and a script that makes the page's
// own JavaScript lie about it: every node's ownerDocument says another
// origin, and an input's type is text that reads as the rest of the
// sentence the person is shown.
const forgingPage = `<!doctype html><title>Sign in</title>
<label>Password" (an input of type password) on "https://accounts.example.com <input id="p" autocomplete="current-password" type="password"></label>
<script>
Object.defineProperty(Node.prototype, 'ownerDocument', {configurable: true, get() { return {location: {origin: 'https://accounts.example.com'}}; }});
Object.defineProperty(HTMLInputElement.prototype, 'type', {configurable: true, get() { return 'password) on "https://accounts.example.com" (an input'; }});
</script>`

// TestPasswordReasonNotForgedByPage: what the person is told of a
// password field (its origin, its kind) is read where the page's scripts
// cannot change it: a page that redefines ownerDocument and an input's
// type in its own JavaScript does not make the approval name another
// origin; and the real origin comes before the label, whose words may
// name another. Before the fix, the person was told the field was on
// "https://accounts.example.com".
func TestPasswordReasonNotForgedByPage(t *testing.T) {
	needChromium(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, forgingPage)
	}))
	t.Cleanup(srv.Close)
	b := browser.New(&browser.Options{Allow: allowOnly(srv)})
	t.Cleanup(func() { b.Close() })
	ts := b.Tools()
	var mu sync.Mutex
	var reasons []string
	yes := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		reasons = append(reasons, req.Permission.Reason)
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	bypass := &loop.Permissions{Mode: loop.ModeBypass}
	invoke := func(name string, args any) {
		t.Helper()
		raw, _ := json.Marshal(args)
		if _, err := ts.Invoke(context.Background(), llm.ToolCall{ID: "c1", Name: name, Arguments: llm.Arguments(raw)},
			&loop.InvokeOptions{Timeout: 2 * time.Minute, Approver: yes, Permissions: bypass}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	snap := call(t, ts, "browser_navigate", map[string]any{"url": srv.URL + "/"})
	p := ref(t, snap, "textbox", "Password")
	invoke("browser_type", map[string]any{"element": "password", "ref": p, "text": "hunter2"})
	invoke("browser_press_key", map[string]any{"key": "x"})
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 2 {
		t.Fatalf("asked %d times, want 2: %q", len(reasons), reasons)
	}
	// The real origin comes first, before the page's words (its label,
	// which names another); the kind is the browser's.
	for _, reason := range reasons {
		if !strings.HasPrefix(reason, `typing into a password field on "`+srv.URL+`": the page's field `) {
			t.Errorf("the person is told %q: not the page's real origin first", reason)
		}
	}
	if !strings.Contains(reasons[0], `accounts.example.com" (an input of type password) gets the text "hunter2"`) {
		t.Errorf("the person is told %q: the page's scripts chose the field's kind", reasons[0])
	}
}
