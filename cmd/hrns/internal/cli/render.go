package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/callview"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/tools"
)

// A renderer shows a run's chunks.
type renderer interface {
	chunk(loop.Chunk)
	close() error
}

// jsonRenderer prints one JSON object per chunk, the loop's vocabulary.
// The end line also carries, like claude -p --output-format json,
// "session_id" (the saved conversation's ID, for hrns run --resume and
// hrns chat --resume; absent when it was not saved) and "total_cost_usd"
// (the run's usage at the price table; null when the model's price is
// unknown).
type jsonRenderer struct {
	w   *bufio.Writer
	enc *json.Encoder
	err error

	// sessionID returns the saved conversation's ID, or "".
	sessionID func() string
	// cost prices the run's usage; nil or false means unknown.
	cost func(llm.Usage) (float64, bool)
}

func newJSONRenderer(w io.Writer) *jsonRenderer {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonRenderer{w: bw, enc: enc}
}

func (r *jsonRenderer) chunk(c loop.Chunk) {
	if r.err != nil {
		return
	}
	if c.Type == loop.ChunkEnd && c.Result != nil {
		// The transcript is the input plus what the events already
		// said; keep the last line small.
		res := *c.Result
		res.Messages = nil
		c.Result = &res
		r.err = r.end(c)
		if r.err == nil {
			r.err = r.w.Flush()
		}
		return
	}
	r.err = r.enc.Encode(c)
	if r.err == nil {
		// Each line is flushed so a reader sees events as they happen.
		r.err = r.w.Flush()
	}
}

// end writes the end line with the conversation's ID and the cost.
func (r *jsonRenderer) end(c loop.Chunk) error {
	b, err := json.Marshal(c)
	if err != nil || len(b) < 2 || b[len(b)-1] != '}' {
		return r.enc.Encode(c)
	}
	extra := struct {
		SessionID string   `json:"session_id,omitempty"`
		Cost      *float64 `json:"total_cost_usd"`
	}{}
	if r.sessionID != nil {
		extra.SessionID = r.sessionID()
	}
	if r.cost != nil {
		if v, ok := r.cost(c.Result.Usage); ok {
			extra.Cost = &v
		}
	}
	e, err := json.Marshal(extra)
	if err != nil {
		return err
	}
	r.w.Write(b[:len(b)-1])
	r.w.WriteByte(',')
	r.w.Write(e[1:])
	return r.w.WriteByte('\n')
}

func (r *jsonRenderer) close() error { return r.err }

// textRenderer writes the answer to out and narrates the rest on log.
//
// The answer appears exactly once on out. A request that fails after part
// of its answer was streamed is retried, and the new attempt streams the
// answer from its start. When out is not a terminal (a file, a pipe), the
// text of each attempt is therefore held until the model's response is
// complete and written once, so that "hrns run ... > answer.md" keeps the
// answer alone. On a terminal the text streams as it comes (escaped with
// [safetext.EscapeText], since a model's text could otherwise drive the
// terminal); on a retry the cut-off text stays on the screen, its line is
// ended, and log says the answer starts again.
//
// Everything narrated on log (reasoning, tool names, arguments, results,
// errors) is escaped the same way.
//
// While the approver asks the person a question ([textRenderer.hold]),
// nothing is drawn: the progress line is erased and stopped, and chunks
// are kept and shown once the answer is read.
type textRenderer struct {
	// mu orders chunk, hold and close, which run on the run's goroutine
	// and the approver's.
	mu       sync.Mutex
	held     int          // questions on the screen
	queued   []loop.Chunk // chunks that came while one was
	out, log io.Writer
	stream   bool            // out is a terminal: write the answer as it comes
	attempt  strings.Builder // the current attempt's text, when not streaming
	streamed bool            // text of the current attempt was streamed

	atLineEnd bool // out's last byte was a newline (or nothing written)
	wrote     bool
	thinking  bool

	// started are the calls started and not yet reported, in call order;
	// finished holds the results of those that ended before an earlier
	// one, so that the result lines of parallel calls keep the order of
	// the calls.
	started  []string
	finished map[string]loop.Chunk
	// lastRetry is the error of the last retry, said once.
	lastRetry string

	// model and prices price the run's usage on the last line; nil
	// prices say nothing of cost.
	model  string
	prices pricing.Table
	// prog, when set, shows what the run waits for (progress.go).
	prog *progress
	now  func() time.Time
}

