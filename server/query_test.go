package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestQueryParameters: a long-poll's and an event page's query
// parameters are read as url.Values.Get reads them (the first of a
// repeated one, an empty one as absent), and a bad one is a 422 naming
// it, with the other bad ones of the request.
func TestQueryParameters(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	base := "/api/v2/sessions/" + id

	type detail struct {
		Loc   []any  `json:"loc"`
		Msg   string `json:"msg"`
		Input any    `json:"input"`
	}
	bad := func(query string) []detail {
		t.Helper()
		r := e.expect(e.do("GET", base+query, keyAlice, nil), http.StatusUnprocessableEntity)
		var body struct{ Detail []detail }
		r.json(&body)
		return body.Detail
	}
	for _, c := range []struct {
		query string
		want  []detail
	}{
		{"/changes?from_index=abc", []detail{{[]any{"query", "from_index"}, "Input should be a valid integer", "abc"}}},
		{"/changes?from_index=1&wait_for_seconds=26&include_events=maybe", []detail{
			{[]any{"query", "include_events"}, "Input should be a valid boolean", "maybe"},
			{[]any{"query", "wait_for_seconds"}, "Input should be less than or equal to 25", "26"},
		}},
		{"/changes?from_index=x&from_index=2", []detail{{[]any{"query", "from_index"}, "Input should be a valid integer", "x"}}},
		{"/changes?limit=-1", []detail{{[]any{"query", "limit"}, "Input should be greater than or equal to 0", "-1"}}},
		{"/events?page=0&size=500", []detail{
			{[]any{"query", "page"}, "Input should be greater than or equal to 1", "0"},
			{[]any{"query", "size"}, "Input should be less than or equal to 200", "500"},
		}},
	} {
		if d := cmp.Diff(c.want, bad(c.query)); d != "" {
			t.Errorf("%s: detail (-want +got):\n%s", c.query, d)
		}
	}

	changes := func(query string) (int, map[string]json.RawMessage) {
		t.Helper()
		r := e.do("GET", base+"/changes?"+query, keyAlice, nil)
		var c map[string]json.RawMessage
		if r.status == http.StatusOK {
			r.json(&c)
		}
		return r.status, c
	}
	events := func(c map[string]json.RawMessage) int {
		var ev []json.RawMessage
		json.Unmarshal(c["new_events"], &ev)
		return len(ev)
	}
	_, all := changes("from_index=0")
	n := events(all)
	if n < 3 {
		t.Fatalf("%d events", n)
	}
	for _, c := range []struct {
		query  string
		status int
		events int
	}{
		{"from_index=1&from_index=x", 200, n - 1}, // the first value
		{"from_index=&limit=", 200, n},            // empty: absent
		{"from_index=1&limit=1", 200, 1},
		{"from_index=1&limit=0", 200, 0},
		{"from_index=0&include_events=false", 200, 0},
		{"from_index=0&include_events=1", 200, n},
		{fmt.Sprintf("from_index=%d", n), 204, 0},
	} {
		status, got := changes(c.query)
		if status != c.status || events(got) != c.events {
			t.Errorf("%s: %d with %d events, want %d with %d", c.query, status, events(got), c.status, c.events)
		}
	}
}
