package micro

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// plainChunk has loop.Chunk's fields and tags but not its MarshalJSON
// method (a conversion drops methods), and so not its "error" field.
type plainChunk loop.Chunk

// BenchmarkChunkJSON encodes one run event per op as hrns run --json writes
// it: a json.Encoder with HTML escaping off, writing to a reused buffer.
// "hrns" encodes a loop.Chunk, through its MarshalJSON; "no-wrapper" the
// same fields without that method, which is the cost of the wrapper; and,
// for message chunks, "append" writes the line by hand, a lower bound.
func BenchmarkChunkJSON(b *testing.B) {
	args := json.RawMessage(benchArgs)
	events := []struct {
		name string
		c    loop.Chunk
	}{
		{"message", loop.Chunk{Type: loop.ChunkMessage, Turn: 6, Content: "the notes say "}},
		{"tool_call_delta", loop.Chunk{Type: loop.ChunkToolCallDelta, Turn: 1, Content: `":"n`,
			ToolCall: &loop.ToolCallInfo{ID: "call_1", Name: task.ToolName}}},
		{"tool_call_result", loop.Chunk{Type: loop.ChunkToolCallResult, Turn: 1, Content: task.Read("notes/turn-1.txt"),
			ToolCall: &loop.ToolCallInfo{ID: "call_1", Name: task.ToolName, Arguments: args, Duration: 12 * time.Microsecond}}},
		{"turn_end", loop.Chunk{Type: loop.ChunkTurnEnd, Turn: 1, Usage: &llm.Usage{InputTokens: 412, OutputTokens: 96},
			FinishReason: llm.FinishToolCalls}},
	}
	for _, e := range events {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.Run(e.name+"/hrns", func(b *testing.B) {
			m := startMeter(b)
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(e.c); err != nil {
					b.Fatal(err)
				}
			}
			m.report(1, "event")
		})
		b.Run(e.name+"/no-wrapper", func(b *testing.B) {
			p := plainChunk(e.c)
			m := startMeter(b)
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(&p); err != nil {
					b.Fatal(err)
				}
			}
			m.report(1, "event")
		})
		if e.c.Type != loop.ChunkMessage {
			continue
		}
		b.Run(e.name+"/append", func(b *testing.B) {
			var line []byte
			m := startMeter(b)
			for b.Loop() {
				line = appendMessage(line[:0], &e.c)
			}
			m.report(1, "event")
		})
	}
}

// TestAppendMessage checks that the hand-written encoder of the "append"
// benchmark writes what encoding/json writes with HTML escaping off. (A
// loop.Chunk itself comes out with <, > and & escaped all the same: its
// MarshalJSON calls json.Marshal, which escapes them, and the encoder's
// setting does not reach inside.)
func TestAppendMessage(t *testing.T) {
	for _, s := range []string{"the notes say ", "quote \" backslash \\ tab \t newline \n", "\x00\x1f é <&> \u2028"} {
		c := loop.Chunk{Type: loop.ChunkMessage, Turn: 3, Content: s}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(plainChunk(c)); err != nil {
			t.Fatal(err)
		}
		if got := string(appendMessage(nil, &c)); got != buf.String() {
			t.Errorf("appendMessage(%q) = %s, want %s", s, got, buf.String())
		}
	}
}

// appendMessage appends the JSON line of a message chunk.
func appendMessage(dst []byte, c *loop.Chunk) []byte {
	dst = append(dst, `{"type":"message","turn":`...)
	dst = appendInt(dst, c.Turn)
	dst = append(dst, `,"content":`...)
	dst = appendString(dst, c.Content)
	return append(dst, "}\n"...)
}

func appendInt(dst []byte, n int) []byte {
	if n < 0 {
		dst = append(dst, '-')
		n = -n
	}
	var digits [20]byte
	i := len(digits)
	for {
		i--
		digits[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, digits[i:]...)
}

// appendString appends s as a JSON string the way encoding/json does with
// HTML escaping off.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			if r == utf8.RuneError {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
