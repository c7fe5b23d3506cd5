package loop

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/llm"
)

// Steps 5 and 6 of a turn (see run.runTurns): what happens to the model's
// message. takeMessage keeps it (its calls made safe to keep); a message
// without calls is the answer, which judgeAnswer checks: it must exist
// when a budget asked for it, match the output schema if there is one
// (output.go), and get past the stop hooks (hooks.go).

// takeMessage appends the assistant message of resp to the transcript (on
// a final turn without its calls, which may not run) and reports the turn's
// end; it reports false when the consumer is gone.
func (r *run) takeMessage(resp *llm.Response, final bool) (llm.Message, bool) {
	msg := resp.Message
	msg.Role = llm.RoleAssistant
	if final {
		msg.Parts = slices.DeleteFunc(slices.Clone(msg.Parts), func(p llm.Part) bool { return p.Kind == llm.PartToolCall })
	}
	r.normalizeCalls(&msg)
	r.transcript = append(r.transcript, msg)
	usage := resp.Usage
	return msg, r.emit(Chunk{Type: ChunkTurnEnd, Usage: &usage, FinishReason: resp.FinishReason, Model: resp.Model, Messages: r.transcript})
}

// judgeAnswer decides what becomes of msg, a message without calls, given
// on a turn that budget made the last (budget is "" on other turns): the
// run completes with it as its answer, goes on for another turn (the model
// was told why), or failed.
func (r *run) judgeAnswer(ctx context.Context, msg llm.Message, budget string) answerVerdict {
	final := budget != ""
	r.result.Answer = msg.Text()
	if final && strings.TrimSpace(r.result.Answer) == "" {
		// The model ignored the request for an answer (it called tools
		// anyway, or said nothing): no success.
		r.fail(fmt.Errorf("%w: %s was reached and the model gave no final answer", ErrNoAnswer, budget))
		return answerFailed
	}
	if v := r.checkOutput(final); v != answerAccepted {
		return v
	}
	if r.stopHooks(ctx, final) {
		return answerAgain
	}
	return answerAccepted
}

// ChunkAnswerRejected says the final answer just streamed does not match
// the run's [OutputSchema] and was sent back to the model: Content is the
// message the model reads, Err the validation error. The message chunks
// of the rejected answer are void, as after a retry; the next turn streams
// a new answer. It is not sent for the last answer a run accepts or fails
// on; the end chunk says how that went.
const ChunkAnswerRejected ChunkType = "answer_rejected"

// answerVerdict says what the loop does with a final answer.
type answerVerdict int

const (
	answerAccepted answerVerdict = iota // the run completes
	answerAgain                         // the model was told why; another turn
	answerFailed                        // the run failed
)

// checkOutput validates the final answer of a run that has an output
// schema (output.go). An invalid answer is sent back with the validation
// error while retries remain, except on a turn a budget forced, which has
// no turn after it; otherwise the run fails with an *OutputError.
func (r *run) checkOutput(final bool) answerVerdict {
	oc := r.agent.output
	if oc == nil {
		return answerAccepted
	}
	r.answersChecked++
	text, err := oc.validate(r.result.Answer)
	if err == nil {
		r.result.Answer = text
		return answerAccepted
	}
	if final || r.answersChecked > r.agent.maxOutputRetries() {
		r.fail(&OutputError{Answer: r.result.Answer, Err: err, Attempts: r.answersChecked})
		return answerFailed
	}
	text = fmt.Sprintf("Your final answer was rejected: %v. Answer again with only a JSON value that matches the %s schema, and no other text.",
		err, oc.format.Name)
	r.transcript = append(r.transcript, llm.UserMessage(text))
	if !r.emit(Chunk{Type: ChunkAnswerRejected, Content: text, Err: err}) {
		return answerFailed // the consumer is gone
	}
	return answerAgain
}

// maxOutputRetries is the number of invalid answers sent back to the model.
func (a *Agent) maxOutputRetries() int {
	switch n := a.opts.MaxOutputRetries; {
	case n < 0:
		return 0
	case n == 0:
		return 2
	default:
		return n
	}
}

// normalizeCalls makes the calls of msg safe to keep: every call gets a
// non-empty ID that no other call of the run's transcript has, so results
// and resumptions can be matched by ID and a late or repeated result can
// never answer the wrong call (some models number their calls from 0 each
// turn); invalid UTF-8 in IDs, names and arguments is replaced, so what
// the run holds is what every JSON encoding of it carries (a stored call
// then matches its result after a round trip). IDs that are already
// unique are kept.
func (r *run) normalizeCalls(msg *llm.Message) {
	cloned := false
	for i, p := range msg.Parts {
		if p.Kind != llm.PartToolCall || p.ToolCall == nil {
			continue
		}
		seen := r.usedCallIDs()
		tc := p.ToolCall
		valid := utf8.ValidString(tc.ID) && utf8.ValidString(tc.Name) && utf8.Valid(tc.Arguments)
		if valid && tc.ID != "" && !seen[tc.ID] {
			seen[tc.ID] = true
			continue
		}
		c := *tc
		c.ID, c.Name = strings.ToValidUTF8(c.ID, "\uFFFD"), strings.ToValidUTF8(c.Name, "\uFFFD")
		c.Arguments = c.Arguments.Sanitize()
		if c.ID == "" || seen[c.ID] {
			c.ID = "call_" + strconv.Itoa(r.turn) + "_" + strconv.Itoa(i)
			for seen[c.ID] {
				c.ID += "_"
			}
		}
		seen[c.ID] = true
		if !cloned {
			msg.Parts, cloned = slices.Clone(msg.Parts), true
		}
		msg.Parts[i].ToolCall = &c
	}
}

// usedCallIDs returns the IDs of the calls in the run's transcript,
// collected at the first call the run makes and kept up to date by
// normalizeCalls: a run without calls never pays for it.
func (r *run) usedCallIDs() map[string]bool {
	if r.transcriptCallIDs == nil {
		r.transcriptCallIDs = make(map[string]bool)
		for _, m := range r.transcript {
			for _, p := range m.Parts {
				if p.Kind == llm.PartToolCall && p.ToolCall != nil {
					r.transcriptCallIDs[p.ToolCall.ID] = true
				}
			}
		}
	}
	return r.transcriptCallIDs
}
