package browser_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
)

// chromiumUsing reports whether a process runs with the profile dir.
func chromiumUsing(dir string) bool {
	want := "--user-data-dir=" + dir + "\x00"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), want) {
			return true
		}
	}
	return false
}

// chromiumEnviron returns the environment of the main Chromium process
// running with the profile dir.
func chromiumEnviron(dir string) string {
	want := "--user-data-dir=" + dir + "\x00"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), want) && !strings.Contains(string(b), "--type=") {
			env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			return string(env)
		}
	}
	return ""
}

// TestLifecycle checks what Close leaves: no process, no temporary
// profile; and that a kept profile brings back the session cookies and the
// open page when the browser starts again (how a session's browser
// survives the session waiting).
func TestLifecycle(t *testing.T) {
	needChromium(t)
	t.Setenv("HRNS_TEST_SECRET", "sk-must-not-leak")
	s := newSite(t)
	profile := filepath.Join(t.TempDir(), "profile")
	opts := &browser.Options{Allow: allowOnly(s.Server), ProfileDir: profile, StartURL: s.URL + "/login"}

	b := browser.New(opts)
	ts := b.Tools()
	snap := call(t, ts, "browser_snapshot", struct{}{})
	mustContain(t, snap, `Page title: "Sign in"`) // the start URL
	call(t, ts, "browser_type", map[string]any{"element": "user", "ref": ref(t, snap, "textbox", "User name"), "text": "ada"})
	out := callApproved(t, ts, "browser_type", map[string]any{"element": "password", "ref": ref(t, snap, "textbox", "Password"), "text": "s3cret", "submit": true})
	mustContain(t, out, "Balance: 4217 credits")
	// Chromium does not inherit this process's environment.
	if env := chromiumEnviron(profile); env == "" || strings.Contains(env, "HRNS_TEST_SECRET") || !strings.Contains(env, "HOME="+profile) {
		t.Fatalf("Chromium's environment: %q", env)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if chromiumUsing(profile) {
		t.Fatal("Chromium still runs after Close")
	}
	// Nor the lock of the killed Chromium: the next browser finds the
	// profile free.
	if _, err := os.Lstat(filepath.Join(profile, "SingletonLock")); !os.IsNotExist(err) {
		t.Fatalf("the profile's lock is left after Close: %v", err)
	}
	if _, err := invoke(ts, "browser_snapshot", struct{}{}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a call after Close: %v", err)
	}

	// Started again on the same profile: the session cookie (no expiry)
	// and the page are back, and the start URL is not opened over them.
	b2 := browser.New(opts)
	defer b2.Close()
	out = call(t, b2.Tools(), "browser_snapshot", struct{}{})
	mustContain(t, out, "/account", "Balance: 4217 credits")
	b2.Close()

	// A temporary profile is removed.
	b3 := browser.New(&browser.Options{Allow: allowOnly(s.Server)})
	call(t, b3.Tools(), "browser_navigate", map[string]any{"url": s.URL + "/"})
	tmp := b3.Profile()
	if tmp == "" {
		t.Fatal("no profile")
	}
	b3.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary profile %s is still there: %v", tmp, err)
	}
	if chromiumUsing(tmp) {
		t.Fatal("Chromium still runs after Close")
	}
}

// TestProfileTakenInTurn starts a browser on a kept profile while another
// one still runs on it (a session's next run on hrns serve, resumed before
// the last run's browser closed): it waits for the first to close, then
// starts on the profile with what the first saved, instead of failing to
// start ("chrome failed to start").
func TestProfileTakenInTurn(t *testing.T) {
	needChromium(t)
	s := newSite(t)
	profile := filepath.Join(t.TempDir(), "profile")
	opts := &browser.Options{Allow: allowOnly(s.Server), ProfileDir: profile}
	b1 := browser.New(opts)
	defer b1.Close()
	call(t, b1.Tools(), "browser_navigate", map[string]any{"url": s.URL + "/login"})

	b2 := browser.New(opts)
	defer b2.Close()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := invoke(b2.Tools(), "browser_snapshot", struct{}{})
		done <- result{out, err}
	}()
	// Closed a moment later (whether b2 waits already or not, it must
	// not start before).
	time.Sleep(200 * time.Millisecond)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the second browser on the profile: %v", r.err)
	}
	mustContain(t, r.out, "/login") // the page the first one saved
}