func newTextRenderer(out, log io.Writer, stream bool) *textRenderer {
	return &textRenderer{out: out, log: log, stream: stream, atLineEnd: true}
}

func (r *textRenderer) chunk(c loop.Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held > 0 {
		r.queued = append(r.queued, c)
		return
	}
	r.render(c)
}

// hold stops all drawing while a question is on the screen: it erases the
// progress line and keeps it from being drawn, and keeps the chunks that
// come until release, which shows them. The caller writes the question
// after hold returns and calls release once the answer is read; release
// may be called more than once.
func (r *textRenderer) hold() (release func()) {
	r.mu.Lock()
	r.held++
	if r.prog != nil {
		r.prog.mu.Lock()
		r.prog.clear()
		r.prog.paused++
		r.prog.mu.Unlock()
	}
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.held == 0 {
				return // close let go of it already
			}
			r.held--
			if r.prog != nil {
				r.prog.mu.Lock()
				r.prog.paused--
				r.prog.mu.Unlock()
			}
			r.flushQueued()
		})
	}
}

// flushQueued shows the chunks kept while a question was on the screen,
// once none is; the caller holds mu.
func (r *textRenderer) flushQueued() {
	if r.held > 0 {
		return
	}
	q := r.queued
	r.queued = nil
	for _, c := range q {
		r.render(c)
	}
}

// render shows c; the caller holds mu.
func (r *textRenderer) render(c loop.Chunk) {
	if r.prog != nil {
		r.prog.mu.Lock()
		defer r.prog.mu.Unlock()
		r.prog.clear()
		r.prog.set(waitingFor(c, r.prog.what), r.clock())
	}
	if c.Agent != "" {
		r.renderSub(c)
		return
	}
	switch c.Type {
	case loop.ChunkTurnStart:
		r.flushFinished()
		r.attempt.Reset()
		r.streamed = false
	case loop.ChunkMessage:
		r.endThinking()
		if r.stream {
			r.write(safetext.EscapeText(c.Content))
			r.streamed = r.streamed || c.Content != ""
		} else {
			r.attempt.WriteString(c.Content)
		}
	case loop.ChunkReasoning:
		if !r.thinking {
			io.WriteString(r.log, "thinking: ")
			r.thinking = true
		}
		io.WriteString(r.log, safetext.EscapeText(c.Content))
	case loop.ChunkTurnEnd:
		r.endThinking()
		r.flushAttempt()
		r.lastRetry = ""
	case loop.ChunkRetry:
		r.endThinking()
		if r.streamed {
			r.newline()
			io.WriteString(r.log, "(the answer above was cut off by a failed request: it starts again below)\n")
		}
		r.attempt.Reset()
		r.streamed = false
		msg := fmt.Sprint(c.Err)
		fmt.Fprintln(r.log, clip(callview.RetryLine(c.Retry.Delay.Round(1e6).String(), c.Retry.Attempt, msg, r.lastRetry), 600))
		r.lastRetry = msg
	case loop.ChunkCompaction:
		if c.Compaction != nil && c.Depth == 0 {
			r.newline()
			fmt.Fprintln(r.log, compactionLine(c.Compaction))
		}
	case loop.ChunkAnswerRejected:
		r.newline()
		fmt.Fprintf(r.log, "(the answer above does not match the output schema: %s; the model is asked again)\n", clip(safetext.EscapeText(fmt.Sprint(c.Err)), 500))
	case loop.ChunkToolCallStart:
		r.newline()
		fmt.Fprintf(r.log, "→ %s %s\n", safetext.Escape(c.ToolCall.Name), clip(string(c.ToolCall.Arguments), 200))
		r.started = append(r.started, c.ToolCall.ID)
	case loop.ChunkToolCallResult, loop.ChunkToolCallError:
		r.finish(c)
	case loop.ChunkToolCallPending:
		fmt.Fprintf(r.log, "  … %s waits\n", safetext.Escape(c.ToolCall.Name))
	case loop.ChunkHook:
		r.newline()
		line := fmt.Sprintf("  ⚑ %s hook %s: %s", c.Hook.Event, clip(c.Hook.Name, 60), c.Hook.Decision)
		if c.Content != "" {
			line += ": " + clip(c.Content, 300)
		}
		fmt.Fprintln(r.log, line)
	case loop.ChunkEnd:
		r.flushFinished()
		r.endThinking()
		res := c.Result
		if r.attempt.Len() > 0 {
			if res.Err == nil {
				r.flushAttempt()
			} else {
				// The stream failed and was not retried: its text
				// is not an answer.
				r.attempt.Reset()
				io.WriteString(r.log, "(the unfinished answer of the failed request is not written to stdout)\n")
			}
		}
		r.newline()
		if res.Budget != "" {
			fmt.Fprintf(r.log, "(the %s budget was spent: the answer was asked for early)\n", res.Budget)
		}
		if res.Err == nil {
			fmt.Fprintf(r.log, "— %s in %s, %s\n", res.Status, plural(len(res.Turns), "turn"), r.usageLine(res.Usage))
		}
	}
}

