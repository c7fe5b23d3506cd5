package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestWebFetchAllow: web_fetch refuses a loopback server and its refusal
// names --web-allow; with --web-allow naming the server's address and
// port, the page is fetched.
func TestWebFetchAllow(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "LOCAL-DEV-SERVER-PAGE")
	}))
	defer page.Close()
	fetch := `{"url":"` + page.URL + `/status"}`
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("w1", "web_fetch", fetch)}},
		openaitest.Reply{Text: "Refused."},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("w2", "web_fetch", fetch)}},
		openaitest.Reply{Text: "Fetched."},
	)
	defer srv.Close()
	dir := t.TempDir()

	r := hrns(t, dir, srv, "run", "--tools", "web_fetch", "check the dev server")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "✗ web_fetch") || !strings.Contains(r.stderr, "--web-allow") {
		t.Errorf("the refusal does not name --web-allow:\n%s", r.stderr)
	}
	reqs := srv.Requests()
	if got := toolResults(t, reqs[1].Body); len(got) != 1 || !strings.Contains(got[0], "not on the public internet") || !strings.Contains(got[0], "--web-allow") {
		t.Errorf("the model's refusal = %q", got)
	}

	hostport := strings.TrimPrefix(page.URL, "http://")
	r = hrns(t, dir, srv, "run", "--tools", "web_fetch", "--web-allow", hostport, "check the dev server")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	reqs = srv.Requests()
	if got := toolResults(t, reqs[3].Body); len(got) != 1 || !strings.Contains(got[0], "LOCAL-DEV-SERVER-PAGE") {
		t.Errorf("with --web-allow %s the result = %q", hostport, got)
	}
	if r := hrns(t, dir, srv, "run", "--tools", "web_fetch", "--web-allow", "localhost", "x"); r.code != 2 || !strings.Contains(r.stderr, "--web-allow") {
		t.Errorf("a bad --web-allow: exit %d: %s", r.code, r.stderr)
	}
}
