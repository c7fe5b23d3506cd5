// Package compact shrinks an agent's transcript so that long runs fit a
// model's context window.
//
// A [Strategy] takes a transcript and a token target and returns a shorter
// transcript. Every strategy keeps what a provider needs for the next
// request to be valid and for the run to go on:
//
//   - the system messages and the first user message (the task);
//   - the latest turns, whole (by default the last two assistant messages
//     with the tool results that answer them, and what follows);
//   - every tool call together with its result: a call and its result are
//     trimmed, summarised or kept together, never split, so each result
//     still answers a call of the message before it;
//   - reasoning (Anthropic's signed thinking blocks) is never edited: it is
//     kept whole with its turn, or goes with it into a summary.
//
// Two strategies are built in: [Trim] replaces old tool results by a stub
// that says which call's result was dropped and how many bytes it had, with
// no model request; [Summarize] asks the model for a summary of the older
// turns (one request, no tools) and replaces them by it. [Default] trims,
// then summarises only if trimming was not enough.
//
// The loop (see loop.Options.Compaction) decides when to compact and
// reports it with a compaction chunk; this package only rewrites
// transcripts. It imports nothing of hrns but llm.
package compact

import (
	"context"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// A Strategy shrinks a transcript toward req.Target tokens (as [Estimate]
// counts them). It must not modify req.Messages or anything they point to,
// and must keep the invariants listed in the package documentation. It may
// return a transcript still above the target when it cannot do more; it
// returns an error only when it could not run (a failed model request), and
// then the transcript is left as it was. Implementations are safe for
// concurrent use.
type Strategy interface {
	Compact(ctx context.Context, req *Request) (*Result, error)
}

// A Request is a transcript to compact.
type Request struct {
	// Messages is the transcript, as the loop sends it to the model.
	Messages []llm.Message
	// Target is the token estimate to reach.
	Target int
	// KeepTurns is how many of the latest assistant messages are kept
	// whole, with their tool results and everything after them; 0 means
	// 2. The last assistant message is always kept.
	KeepTurns int
	// Model and ModelName serve strategies that ask the model (see
	// [Summarize]); the loop sets them to the agent's.
	Model     llm.Model
	ModelName string
	// Window is the model's context window in tokens, 0 if unknown;
	// strategies that send requests keep them well within it.
	Window int
}

// A Result is a compacted transcript and what was done to it.
type Result struct {
	Messages []llm.Message
	// Strategy names what was done: "trim", "summarize", or both joined
	// by "+"; empty when nothing was.
	Strategy string
	// Trimmed counts the tool results replaced by a stub.
	Trimmed int
	// Summarized counts the messages replaced by a summary.
	Summarized int
	// Usage counts the tokens of the model requests made, if any.
	Usage llm.Usage
}

// Default returns the loop's default strategy: [Trim], then [Summarize] if
// the transcript is still above the target.
func Default() Strategy { return Chain(Trim{}, Summarize{}) }

// Chain returns a strategy that runs each of strategies in turn, on the
// transcript the previous one returned, until the target is reached. A
// stage that fails ends the chain: the work of the stages before it is
// returned, or the error if they did nothing, so that a failed summary
// does not undo a trim that needed no model.
func Chain(strategies ...Strategy) Strategy { return chain(strategies) }

type chain []Strategy

func (c chain) Compact(ctx context.Context, req *Request) (*Result, error) {
	out := &Result{Messages: req.Messages}
	var names []string
	for _, s := range c {
		if Estimate(out.Messages) <= req.Target {
			break
		}
		r := *req
		r.Messages = out.Messages
		res, err := s.Compact(ctx, &r)
		if err != nil {
			if len(names) > 0 {
				break
			}
			return nil, err
		}
		if res.Strategy != "" {
			names = append(names, res.Strategy)
		}
		out.Messages = res.Messages
		out.Trimmed += res.Trimmed
		out.Summarized += res.Summarized
		out.Usage.Add(res.Usage)
	}
	out.Strategy = strings.Join(names, "+")
	return out, nil
}

// Estimate returns an estimate of the tokens msgs take in a request: about
// four bytes of text, arguments, IDs and reasoning per token, plus a small
// overhead per message and part, and a flat 1,600 tokens per image. It is
// meant to be pessimistic for prose and code, and is what strategies count
// against their target; the loop prefers the provider's reported usage
// where it has one.
func Estimate(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += 4 * 4
		for _, p := range m.Parts {
			n += partBytes(p)
		}
	}
	return (n + 3) / 4
}

// imageTokens is what an image is counted as: about a megapixel image on
// Anthropic's scale, more than a low-detail image on OpenAI's.
const imageTokens = 1600

func partBytes(p llm.Part) int {
	n := 4 * 2
	switch p.Kind {
	case llm.PartText:
		n += len(p.Text)
	case llm.PartImage:
		n += 4 * imageTokens
	case llm.PartDocument:
		if p.Media != nil {
			n += len(p.Media.Data) + len(p.Media.URL)
		}
	case llm.PartToolCall:
		if c := p.ToolCall; c != nil {
			n += len(c.ID) + len(c.Name) + len(c.Arguments) + len(c.Signature)
		}
	case llm.PartToolResult:
		if r := p.ToolResult; r != nil {
			n += len(r.CallID) + len(r.Name)
			for _, c := range r.Content {
				n += partBytes(c)
			}
		}
	case llm.PartReasoning:
		if r := p.Reasoning; r != nil {
			n += len(r.Text) + len(r.Signature) + len(r.Redacted)
		}
	}
	return n
}

// layout is where a transcript may be compacted: messages [head, tail) are
// old turns, split into spans that are compacted together.
type layout struct {
	head, tail int
	spans      []span
}

// A span is one message, or an assistant message that made tool calls
// together with the tool messages right after it (its results).
type span struct{ start, end int }

// plan finds the head (the leading system messages and the first user
// message), the tail (the last keep assistant messages and what follows)
// and the spans in between.
func plan(msgs []llm.Message, keep int) layout {
	if keep <= 0 {
		keep = 2
	}
	head := 0
	for head < len(msgs) && msgs[head].Role == llm.RoleSystem {
		head++
	}
	if head < len(msgs) && msgs[head].Role == llm.RoleUser {
		head++
	}
	var spans []span
	for i := head; i < len(msgs); {
		j := i + 1
		if msgs[i].Role == llm.RoleAssistant {
			for j < len(msgs) && msgs[j].Role == llm.RoleTool {
				j++
			}
		}
		spans = append(spans, span{i, j})
		i = j
	}
	// The tail starts at the keep-th assistant span from the end.
	tail, n := len(msgs), 0
	for k := len(spans) - 1; k >= 0 && n < keep; k-- {
		if msgs[spans[k].start].Role == llm.RoleAssistant {
			n++
			tail = spans[k].start
		}
	}
	if n < keep {
		// Too few turns to compact any.
		tail = head
	}
	l := layout{head: head, tail: tail}
	for _, s := range spans {
		if s.end <= tail {
			l.spans = append(l.spans, s)
		}
	}
	return l
}

// callNames maps the call IDs of msgs to their tools' names.
func callNames(msgs []llm.Message) map[string]string {
	names := make(map[string]string)
	for _, m := range msgs {
		for _, c := range m.ToolCalls() {
			names[c.ID] = c.Name
		}
	}
	return names
}
