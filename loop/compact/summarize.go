package compact

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// Summarize replaces the older turns of a transcript (between the first
// user message and the latest turns, see [Request.KeepTurns]) by a summary
// the model writes: one model request, without tools, whose system prompt
// is Prompt and whose user message is the old turns written out as text
// (long tool results and arguments elided). The summary comes back as one
// user message in their place. System messages among the old turns are
// kept, before the summary. Tool calls go into the summary together with
// their results, and signed reasoning with its turn, so what remains is
// valid for every provider.
type Summarize struct {
	// Prompt is the system prompt of the summary request; empty means a
	// built-in one.
	Prompt string
	// MaxTokens caps the summary; 0 leaves it to the provider, whose
	// default leaves room for a thinking budget (Anthropic refuses a cap
	// below the client's thinking budget).
	MaxTokens int
	// MaxInputBytes bounds the text of the old turns sent to be
	// summarised; a longer one keeps its head and tail. 0 means 256 KiB,
	// or half the request's Window (at four bytes a token) if that is
	// less.
	MaxInputBytes int
}

var _ Strategy = Summarize{}

// DefaultSummaryPrompt is the system prompt of [Summarize] when its Prompt
// is empty.
const DefaultSummaryPrompt = "You compact the transcript of an AI agent's work so that it can go on within its context window. " +
	"Summarise the transcript you are given: the facts found, the decisions made and why, what was done with which tools " +
	"and what it gave, files and identifiers that matter, and what remains to do. Be complete and specific, but short; " +
	"write in plain prose or bullet points, and do not call tools."

// SummaryHeader starts the user message holding a summary.
const SummaryHeader = "[compacted: a summary of earlier turns of this conversation, which were removed to save context]\n\n"

// ErrNoModel is returned by [Summarize] when the request has no model.
var ErrNoModel = errors.New("compact: summarize needs a model")

// Compact implements [Strategy].
func (s Summarize) Compact(ctx context.Context, req *Request) (*Result, error) {
	msgs := req.Messages
	l := plan(msgs, req.KeepTurns)
	old := msgs[l.head:l.tail]
	if !slices.ContainsFunc(old, func(m llm.Message) bool { return m.Role == llm.RoleAssistant }) {
		// No turn to summarise: at most an earlier summary, which
		// would only be summarised again.
		return &Result{Messages: msgs}, nil
	}
	if req.Model == nil {
		return nil, ErrNoModel
	}
	prompt, maxTokens, maxIn := s.Prompt, s.MaxTokens, s.MaxInputBytes
	if prompt == "" {
		prompt = DefaultSummaryPrompt
	}
	if maxIn <= 0 {
		maxIn = 256 << 10
		if req.Window > 0 {
			maxIn = min(maxIn, req.Window*4/2)
		}
	}
	text := elide(render(old), maxIn)
	resp, err := llm.Collect(req.Model.Stream(ctx, &llm.Request{
		Model:     req.ModelName,
		Messages:  []llm.Message{llm.SystemMessage(prompt), llm.UserMessage(text)},
		MaxTokens: maxTokens,
	}))
	if err != nil {
		return nil, fmt.Errorf("compact: summary request: %w", err)
	}
	summary := strings.TrimSpace(resp.Message.Text())
	if summary == "" {
		return nil, errors.New("compact: the model wrote an empty summary")
	}
	out := make([]llm.Message, 0, l.head+1+len(msgs)-l.tail)
	out = append(out, msgs[:l.head]...)
	for _, m := range old {
		if m.Role == llm.RoleSystem {
			out = append(out, m)
		}
	}
	out = append(out, llm.UserMessage(SummaryHeader+summary))
	out = append(out, msgs[l.tail:]...)
	if Estimate(out) >= Estimate(msgs) {
		// The summary is no shorter than what it summarises: keep the
		// turns (the request was paid for all the same).
		return &Result{Messages: msgs, Usage: resp.Usage}, nil
	}
	return &Result{Messages: out, Strategy: "summarize", Summarized: len(old), Usage: resp.Usage}, nil
}

// render writes messages out as text for the summary request.
func render(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartText:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, p.Text)
			case llm.PartImage, llm.PartDocument:
				fmt.Fprintf(&b, "[%s] (%s attached)\n", m.Role, p.Kind)
			case llm.PartReasoning:
				if p.Reasoning != nil && p.Reasoning.Text != "" {
					fmt.Fprintf(&b, "[%s thinking] %s\n", m.Role, elide(p.Reasoning.Text, 2000))
				}
			case llm.PartToolCall:
				if c := p.ToolCall; c != nil {
					fmt.Fprintf(&b, "[%s calls %s, call %s] %s\n", m.Role, c.Name, c.ID, elide(string(c.Arguments), 2000))
				}
			case llm.PartToolResult:
				if r := p.ToolResult; r != nil {
					status := "result"
					if r.IsError {
						status = "error"
					}
					fmt.Fprintf(&b, "[tool %s of call %s] %s\n", status, r.CallID, elide(r.Text(), 4000))
				}
			}
		}
	}
	return b.String()
}

// elide keeps the head and tail of s within about max bytes, on UTF-8
// boundaries, saying how much was left out.
func elide(s string, max int) string {
	if len(s) <= max {
		return s
	}
	h := max / 2
	for h > 0 && !utf8Start(s[h]) {
		h--
	}
	t := len(s) - max/2
	for t < len(s) && !utf8Start(s[t]) {
		t++
	}
	return s[:h] + fmt.Sprintf("\n[... %d bytes elided ...]\n", t-h) + s[t:]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
