package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDeepSchemaRefused: a session whose tool's input_schema or whose
// answer_format nests thousands of levels deep (within encoding/json's
// bound) is 422 at its place, and nothing is kept. Before, each was taken,
// after tens of seconds of a core spent decoding the schema
// (loop.MaxSchemaDepth says why).
func TestDeepSchemaRefused(t *testing.T) {
	e := newEnv(t, nil)
	const n = 2000
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, n) + `{"type":"object"}` + strings.Repeat(`}}`, n)
	for _, tt := range []struct{ body, loc string }{
		{`{"agent":{"name":"a","description":"d","environments":[],"tools":[{"name":"t","description":"x","input_schema":` + deep + `}]}}`, "agent"},
		{`{"agent":{"name":"a","description":"d","environments":[],"answer_format":` + deep + `}}`, "answer_format"},
	} {
		r := e.do("POST", "/api/v2/sessions", keyAlice, tt.body)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "nests deeper than") || !strings.Contains(string(r.body), tt.loc) {
			t.Errorf("a schema %d levels deep at %s: %d %.300s", n, tt.loc, r.status, r.body)
		}
	}
	if r := e.expect(e.do("GET", "/api/v2/sessions", keyAlice, nil), http.StatusOK); !strings.Contains(string(r.body), `"total":0`) {
		t.Errorf("sessions after the refused requests: %s", r.body)
	}
}
