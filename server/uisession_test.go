package server

import (
	"testing"
	"time"
)

// TestUISessionsBounded: the cookie sessions expire, and their number
// stays at uiMaxSessions, the one nearest its expiry going first.
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
	tokens := make([]string, uiMaxSessions+1)
	for i := range tokens {
		tokens[i], _ = u.add("key:a", now.Add(time.Duration(i)*time.Second))
	}
	if len(u.m) != uiMaxSessions {
		t.Fatalf("%d sessions, want %d", len(u.m), uiMaxSessions)
	}
	at := now.Add(uiMaxSessions * time.Second)
	if _, ok := u.get(tokens[0], at); ok {
		t.Error("the oldest session survived the bound")
	}
	if _, ok := u.get(tokens[uiMaxSessions], at); !ok {
		t.Error("the newest session is missing")
	}
	if _, ok := u.get("", at); ok {
		t.Error("an empty token is a session")
	}
	u.remove(tokens[1])
	if _, ok := u.get(tokens[1], at); ok {
		t.Error("a removed session is found")
	}
}
