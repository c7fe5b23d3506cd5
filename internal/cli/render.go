package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hrns-dev/hrns/loop"
)

// A renderer shows a run's chunks.
type renderer interface {
	chunk(loop.Chunk)
	close() error
}

// jsonRenderer prints one JSON object per chunk, the loop's vocabulary.
type jsonRenderer struct {
	w   *bufio.Writer
	enc *json.Encoder
	err error
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
	}
	r.err = r.enc.Encode(c)
	if r.err == nil {
		// Each line is flushed so a reader sees events as they happen.
		r.err = r.w.Flush()
	}
}

func (r *jsonRenderer) close() error { return r.err }

// textRenderer streams the answer to out and narrates the rest on log.
type textRenderer struct {
	out, log  io.Writer
	atLineEnd bool // out's last byte was a newline (or nothing written)
	wrote     bool
	thinking  bool
}

func newTextRenderer(out, log io.Writer) *textRenderer {
	return &textRenderer{out: out, log: log, atLineEnd: true}
}

func (r *textRenderer) chunk(c loop.Chunk) {
	switch c.Type {
	case loop.ChunkMessage:
		r.endThinking()
		io.WriteString(r.out, c.Content)
		r.wrote = true
		r.atLineEnd = strings.HasSuffix(c.Content, "\n")
	case loop.ChunkReasoning:
		if !r.thinking {
			io.WriteString(r.log, "thinking: ")
			r.thinking = true
		}
		io.WriteString(r.log, c.Content)
	case loop.ChunkTurnEnd:
		r.endThinking()
	case loop.ChunkRetry:
		r.endThinking()
		fmt.Fprintf(r.log, "retrying in %v (attempt %d failed: %v)\n", c.Retry.Delay.Round(1e6), c.Retry.Attempt, c.Err)
	case loop.ChunkToolCallStart:
		r.newline()
		fmt.Fprintf(r.log, "→ %s %s\n", c.ToolCall.Name, clip(string(c.ToolCall.Arguments), 200))
	case loop.ChunkToolCallResult:
		fmt.Fprintf(r.log, "  ✓ %s\n", summary(c.Content))
	case loop.ChunkToolCallError:
		r.newline()
		name := ""
		if c.ToolCall != nil {
			name = c.ToolCall.Name + ": "
		}
		fmt.Fprintf(r.log, "  ✗ %s%s\n", name, clip(c.Content, 300))
	case loop.ChunkToolCallPending:
		fmt.Fprintf(r.log, "  … %s waits\n", c.ToolCall.Name)
	case loop.ChunkEnd:
		r.endThinking()
		r.newline()
		res := c.Result
		if res.Budget != "" {
			fmt.Fprintf(r.log, "(the %s budget was spent: the answer was asked for early)\n", res.Budget)
		}
		if res.Err == nil {
			fmt.Fprintf(r.log, "— %s in %d turns, %d input + %d output tokens\n", res.Status, len(res.Turns), res.Usage.InputTokens, res.Usage.OutputTokens)
		}
	}
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

func (r *textRenderer) close() error { return nil }

// summary describes a tool result in one line.
func summary(s string) string {
	lines := strings.Count(s, "\n") + 1
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if lines > 1 {
		return fmt.Sprintf("%s (%d lines)", clip(first, 100), lines)
	}
	return clip(first, 160)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
