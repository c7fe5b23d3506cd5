// Package llmtest provides a scripted [llm.Model] for tests.
//
// A [Model] answers each request with the next [Reply] of its script and
// records every request it receives, so a test can both drive an agent and
// check what the agent sent:
//
//	model := llmtest.NewModel(
//		llmtest.Call("c1", "lookup", `{"id":"42"}`),
//		llmtest.Text("Project 42 is hrns."),
//	)
//	agent := loop.New(model, tools)
//	...
//	reqs := model.Requests()
//
// Replies stream like a real provider's: text and reasoning in several
// deltas, tool-call arguments in fragments, then one done chunk.
package llmtest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// ErrScriptDone is returned by a [Model] asked for more replies than its
// script holds.
var ErrScriptDone = errors.New("llmtest: no more scripted replies")

// A Reply is one scripted answer.
type Reply struct {
	// Reasoning and Text are streamed as deltas, in that order.
	Reasoning string
	Text      string
	// ToolCalls are streamed after the text, arguments in fragments.
	ToolCalls []llm.ToolCall
	// Usage is reported in the response. If zero, a small usage is made
	// up from the lengths of the request and reply.
	Usage llm.Usage
	// Finish overrides the finish reason (default: tool_calls when there
	// are calls, else stop).
	Finish llm.FinishReason
	// Err, when set, is returned after FailAfter chunks instead of
	// completing the reply.
	Err       error
	FailAfter int
	// Block makes the reply wait until the request's context is done and
	// then fail with its error, like a model that never answers.
	Block bool
	// Func, when set, computes the reply from the request; the other
	// fields are ignored.
	Func func(req *llm.Request) Reply
}

// Text returns a reply that answers with text.
func Text(text string) Reply { return Reply{Text: text} }

// Call returns a reply that makes one tool call.
func Call(id, name, args string) Reply {
	return Reply{ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: llm.Arguments(args)}}}
}

// Calls returns a reply that makes several tool calls in one message.
func Calls(calls ...llm.ToolCall) Reply { return Reply{ToolCalls: calls} }

// Fail returns a reply that fails with err before streaming anything.
func Fail(err error) Reply { return Reply{Err: err} }

// A Model is a scripted [llm.Model]. It is safe for concurrent use.
type Model struct {
	mu       sync.Mutex
	script   []Reply
	requests []*llm.Request
}

var _ llm.Model = (*Model)(nil)

// NewModel returns a model that answers with replies, in order.
func NewModel(replies ...Reply) *Model {
	return &Model{script: replies}
}

// Push appends replies to the script.
func (m *Model) Push(replies ...Reply) {
	m.mu.Lock()
	m.script = append(m.script, replies...)
	m.mu.Unlock()
}

// Requests returns deep copies of the requests received so far.
func (m *Model) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.requests...)
}

// Remaining returns how many scripted replies are left.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script)
}

// Stream implements [llm.Model].
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		m.mu.Lock()
		m.requests = append(m.requests, cloneRequest(req))
		if len(m.script) == 0 {
			m.mu.Unlock()
			yield(llm.Chunk{}, ErrScriptDone)
			return
		}
		r := m.script[0]
		m.script = m.script[1:]
		m.mu.Unlock()
		if r.Func != nil {
			r = r.Func(req)
		}
		if err := ctx.Err(); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		if r.Block {
			<-ctx.Done()
			yield(llm.Chunk{}, ctx.Err())
			return
		}
		sent, failed := 0, false
		emit := func(c llm.Chunk) bool {
			if r.Err != nil && sent == r.FailAfter {
				failed = true
				return false
			}
			if err := ctx.Err(); err != nil {
				yield(llm.Chunk{}, err)
				return false
			}
			sent++
			return yield(c, nil)
		}
		if streamReply(r, req, emit) && r.Err != nil || failed {
			yield(llm.Chunk{}, r.Err)
		}
	}
}

// streamReply emits the chunks of r and its final response; it reports
// false when emit stopped it.
func streamReply(r Reply, req *llm.Request, emit func(llm.Chunk) bool) bool {
	resp := &llm.Response{ID: "resp", Model: req.Model, Usage: r.Usage, Message: llm.Message{Role: llm.RoleAssistant}}
	if r.Reasoning != "" {
		for _, d := range split(r.Reasoning) {
			if !emit(llm.Chunk{Kind: llm.ChunkReasoning, Text: d}) {
				return false
			}
		}
		resp.Message.Parts = append(resp.Message.Parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: r.Reasoning}})
	}
	if r.Text != "" {
		for _, d := range split(r.Text) {
			if !emit(llm.Chunk{Kind: llm.ChunkText, Text: d}) {
				return false
			}
		}
		resp.Message.Parts = append(resp.Message.Parts, llm.TextPart(r.Text))
	}
	for i, c := range r.ToolCalls {
		if !emit(llm.Chunk{Kind: llm.ChunkToolCallStart, Index: i, ID: c.ID, Name: c.Name}) {
			return false
		}
		for _, d := range split(string(c.Arguments)) {
			if !emit(llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: i, Text: d}) {
				return false
			}
		}
		call := c
		resp.Message.Parts = append(resp.Message.Parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &call})
	}
	if r.Err != nil {
		return true // the error follows the partial stream
	}
	resp.FinishReason = r.Finish
	if resp.FinishReason == "" {
		resp.FinishReason = llm.FinishStop
		if len(r.ToolCalls) > 0 {
			resp.FinishReason = llm.FinishToolCalls
		}
	}
	if resp.Usage == (llm.Usage{}) {
		in := 0
		for _, m := range req.Messages {
			in += len(m.Text())
		}
		resp.Usage = llm.Usage{InputTokens: int64(in/4 + 10), OutputTokens: int64(len(r.Text)/4 + len(r.ToolCalls)*10 + 1)}
	}
	return emit(llm.Chunk{Kind: llm.ChunkDone, Response: resp})
}

// split cuts s into deltas of at most 8 bytes, as providers do with tokens
// (byte-wise: a delta may end inside a UTF-8 sequence only if s does).
func split(s string) []string {
	var out []string
	for len(s) > 8 {
		n := 8
		for n > 1 && !utf8Start(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func cloneRequest(req *llm.Request) *llm.Request {
	c := *req
	c.Messages = make([]llm.Message, len(req.Messages))
	for i, m := range req.Messages {
		c.Messages[i] = llm.Message{Role: m.Role, Parts: append([]llm.Part(nil), m.Parts...)}
	}
	c.Tools = append([]llm.ToolSpec(nil), req.Tools...)
	c.StopSequences = append([]string(nil), req.StopSequences...)
	return &c
}

// String describes a reply, for test failure messages.
func (r Reply) String() string {
	return fmt.Sprintf("Reply{text %q, %d calls, err %v}", r.Text, len(r.ToolCalls), r.Err)
}
