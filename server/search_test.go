package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestListSearchBounded: the sessions list's and the registries' search
// is at most 1,000 bytes; longer is 422 at query.search. Before, a search
// past SQLite's longest LIKE pattern (50,000 bytes) was a 500 "internal
// error" and an ERROR in the log, and every search at most that long
// was matched against each of the key's sessions.
func TestListSearchBounded(t *testing.T) {
	e := newEnv(t, nil)
	e.create(keyAlice, orderAgent)
	for _, p := range []string{"/api/v2/sessions", "/api/v2/agents", "/api/v2/skills", "/api/v2/environments"} {
		e.expect(e.do("GET", p+"?search="+strings.Repeat("a", 1000), keyAlice, nil), http.StatusOK)
		for _, n := range []int{1001, 50_001} {
			r := e.do("GET", p+"?search="+strings.Repeat("a", n), keyAlice, nil)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"loc":["query","search"]`) {
				t.Errorf("GET %s with a search of %d bytes: %d %.200s, want 422 at query.search", p, n, r.status, r.body)
			}
		}
	}
}