// finish reports a call's result in call order: at once when no call
// started before it is still running, else once they are reported. The
// call is named: results of parallel calls come after all their starts.
// The caller holds mu.
func (r *textRenderer) finish(c loop.Chunk) {
	id := ""
	if c.ToolCall != nil {
		id = c.ToolCall.ID
	}
	i := slices.Index(r.started, id)
	if i < 0 || id == "" {
		r.result(c) // refused before it started
		return
	}
	if i > 0 {
		if r.finished == nil {
			r.finished = map[string]loop.Chunk{}
		}
		r.finished[id] = c
		return
	}
	r.started = r.started[1:]
	r.result(c)
	for len(r.started) > 0 {
		next, ok := r.finished[r.started[0]]
		if !ok {
			return
		}
		delete(r.finished, r.started[0])
		r.started = r.started[1:]
		r.result(next)
	}
}

// result writes a call's result line.
func (r *textRenderer) result(c loop.Chunk) {
	if c.Type == loop.ChunkToolCallError {
		r.newline()
		fmt.Fprintf(r.log, "  ✗ %s: %s\n", callLabel(c.ToolCall), clip(c.Content, 300))
		return
	}
	fmt.Fprintf(r.log, "  ✓ %s: %s\n", callLabel(c.ToolCall), summary(c.Content))
	if plan, ok := tools.PlanOf(c); ok {
		writePlan(r.log, plan)
	}
}

// flushFinished reports the results kept back, in call order, when the
// calls before them will never be reported (the turn or run ended).
func (r *textRenderer) flushFinished() {
	for _, id := range r.started {
		if c, ok := r.finished[id]; ok {
			r.result(c)
		}
	}
	r.started, r.finished = nil, nil
}

// renderSub shows a chunk of a sub-agent (the task tool's): its calls,
// one line each, indented under the call that runs it and named by the
// agent; its text, thinking and turns stay folded (its answer is the
// call's result). The caller holds mu.
func (r *textRenderer) renderSub(c loop.Chunk) {
	indent := strings.Repeat("  ", max(1, c.Depth))
	who := safetext.Escape(c.Agent) + " › "
	switch c.Type {
	case loop.ChunkToolCallStart:
		r.newline()
		fmt.Fprintf(r.log, "%s↳ %s%s\n", indent, who, callLabel(c.ToolCall))
	case loop.ChunkToolCallError:
		r.newline()
		fmt.Fprintf(r.log, "%s  ✗ %s%s: %s\n", indent, who, callLabel(c.ToolCall), clip(c.Content, 200))
	case loop.ChunkToolCallPending:
		fmt.Fprintf(r.log, "%s  … %s%s waits\n", indent, who, safetext.Escape(c.ToolCall.Name))
	}
}

