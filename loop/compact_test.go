package loop_test

// Context compaction, over both providers' wire formats: every request
// body is checked for the size budget and for what each API requires of
// tool calls, tool results and signed thinking.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	loopcompact "github.com/hrns-dev/hrns/loop/compact"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// wireReply is one scripted answer, provider-neutral; contextLength makes
// the server refuse the request as too long instead.
type wireReply struct {
	thinking      string
	text          string
	calls         []llm.ToolCall
	contextLength bool
}

// wire is a provider's scripted server driven by a function of the request
// body, and the checks its API makes of a request.
type wire struct {
	name string
	// serve starts a server whose every reply is next(body), reporting
	// len(body)/4 input tokens, as if a token were four bytes.
	serve func(next func(body []byte) wireReply) (llm.Model, func() [][]byte, func())
	// check fails unless body is a valid request for the API.
	check func(t *testing.T, body []byte)
}

var wires = []wire{
	{"openai", func(next func([]byte) wireReply) (llm.Model, func() [][]byte, func()) {
		srv := openaitest.NewServer()
		var reply openaitest.Reply
		reply.Func = func(body []byte) openaitest.Reply {
			srv.Push(reply) // one more for the next request
			w := next(body)
			if w.contextLength {
				return openaitest.Reply{Status: http.StatusBadRequest, Body: openaitest.ErrorBody("invalid_request_error", "context_length_exceeded",
					"This model's maximum context length is 8192 tokens.")}
			}
			return openaitest.Reply{Reasoning: w.thinking, Text: w.text, ToolCalls: w.calls, Usage: &llm.Usage{InputTokens: int64(len(body) / 4), OutputTokens: 20}}
		}
		srv.Push(reply)
		return &openai.Client{BaseURL: srv.URL(), Model: "m"}, func() [][]byte { return bodies(srv.Requests()) }, srv.Close
	}, checkOpenAI},
	{"anthropic", func(next func([]byte) wireReply) (llm.Model, func() [][]byte, func()) {
		srv := anthropictest.NewServer()
		var reply anthropictest.Reply
		reply.Func = func(body []byte) anthropictest.Reply {
			srv.Push(reply)
			w := next(body)
			if w.contextLength {
				return anthropictest.Reply{Status: http.StatusBadRequest, Body: anthropictest.ErrorBody("invalid_request_error",
					"prompt is too long: 215000 tokens > 200000 maximum")}
			}
			return anthropictest.Reply{Thinking: w.thinking, Signature: sign(w.thinking), Text: w.text, ToolCalls: w.calls,
				Usage: &llm.Usage{InputTokens: int64(len(body) / 4), OutputTokens: 20}}
		}
		srv.Push(reply)
		return &anthropic.Client{BaseURL: srv.URL(), Model: "m"}, func() [][]byte { return anthropicBodies(srv.Requests()) }, srv.Close
	}, checkAnthropic},
	{"gemini", func(next func([]byte) wireReply) (llm.Model, func() [][]byte, func()) {
		srv := geminitest.NewServer()
		var reply geminitest.Reply
		reply.Func = func(body []byte) geminitest.Reply {
			srv.Push(reply)
			w := next(body)
			if w.contextLength {
				return geminitest.Reply{Status: http.StatusBadRequest, Body: geminitest.ErrorBody(400, "INVALID_ARGUMENT",
					"The input token count (215000) exceeds the maximum number of tokens allowed (200000).")}
			}
			// Calls without ids, as Gemini 2.5 makes them, signed when
			// the model thought.
			var calls []llm.ToolCall
			for _, c := range w.calls {
				calls = append(calls, geminitest.ToolCall("", c.Name, string(c.Arguments)))
			}
			return geminitest.Reply{Thoughts: w.thinking, Signature: sign(w.thinking), Text: w.text, ToolCalls: calls,
				Usage: &llm.Usage{InputTokens: int64(len(body) / 4), OutputTokens: 20}}
		}
		srv.Push(reply)
		return &gemini.Client{BaseURL: srv.URL(), Model: "m"}, func() (out [][]byte) {
			for _, r := range srv.Requests() {
				out = append(out, r.Body)
			}
			return out
		}, srv.Close
	}, checkGemini},
}

