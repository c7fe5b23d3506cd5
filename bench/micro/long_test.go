package micro

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"strconv"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/responses"
)

// longTurns are the lengths of the long runs, in turns.
var longTurns = []int{10, 100, 500}

// turnModel answers a run of turns: a call of the task's tool per turn
// (its arguments in eight deltas), then a text answer. It does the least a
// provider does, keeps nothing of the requests and reads nothing of them,
// so that what a long run costs per turn beyond it is the loop's own.
type turnModel struct {
	turns int // turns per run
	turn  int // turns answered in this run
}

func (m *turnModel) Stream(_ context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	m.turn++
	last := m.turn == m.turns
	if last {
		m.turn = 0
	}
	return func(yield func(llm.Chunk, error) bool) {
		if last {
			text := "The notes say the service listens on 8080."
			if yield(llm.Chunk{Kind: llm.ChunkText, Text: text}, nil) {
				yield(llm.Chunk{Kind: llm.ChunkDone, Response: &llm.Response{
					Message: llm.AssistantMessage(text), FinishReason: llm.FinishStop}}, nil)
			}
			return
		}
		id := "call_" + strconv.Itoa(m.turn)
		args := `{"path":"notes/turn-` + strconv.Itoa(m.turn) + `.txt"}`
		if !yield(llm.Chunk{Kind: llm.ChunkToolCallStart, ID: id, Name: task.ToolName}, nil) {
			return
		}
		for i := range 8 {
			a, b := len(args)*i/8, len(args)*(i+1)/8
			if !yield(llm.Chunk{Kind: llm.ChunkToolCallDelta, Text: args[a:b]}, nil) {
				return
			}
		}
		call := &llm.ToolCall{ID: id, Name: task.ToolName, Arguments: []byte(args)}
		yield(llm.Chunk{Kind: llm.ChunkDone, Response: &llm.Response{
			Message:      llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: call}}},
			FinishReason: llm.FinishToolCalls}}, nil)
	}
}

// BenchmarkLongRun runs conversations of 10, 100 and 500 turns in one
// process (the task's tool, a result of about 500 bytes per turn) and
// reports the cost per turn: flat means a turn costs the same however long
// the conversation has grown.
//
// "loop" is the loop alone, with turnModel as the model: the agent's own
// bookkeeping, the tool and its validation. "openai-encode" is what the
// OpenAI provider adds before sending: rendering each turn's request, the
// whole conversation so far, to its JSON body (openai.Client.Stream renders
// the request when called; the benchmark does not send it). Each run has a
// conversation of its own (llm.Request.Conversation), as a run of the loop
// does, so that the provider encodes only each turn's new messages.
// "responses-encode", "anthropic-encode" and "gemini-encode" are the same
// with the Responses API's, Anthropic's (its default caching: breakpoints on
// the system prompt, the tools and the last turns) and Gemini's clients.
//
// Each also reports the collector's share (see [heapMeter]): its cycles per
// thousand turns, and the live heap a run keeps (its requests and its
// conversation, or the loop's transcript), which each cycle marks, so that
// what a turn pays the collector grows with the conversation even when its
// own work does not. The setup's garbage is collected before the runs
// (settle), which do not pay for it.
func BenchmarkLongRun(b *testing.B) {
	for _, n := range longTurns {
		b.Run(fmt.Sprintf("turns=%d/loop", n), func(b *testing.B) {
			g := startHeap()
			agent := loop.NewAgent(&turnModel{turns: n}, loop.MustToolset(readTool()), &loop.Options{MaxTurns: n + 1})
			msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
			ctx := context.Background()
			g.settle()
			m := startMeter(b)
			var res *loop.Result
			for b.Loop() {
				var err error
				if res, err = agent.Run(ctx, msgs); err != nil {
					b.Fatal(err)
				}
				if got := len(res.Messages); got < 2*n {
					b.Fatalf("%d messages after %d turns", got, n)
				}
			}
			m.report(n, "turn")
			g.report(b, n, "turn")
			runtime.KeepAlive(res)
		})
		b.Run(fmt.Sprintf("turns=%d/openai-encode", n), func(b *testing.B) {
			g := startHeap()
			c := &openai.Client{BaseURL: "http://127.0.0.1:1/v1", Model: "bench-model"}
			tool := readTool()
			reqs := longRequests(n, llm.ToolSpec{Name: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema})
			ctx := context.Background()
			g.settle()
			m := startMeter(b)
			var conv *llm.Conversation
			for b.Loop() {
				conv = new(llm.Conversation) // one per run, owned, as the loop makes
				conv.Own()
				for _, req := range reqs {
					req.Conversation = conv
					_ = c.Stream(ctx, req) // renders the body; not ranged, so not sent
				}
			}
			m.report(n, "turn")
			g.report(b, n, "turn")
			runtime.KeepAlive(conv)
			runtime.KeepAlive(reqs)
		})
		for _, p := range []struct {
			name  string
			model llm.Model
		}{
			{"responses-encode", &responses.Client{BaseURL: "http://127.0.0.1:1/v1", Model: "bench-model"}},
			{"anthropic-encode", &anthropic.Client{BaseURL: "http://127.0.0.1:1", Model: "bench-model"}},
			{"gemini-encode", &gemini.Client{BaseURL: "http://127.0.0.1:1", Model: "bench-model"}},
		} {
			b.Run(fmt.Sprintf("turns=%d/%s", n, p.name), func(b *testing.B) {
				g := startHeap()
				tool := readTool()
				reqs := longRequests(n, llm.ToolSpec{Name: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema})
				ctx := context.Background()
				g.settle()
				m := startMeter(b)
				var conv *llm.Conversation
				for b.Loop() {
					conv = new(llm.Conversation)
					conv.Own()
					for _, req := range reqs {
						req.Conversation = conv
						_ = p.model.Stream(ctx, req) // renders the body; not ranged, so not sent
					}
				}
				m.report(n, "turn")
				g.report(b, n, "turn")
				runtime.KeepAlive(conv)
				runtime.KeepAlive(reqs)
			})
		}
	}
}

// longRequests returns the requests of a run of n turns: each holds the
// conversation up to its turn.
func longRequests(n int, spec llm.ToolSpec) []*llm.Request {
	msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
	reqs := make([]*llm.Request, 0, n)
	for k := 1; k <= n; k++ {
		reqs = append(reqs, &llm.Request{Messages: msgs, Tools: []llm.ToolSpec{spec}})
		id := "call_" + strconv.Itoa(k)
		args := `{"path":"notes/turn-` + strconv.Itoa(k) + `.txt"}`
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall,
				ToolCall: &llm.ToolCall{ID: id, Name: task.ToolName, Arguments: []byte(args)}}}},
			llm.ToolResultMessage(id, task.Read("notes/turn-"+strconv.Itoa(k)+".txt")))
	}
	return reqs
}