// writePlan shows the agent's plan, as todo_write recorded it, as a
// checklist: ✓ done, ▶ in progress, ☐ to do ([callview.Plan]). Each step
// is the model's text, escaped.
func writePlan(w io.Writer, plan *tools.TodoList) {
	lines := callview.Plan(plan)
	if len(lines) == 0 {
		io.WriteString(w, "  plan: (cleared)\n")
		return
	}
	io.WriteString(w, "  plan:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

// flushAttempt writes the held text of a completed response.
func (r *textRenderer) flushAttempt() {
	if r.attempt.Len() > 0 {
		r.write(r.attempt.String())
		r.attempt.Reset()
	}
}

// write writes answer text to out.
func (r *textRenderer) write(s string) {
	if s == "" {
		return
	}
	io.WriteString(r.out, s)
	r.wrote = true
	r.atLineEnd = strings.HasSuffix(s, "\n")
}

func (r *textRenderer) endThinking() {
	if r.thinking {
		io.WriteString(r.log, "\n")
		r.thinking = false
	}
}

// newline ends the answer's current line before narration interrupts it.
func (r *textRenderer) newline() {
	if r.wrote && !r.atLineEnd {
		io.WriteString(r.out, "\n")
		r.atLineEnd = true
	}
}

func (r *textRenderer) close() error {
	if r.prog != nil {
		r.prog.close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A question left unanswered (the run ended under it) keeps nothing
	// back.
	r.held = 0
	if r.prog != nil {
		r.prog.mu.Lock()
		r.prog.paused = 0
		r.prog.mu.Unlock()
	}
	r.flushQueued()
	return nil
}

func (r *textRenderer) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// waitingFor says what the run waits for after c: the model after a turn
// starts or a call ends, a tool while it runs; nothing while text streams
// or an approval is asked (the approver writes then).
func waitingFor(c loop.Chunk, was string) string {
	switch c.Type {
	case loop.ChunkTurnStart, loop.ChunkToolCallResult, loop.ChunkToolCallError, loop.ChunkRetry:
		if c.Type != loop.ChunkTurnStart && c.Agent == "" && strings.HasPrefix(was, "running") {
			return "waiting for the other calls or the model"
		}
		return "waiting for the model"
	case loop.ChunkToolCallStart:
		return "running " + safetext.Escape(c.ToolCall.Name)
	case loop.ChunkTurnEnd:
		return "waiting for the tools"
	case loop.ChunkMessage, loop.ChunkReasoning, loop.ChunkToolCallDelta:
		if c.Content == "" {
			return was
		}
		return ""
	}
	return ""
}

// summary describes a tool result in one line: itself when it is one
// short line, else its size (a first line alone can mislead: read_file's
// "1	module ..." is a line number and a tab).
func summary(s string) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Count(s, "\n") + 1
	switch {
	case strings.TrimSpace(s) == "":
		return "(no output)"
	case lines > 1:
		return plural(lines, "line")
	case len(s) > 160:
		return plural(len(s), "byte") + ": " + clip(s, 100)
	}
	return clip(s, 160)
}

// callLabel names a call for a person: the tool and the argument that says
// what it does (the path, the command, the URL...).
func callLabel(c *loop.ToolCallInfo) string {
	if c == nil {
		return "(unknown call)"
	}
	label := safetext.Escape(c.Name)
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) == nil {
		for _, k := range []string{"path", "command", "url", "pattern", "query", "name", "skill", "description", "task"} {
			if v, ok := args[k].(string); ok && v != "" {
				return label + " " + clip(v, 60)
			}
		}
	}
	return label
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// usageLine says the tokens of a run, the cached ones among them, and its
// cost when the model's price is known.
func (r *textRenderer) usageLine(u llm.Usage) string {
	s := fmt.Sprintf("%d input", u.InputTokens)
	if u.CacheReadTokens > 0 {
		s += fmt.Sprintf(" (%d cached)", u.CacheReadTokens)
	}
	s += fmt.Sprintf(" + %d output tokens", u.OutputTokens)
	if r.prices != nil {
		if p, ok := r.prices.Lookup(r.model); ok {
			s += ", " + pricing.Format(p.Cost(pricing.Usage(u)).Total)
		} else {
			s += ", unknown price"
		}
	}
	return s
}

// clip shows s on one line, escaped, cut to about n bytes of s.
func clip(s string, n int) string { return callview.OneLine(s, n) }
