package loop_test

// One table of loop scenarios, run through both providers against their
// scripted loopback servers: the loop must behave the same whatever the
// wire format.

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// step is one scripted model response, provider-neutral.
type step struct {
	reasoning string
	text      string
	calls     []llm.ToolCall
	status    int    // an HTTP error instead of a stream
	after     string // its Retry-After
}

type provider struct {
	name  string
	serve func(steps []step) (llm.Model, func())
}

var providers = []provider{
	{"openai", func(steps []step) (llm.Model, func()) {
		var replies []openaitest.Reply
		for _, s := range steps {
			r := openaitest.Reply{Reasoning: s.reasoning, Text: s.text, ToolCalls: s.calls}
			if s.status != 0 {
				r = openaitest.Reply{Status: s.status, Header: http.Header{"Retry-After": {s.after}}, Body: openaitest.ErrorBody("server_error", "", "try again")}
			}
			replies = append(replies, r)
		}
		srv := openaitest.NewServer(replies...)
		return &openai.Client{BaseURL: srv.URL(), Model: "m"}, srv.Close
	}},
	{"anthropic", func(steps []step) (llm.Model, func()) {
		var replies []anthropictest.Reply
		for _, s := range steps {
			r := anthropictest.Reply{Thinking: s.reasoning, Signature: sig(s.reasoning), Text: s.text, ToolCalls: s.calls}
			if s.status != 0 {
				r = anthropictest.Reply{Status: s.status, Header: http.Header{"Retry-After": {s.after}}, Body: anthropictest.ErrorBody("overloaded_error", "try again")}
			}
			replies = append(replies, r)
		}
		srv := anthropictest.NewServer(replies...)
		return &anthropic.Client{BaseURL: srv.URL(), Model: "m"}, srv.Close
	}},
	{"openai-responses", func(steps []step) (llm.Model, func()) {
		var replies []responsestest.Reply
		for _, s := range steps {
			r := responsestest.Reply{Reasoning: s.reasoning, Encrypted: sig(s.reasoning), Text: s.text, ToolCalls: s.calls}
			if s.status != 0 {
				r = responsestest.Reply{Status: s.status, Header: http.Header{"Retry-After": {s.after}}, Body: responsestest.ErrorBody("server_error", "", "try again")}
			}
			replies = append(replies, r)
		}
		srv := responsestest.NewServer(replies...)
		return &responses.Client{BaseURL: srv.URL(), Model: "m"}, srv.Close
	}},
	{"gemini", func(steps []step) (llm.Model, func()) {
		var replies []geminitest.Reply
		for _, s := range steps {
			// Calls go without ids, as before Gemini 3: the provider
			// makes them up and matches results by name and order.
			var calls []llm.ToolCall
			for _, c := range s.calls {
				calls = append(calls, geminitest.ToolCall("", c.Name, string(c.Arguments)))
			}
			r := geminitest.Reply{Thoughts: s.reasoning, Signature: sig(s.reasoning + s.text), Text: s.text, ToolCalls: calls}
			if s.status != 0 {
				r = geminitest.Reply{Status: s.status, Header: http.Header{"Retry-After": {s.after}}, Body: geminitest.ErrorBody(s.status, "UNAVAILABLE", "try again")}
			}
			replies = append(replies, r)
		}
		srv := geminitest.NewServer(replies...)
		return &gemini.Client{BaseURL: srv.URL(), Model: "m"}, srv.Close
	}},
}

func sig(reasoning string) string {
	if reasoning == "" {
		return ""
	}
	return "sig-" + reasoning[:3]
}

func tc(id, name, args string) llm.ToolCall { return openaitest.ToolCall(id, name, args) }

func TestScenariosAcrossProviders(t *testing.T) {
	scenarios := []struct {
		name    string
		steps   []step
		answer  string
		results []string // substrings of each tool result, in order
		retries int
	}{
		{"one call then an answer", []step{
			{reasoning: "Look it up.", calls: []llm.ToolCall{tc("c1", "echo", `{"text":"hi"}`)}},
			{text: "It echoed hi."},
		}, "It echoed hi.", []string{"echo: hi"}, 0},
		{"two calls in one message", []step{
			{calls: []llm.ToolCall{tc("c1", "echo", `{"text":"a"}`), tc("c2", "echo", `{"text":"b"}`)}},
			{text: "Both."},
		}, "Both.", []string{"echo: a", "echo: b"}, 0},
		{"invalid arguments then recovery", []step{
			{calls: []llm.ToolCall{tc("c1", "echo", `{"text": 3}`)}},
			{calls: []llm.ToolCall{tc("c2", "echo", `{"text":"3"}`)}},
			{text: "Recovered."},
		}, "Recovered.", []string{"invalid arguments", "echo: 3"}, 0},
		{"unknown tool", []step{
			{calls: []llm.ToolCall{tc("c1", "teleport", `{}`)}},
			{text: "No such tool."},
		}, "No such tool.", []string{`unknown tool "teleport"`}, 0},
		{"server error then success", []step{
			{status: 529, after: "0.01"},
			{text: "Back."},
		}, "Back.", nil, 1},
	}
	for _, p := range providers {
		for _, sc := range scenarios {
			if sc.steps[0].status == 529 && p.name == "openai" {
				sc.steps[0].status = 503
			}
			t.Run(p.name+"/"+sc.name, func(t *testing.T) {
				model, stop := p.serve(sc.steps)
				defer stop()
				agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
				chunks, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")}))
				if res.Err != nil || res.Answer != sc.answer {
					t.Fatalf("err %v, answer %q", res.Err, res.Answer)
				}
				var got []llm.ToolResult
				for _, m := range res.Messages {
					if m.Role == llm.RoleTool {
						for _, part := range m.Parts {
							got = append(got, *part.ToolResult)
						}
					}
				}
				if len(got) != len(sc.results) {
					t.Fatalf("%d tool results, want %d", len(got), len(sc.results))
				}
				for i, want := range sc.results {
					if !strings.Contains(got[i].Text(), want) {
						t.Errorf("result %d = %q, want it to contain %q", i, got[i].Text(), want)
					}
				}
				if n := len(only(chunks, loop.ChunkRetry)); n != sc.retries {
					t.Errorf("%d retries, want %d", n, sc.retries)
				}
				if len(res.Turns) != len(sc.steps)-sc.retries {
					t.Errorf("%d turns", len(res.Turns))
				}
			})
		}
	}
}