// checkGemini: turns alternate, starting with the user's; every model turn
// with function calls is followed by a user turn answering each of them, by
// name and in order, first; and every thought signature sent back is one
// the script made (sign's form, its length matching).
func checkGemini(t *testing.T, body []byte) {
	t.Helper()
	type part struct {
		Text         *string `json:"text"`
		FunctionCall *struct {
			Name string `json:"name"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name string `json:"name"`
		} `json:"functionResponse"`
		ThoughtSignature string `json:"thoughtSignature"`
	}
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []part `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body: %v", err)
	}
	if len(req.Contents) == 0 || req.Contents[0].Role != "user" {
		t.Fatal("the conversation does not start with a user turn")
	}
	var calls []string
	for i, c := range req.Contents {
		if i > 0 && c.Role == req.Contents[i-1].Role {
			t.Fatalf("content %d: two %s turns in a row", i, c.Role)
		}
		if len(c.Parts) == 0 {
			t.Fatalf("content %d: no parts", i)
		}
		for _, p := range c.Parts {
			if sig := p.ThoughtSignature; sig != "" {
				var n int
				var rest string
				if _, err := fmt.Sscanf(sig, "sig:%d:", &n); err != nil {
					t.Fatalf("content %d: signature %q is not one the script made", i, sig)
				}
				rest = sig[strings.Index(sig[4:], ":")+5:]
				if len(rest) != n {
					t.Fatalf("content %d: signature %q was altered", i, sig)
				}
			}
		}
		if c.Role == "model" {
			calls = nil
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					calls = append(calls, p.FunctionCall.Name)
				}
			}
			continue
		}
		for j, name := range calls {
			if j >= len(c.Parts) || c.Parts[j].FunctionResponse == nil || c.Parts[j].FunctionResponse.Name != name {
				t.Fatalf("content %d: call %d (%s) is not answered in order", i, j, name)
			}
		}
		for _, p := range c.Parts[len(calls):] {
			if p.FunctionResponse != nil {
				t.Fatalf("content %d: a function response without a call", i)
			}
		}
		calls = nil
	}
}

func bodies(reqs []openaitest.Request) [][]byte {
	var out [][]byte
	for _, r := range reqs {
		out = append(out, r.Body)
	}
	return out
}

func anthropicBodies(reqs []anthropictest.Request) [][]byte {
	var out [][]byte
	for _, r := range reqs {
		out = append(out, r.Body)
	}
	return out
}

// sign is the scripted signature of a thinking text; checkAnthropic
// verifies every thinking block sent back still carries its own.
func sign(thinking string) string {
	if thinking == "" {
		return ""
	}
	return fmt.Sprintf("sig:%d:%s", len(thinking), thinking)
}

// checkOpenAI: every tool message answers a call of the assistant message
// before the run of tool messages it belongs to, and every call is
// answered before the next non-tool message.
func checkOpenAI(t *testing.T, body []byte) {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body: %v", err)
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				t.Fatalf("message %d: tool result %q answers no open call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			t.Fatalf("message %d (%s): calls %v unanswered", i, m.Role, open)
		}
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls %v unanswered at the end", open)
	}
}

