package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUISessionsBounded: the cookie sessions expire, and each owner's
// number stays at uiMaxSessionsPerKey, its oldest going first, without
// touching another owner's.
func TestUISessionsBounded(t *testing.T) {
	var u uiSessions
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first, _ := u.add("key:a", now)
	if s, ok := u.get(first, now.Add(uiSessionTTL-time.Second)); !ok || s.owner != "key:a" {
		t.Fatalf("a live session is not found: %v %v", s, ok)
	}
	if _, ok := u.get(first, now.Add(uiSessionTTL)); ok {
		t.Fatal("an expired session is found")
	}
	if len(u.m) != 0 {
		t.Fatalf("the expired session stays: %d", len(u.m))
	}
	bob, _ := u.add("key:b", now)
	tokens := make([]string, 50*uiMaxSessionsPerKey)
	for i := range tokens {
		tokens[i], _ = u.add("key:a", now.Add(time.Duration(i)*time.Second))
	}
	if len(u.m) != uiMaxSessionsPerKey+1 || len(u.byOwner["key:a"]) != uiMaxSessionsPerKey {
		t.Fatalf("%d sessions (%d of key:a), want %d and %d", len(u.m), len(u.byOwner["key:a"]), uiMaxSessionsPerKey+1, uiMaxSessionsPerKey)
	}
	at := now.Add(time.Duration(len(tokens)) * time.Second)
	if _, ok := u.get(tokens[len(tokens)-uiMaxSessionsPerKey-1], at); ok {
		t.Error("a session beyond the owner's bound survived")
	}
	if _, ok := u.get(tokens[len(tokens)-uiMaxSessionsPerKey], at); !ok {
		t.Error("the oldest session within the bound is missing")
	}
	if _, ok := u.get(bob, at); !ok {
		t.Error("another owner's logins ended key:b's session")
	}
	if _, ok := u.get("", at); ok {
		t.Error("an empty token is a session")
	}
	last := tokens[len(tokens)-1]
	u.remove(last)
	if _, ok := u.get(last, at); ok {
		t.Error("a removed session is found")
	}
	// Expired sessions of the owner go at its next login.
	u.add("key:a", now.Add(uiSessionTTL+time.Hour))
	if n := len(u.byOwner["key:a"]); n != 1 {
		t.Errorf("after expiry, key:a has %d sessions listed, want 1", n)
	}
}

// newLoginServer is a server with two keys on loopback, its clock now.
func newLoginServer(t *testing.T, now func() time.Time) (*Server, string) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, llmtest.NewModel(), nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	s, err := New(m, &Options{APIKeys: []string{"sk-alice", "sk-bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if now != nil {
		s.now = now
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// uiLogin logs in with key through c and returns the status and the
// cookie.
func uiLogin(t *testing.T, c *http.Client, url, key string) (int, *http.Cookie) {
	t.Helper()
	resp, err := c.Post(url+"/ui/login", "application/json", strings.NewReader(`{"key":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == uiCookie {
			return resp.StatusCode, ck
		}
	}
	return resp.StatusCode, nil
}

// loggedIn reports whether the page is logged in with the cookie.
func loggedIn(t *testing.T, url string, ck *http.Cookie) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/ui/session", nil)
	req.AddCookie(ck)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		LoggedIn bool `json:"logged_in"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return v.LoggedIn
}

// TestUILoginsPerKey: a thousand logins with Alice's key do not log Bob's
// browser out (issue 32, finding 10); Alice's own oldest cookie ends at
// her bound.
func TestUILoginsPerKey(t *testing.T) {
	s, url := newLoginServer(t, nil)
	_, bob := uiLogin(t, http.DefaultClient, url, "sk-bob")
	_, alice := uiLogin(t, http.DefaultClient, url, "sk-alice")
	for i := range 1000 {
		if code, _ := uiLogin(t, http.DefaultClient, url, "sk-alice"); code != http.StatusOK {
			t.Fatalf("login %d: %d", i, code)
		}
	}
	if !loggedIn(t, url, bob) {
		t.Error("Alice's logins logged Bob's browser out")
	}
	if loggedIn(t, url, alice) {
		t.Error("Alice's first cookie outlived her bound")
	}
	s.ui.mu.Lock()
	n := len(s.ui.m)
	s.ui.mu.Unlock()
	if n != uiMaxSessionsPerKey+1 {
		t.Errorf("%d cookie sessions held, want %d", n, uiMaxSessionsPerKey+1)
	}
}
