package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// A model that writes malformed arguments (here the closing brace is
// missing) is told so and the run goes on, in every output mode, and a
// recording of it replays.
func TestMalformedArgumentsEveryMode(t *testing.T) {
	script := func() *openaitest.Server {
		return openaitest.NewServer(
			openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "read_file", `{"path": "notes.txt"`)}},
			openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "read_file", `{"path":"hello.txt"}`)}},
			openaitest.Reply{Text: "It says hello."},
		)
	}
	checkRequests := func(t *testing.T, srv *openaitest.Server) {
		t.Helper()
		reqs := srv.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d model requests, want 3", len(reqs))
		}
		// The malformed call is sent back as an object the next request
		// can carry, and the model reads what was wrong.
		if !strings.Contains(string(reqs[1].Body), `"arguments":"{}"`) {
			t.Errorf("the malformed call was not sent back as {}:\n%s", reqs[1].Body)
		}
		if got := toolResults(t, reqs[1].Body)[0]; !strings.Contains(got, "not valid JSON") || !strings.Contains(got, `{"path": "notes.txt"`) {
			t.Errorf("the model read %q", got)
		}
	}

	t.Run("text", func(t *testing.T) {
		srv := script()
		defer srv.Close()
		r := hrns(t, workdir(t), srv, "run", "read it")
		if r.code != 0 || r.stdout != "It says hello.\n" {
			t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
		}
		checkRequests(t, srv)
	})

	t.Run("json", func(t *testing.T) {
		srv := script()
		defer srv.Close()
		r := hrns(t, workdir(t), srv, "run", "--json", "read it")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		var sawString bool
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var c struct {
				Type     string `json:"type"`
				ToolCall *struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"tool_call"`
			}
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("line is not JSON: %v\n%s", err, line)
			}
			if c.Type == "tool_call_error" && c.ToolCall != nil && string(c.ToolCall.Arguments) == `"{\"path\": \"notes.txt\""` {
				sawString = true
			}
		}
		if !sawString {
			t.Errorf("the malformed arguments were not shown as a string:\n%s", r.stdout)
		}
		checkRequests(t, srv)
	})

	t.Run("record and replay", func(t *testing.T) {
		srv := script()
		dir := workdir(t)
		rec := filepath.Join(t.TempDir(), "session.jsonl")
		r := hrns(t, dir, srv, "run", "--record", rec, "read it")
		srv.Close()
		if r.code != 0 {
			t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
		}
		r = hrns(t, dir, nil, "run", "--replay", rec, "--json", "read it")
		if r.code != 0 || !strings.Contains(r.stdout, `"answer":"It says hello."`) || !strings.Contains(r.stdout, "not valid JSON") {
			t.Fatalf("replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// A model that ignores the request for a final answer leaves no answer:
// the command says which budget was spent and exits 1.
func TestBudgetWithoutAnswerExitsNonZero(t *testing.T) {
	var replies []openaitest.Reply
	for i := range 3 {
		replies = append(replies, openaitest.Reply{ToolCalls: []llm.ToolCall{call("c"+string(rune('1'+i)), "read_file", `{"path":"hello.txt"}`)}})
	}
	srv := openaitest.NewServer(replies...)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "--max-turns", "2", "read it forever")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "max_turns") || !strings.Contains(r.stderr, "no final answer") {
		t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
}