// checkAnthropic: the conversation starts with a user turn and alternates;
// each assistant turn's tool_use blocks are answered, all of them and only
// them, by tool_result blocks at the start of the next user turn; thinking
// blocks come first in their turn and carry their own signature.
func checkAnthropic(t *testing.T, body []byte) {
	t.Helper()
	type blk struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		ToolUseID string  `json:"tool_use_id"`
		Thinking  *string `json:"thinking"`
		Signature string  `json:"signature"`
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []blk  `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body: %v", err)
	}
	if len(req.Messages) == 0 || req.Messages[0].Role != "user" {
		t.Fatal("the conversation does not start with a user turn")
	}
	var calls []string
	for i, m := range req.Messages {
		if i > 0 && m.Role == req.Messages[i-1].Role {
			t.Fatalf("message %d: two %s turns in a row", i, m.Role)
		}
		if m.Role == "assistant" {
			calls = nil
			seenOther := false
			for _, b := range m.Content {
				switch b.Type {
				case "thinking":
					if seenOther {
						t.Fatalf("message %d: thinking after other blocks", i)
					}
					if b.Thinking == nil || b.Signature != sign(*b.Thinking) {
						t.Fatalf("message %d: thinking block with a signature not its own: %q", i, b.Signature)
					}
				case "tool_use":
					seenOther = true
					calls = append(calls, b.ID)
				default:
					seenOther = true
				}
			}
			continue
		}
		var results []string
		for j, b := range m.Content {
			if b.Type == "tool_result" {
				if j != len(results) {
					t.Fatalf("message %d: tool_result after other blocks", i)
				}
				results = append(results, b.ToolUseID)
			}
		}
		if strings.Join(results, ",") != strings.Join(calls, ",") {
			t.Fatalf("message %d: results %v answer calls %v", i, results, calls)
		}
		calls = nil
	}
}

func readTool(size int) *loop.ToolDef {
	type in struct {
		N int `json:"n"`
	}
	return loop.NewTool("read", "Reads part n.", func(_ context.Context, in in) (string, error) {
		return fmt.Sprintf("part %d: %s", in.N, strings.Repeat("x", size)), nil
	})
}

func isSummaryRequest(body []byte) bool {
	var req struct {
		Tools []json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &req)
	return len(req.Tools) == 0
}

// A long run (hundreds of turns with large tool results) completes within
// a small context window: every request fits it, trims and summaries
// happen, and the provider's invariants hold on every request.
func TestCompactionLongRunAcrossProviders(t *testing.T) {
	const (
		turns  = 300
		window = 8000 // tokens; a body of at most 4*window bytes
		size   = 3000 // bytes of each tool result
	)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			model, reqs, stop := w.serve(func(body []byte) wireReply {
				mu.Lock()
				defer mu.Unlock()
				if isSummaryRequest(body) {
					return wireReply{text: fmt.Sprintf("Parts 1 to %d were read; each was all x.", calls)}
				}
				if calls == turns {
					return wireReply{text: "Read every part."}
				}
				calls++
				return wireReply{
					thinking: fmt.Sprintf("Next, part %d.", calls),
					calls:    []llm.ToolCall{tc(fmt.Sprintf("call_%d", calls), "read", fmt.Sprintf(`{"n":%d}`, calls))},
				}
			})
			defer stop()
			agent := loop.NewAgent(model, loop.MustToolset(readTool(size)), &loop.Options{
				MaxTurns:   turns + 10,
				Compaction: &loop.Compaction{ContextWindow: window},
			})
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{
				llm.SystemMessage("You read parts."), llm.UserMessage("Read all the parts."),
			}))
			if res.Err != nil || res.Answer != "Read every part." {
				t.Fatalf("err %v, answer %q", res.Err, res.Answer)
			}
			summaries, thinking := 0, 0
			for _, b := range reqs() {
				if strings.Contains(string(b), `"type":"thinking"`) {
					thinking++
				}
				if len(b) > 4*window {
					t.Errorf("a request of %d bytes, more than %d", len(b), 4*window)
				}
				if isSummaryRequest(b) {
					summaries++
					continue
				}
				w.check(t, b)
			}
			var trimmed, summarized int
			for _, c := range only(chunks, loop.ChunkCompaction) {
				ci := c.Compaction
				if ci.Reason != "context_window" || ci.TokensAfter >= ci.TokensBefore || ci.MessagesAfter > ci.MessagesBefore {
					t.Errorf("compaction %+v", ci)
				}
				trimmed += ci.Trimmed
				summarized += ci.Summarized
			}
			if w.name == "anthropic" && thinking < turns {
				t.Errorf("%d requests carry thinking blocks", thinking)
			}
			if trimmed == 0 || summarized == 0 || summaries == 0 {
				t.Errorf("trimmed %d results, summarised %d messages in %d requests", trimmed, summarized, summaries)
			}
			// The result holds the compacted transcript: the system
			// prompt and the task first, the last turns whole.
			m := res.Messages
			if len(m) > 100 || m[0].Text() != "You read parts." || m[1].Text() != "Read all the parts." || m[len(m)-1].Text() != "Read every part." {
				t.Errorf("%d messages, first %q, last %q", len(m), m[0].Text(), m[len(m)-1].Text())
			}
			if n := len(res.Turns); n != turns+1 {
				t.Errorf("%d turns", n)
			}
			t.Logf("%d requests, %d summaries, %d results trimmed, %d messages summarised, %d messages at the end",
				len(reqs()), summaries, trimmed, summarized, len(m))
		})
	}
}

// A provider's context length error compacts the transcript and sends the
// request again, once per turn.
func TestCompactionOnContextLengthAcrossProviders(t *testing.T) {
	for _, w := range wires {
		for _, twice := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/twice=%v", w.name, twice), func(t *testing.T) {
				var mu sync.Mutex
				n, refused := 0, 0
				model, reqs, stop := w.serve(func(body []byte) wireReply {
					mu.Lock()
					defer mu.Unlock()
					n++
					switch {
					case n <= 6:
						return wireReply{thinking: fmt.Sprintf("Part %d.", n), calls: []llm.ToolCall{tc(fmt.Sprintf("c%d", n), "read", fmt.Sprintf(`{"n":%d}`, n))}}
					case n == 7 || twice && n == 8:
						refused++
						return wireReply{contextLength: true}
					}
					return wireReply{text: "Done."}
				})
				defer stop()
				agent := loop.NewAgent(model, loop.MustToolset(readTool(3000)), &loop.Options{Compaction: &loop.Compaction{}})
				chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")}))
				cs := only(chunks, loop.ChunkCompaction)
				if len(cs) != 1 || cs[0].Compaction.Reason != "context_length" || cs[0].Compaction.Strategy != "trim" || cs[0].Turn != 7 {
					t.Fatalf("compaction chunks %+v", cs)
				}
				b := reqs()
				for _, body := range b {
					w.check(t, body)
				}
				if len(b[7]) >= len(b[6])/2 {
					t.Errorf("the request after compaction has %d bytes, the refused one %d", len(b[7]), len(b[6]))
				}
				if twice {
					if !errors.Is(res.Err, llm.ErrContextLength) || len(b) != 8 {
						t.Fatalf("err %v after %d requests, want a context length error after 8", res.Err, len(b))
					}
					return
				}
				if res.Err != nil || res.Answer != "Done." || len(b) != 8 || res.Turns[6].Retries != 1 {
					t.Fatalf("err %v, answer %q, %d requests, turn 7 %+v", res.Err, res.Answer, len(b), res.Turns[6])
				}
			})
		}
	}
}

// Without Compaction, a context length error fails the run as before.
func TestContextLengthWithoutCompaction(t *testing.T) {
	model := llmtest.NewModel(llmtest.Fail(&llm.APIError{StatusCode: 400, Code: "context_length_exceeded"}))
	agent := loop.NewAgent(model, nil, nil)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if !errors.Is(res.Err, llm.ErrContextLength) {
		t.Fatalf("err %v", res.Err)
	}
}

// The summary's tokens count in the run's usage; a suspension holds the
// compacted transcript, and a resumed run goes on from it.
func TestCompactionUsageAndSuspension(t *testing.T) {
	big := strings.Repeat("y", 2000)
	call := func(id, name, args string, in int64) llmtest.Reply {
		r := llmtest.Call(id, name, args)
		r.Usage = llm.Usage{InputTokens: in, OutputTokens: 10}
		return r
	}
	model := llmtest.NewModel(
		call("c1", "read", `{"n":1}`, 10),
		call("c2", "read", `{"n":2}`, 500),
		call("c3", "read", `{"n":3}`, 1600),
		// Before turn 4 the estimate (1610 reported, plus the
		// result of c3) is past 80% of the window: the model
		// summarises the turns before the last one.
		llmtest.Reply{Text: "Two parts read.", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 7}},
		call("c4", "ask", `{}`, 900),
	)
	ask := loop.NewClientTool("ask", "Asks the user.", json.RawMessage(`{"type":"object"}`))
	ts := loop.MustToolset(readTool(len(big)), ask)
	agent := loop.NewAgent(model, ts, &loop.Options{Compaction: &loop.Compaction{
		ContextWindow: 2000, KeepTurns: 1, Strategy: loopcompact.Summarize{},
	}})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	cs := only(chunks, loop.ChunkCompaction)
	if len(cs) != 1 || cs[0].Compaction.Usage == nil || cs[0].Compaction.Usage.InputTokens != 1000 {
		t.Fatalf("compactions %+v", cs)
	}
	if sr := model.Requests()[3]; len(sr.Tools) != 0 || sr.Messages[0].Text() != loopcompact.DefaultSummaryPrompt {
		t.Errorf("summary request: %d tools, system %q", len(sr.Tools), sr.Messages[0].Text())
	}
	var turns llm.Usage
	for _, ti := range res.Turns {
		turns.Add(ti.Usage)
	}
	if res.Usage.InputTokens != turns.InputTokens+1000 {
		t.Errorf("usage %d, turns %d + summary 1000", res.Usage.InputTokens, turns.InputTokens)
	}
	// sys, task, summary, the last turn (call c3 and its result), call c4.
	if got := len(res.Suspension.Messages); got != 6 || !strings.HasPrefix(res.Suspension.Messages[2].Text(), loopcompact.SummaryHeader) {
		t.Fatalf("suspension holds %d messages: %+v", got, res.Suspension.Messages)
	}
	model.Push(llmtest.Text("Done."))
	_, res = collect(t, agent.Resume(t.Context(), res.Suspension, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "c4", Content: []llm.Part{llm.TextPart("yes")}}}}))
	if res.Err != nil || res.Answer != "Done." {
		t.Fatalf("resume: err %v, answer %q", res.Err, res.Answer)
	}
}

// A compaction that fails after a context length error fails the run with
// the provider's error, saying why the compaction failed.
func TestCompactionFailureAfterContextLength(t *testing.T) {
	ctxErr := &llm.APIError{Provider: "p", StatusCode: 400, Code: "context_length_exceeded", Message: "too long"}
	model := llmtest.NewModel(
		llmtest.Call("c1", "echo", `{"text":"a"}`),
		llmtest.Call("c2", "echo", `{"text":"b"}`),
		llmtest.Call("c3", "echo", `{"text":"c"}`),
		llmtest.Fail(ctxErr),
		llmtest.Fail(&llm.APIError{Provider: "p", StatusCode: 401, Message: "summary refused"}),
	)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), &loop.Options{Compaction: &loop.Compaction{}})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if !errors.Is(res.Err, llm.ErrContextLength) || !strings.Contains(res.Err.Error(), "compaction failed") || !strings.Contains(res.Err.Error(), "summary refused") {
		t.Fatalf("err %v", res.Err)
	}
	if n := len(only(chunks, loop.ChunkCompaction)); n != 0 {
		t.Errorf("%d compaction chunks", n)
	}
	if len(res.Messages) != 7 {
		t.Errorf("the transcript changed: %d messages", len(res.Messages))
	}
}

// A suspension carries the provider's count of the transcript, and the
// resumed run estimates the next request from it: a count past the
// threshold compacts before the first request of the resumed run, where
// the transcript's own estimate (far smaller) would not.
func TestCompactionCountSurvivesSuspension(t *testing.T) {
	for _, tc := range []struct {
		name    string
		forget  bool // drop the count from the suspension, as an older one would
		compact bool
	}{{"count carried", false, true}, {"no count", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			call := llmtest.Call("c1", "ask", `{}`)
			call.Usage = llm.Usage{InputTokens: 1900, OutputTokens: 10}
			model := llmtest.NewModel(call, llmtest.Text("Done."))
			ask := loop.NewClientTool("ask", "Asks the user.", json.RawMessage(`{"type":"object"}`))
			agent := loop.NewAgent(model, loop.MustToolset(ask), &loop.Options{Compaction: &loop.Compaction{
				ContextWindow: 2000, KeepTurns: 1, Strategy: loopcompact.Trim{MinBytes: 1},
			}})
			msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c0", Name: "ask", Arguments: llm.Arguments(`{}`)}}}},
				llm.ToolResultMessage("c0", strings.Repeat("z", 400))}
			_, res := collect(t, agent.RunLoop(t.Context(), msgs))
			s := res.Suspension
			if res.Status != loop.StatusSuspended || s.Counted != 1910 || s.CountedMessages != 5 {
				t.Fatalf("status %s, counted %d of %d messages", res.Status, s.Counted, s.CountedMessages)
			}
			if tc.forget {
				s.Counted, s.CountedMessages = 0, 0
			}
			chunks, res := collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "c1", Content: []llm.Part{llm.TextPart("yes")}}}}))
			if res.Err != nil || res.Answer != "Done." {
				t.Fatalf("resume: err %v, answer %q", res.Err, res.Answer)
			}
			if got := len(only(chunks, loop.ChunkCompaction)) > 0; got != tc.compact {
				t.Errorf("compacted %v, want %v", got, tc.compact)
			}
		})
	}
}

// A request refused as too long whose latest turns alone are past the
// target (here the only two turns, each with a large result) is compacted
// keeping only the last turn whole, and sent again, instead of failing
// the run for want of anything older to compact.
func TestCompactionAfterContextLengthKeepsLastTurnOnly(t *testing.T) {
	ctxErr := &llm.APIError{Provider: "p", StatusCode: 400, Code: "context_length_exceeded", Message: "too long"}
	model := llmtest.NewModel(
		llmtest.Call("c1", "read", `{"n":1}`),
		llmtest.Call("c2", "read", `{"n":2}`),
		llmtest.Fail(ctxErr),
		llmtest.Text("done"),
	)
	agent := loop.NewAgent(model, loop.MustToolset(readTool(8000)), &loop.Options{Compaction: &loop.Compaction{Strategy: loopcompact.Trim{}}})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Answer != "done" {
		t.Fatalf("err %v, answer %q", res.Err, res.Answer)
	}
	cs := only(chunks, loop.ChunkCompaction)
	if len(cs) != 1 || cs[0].Compaction.Reason != "context_length" || cs[0].Compaction.Trimmed != 1 || cs[0].Compaction.Strategy != "trim" {
		t.Fatalf("compactions %+v", cs)
	}
	// The retry carries c1's result as a stub, c2's whole.
	last := model.Requests()[3].Messages
	if r := last[2].Parts[0].ToolResult.Text(); !strings.HasPrefix(r, "[compacted:") {
		t.Errorf("c1's result in the retry: %.40q", r)
	}
	if r := last[4].Parts[0].ToolResult.Text(); !strings.HasPrefix(r, "part 2: xxx") {
		t.Errorf("c2's result in the retry: %.40q", r)
	}
}
