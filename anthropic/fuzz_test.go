package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hrns-dev/hrns/llm"
)

// seedStreams adds every recorded stream to f's corpus.
func seedStreams(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded streams: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzEvents decodes any bytes as an event stream, whatever the sizes of
// the reads, and checks that the decoder keeps the stream contract. The
// framing itself is checked against a reference parser by FuzzReader in
// internal/sse.
func FuzzEvents(f *testing.F) {
	seedStreams(f)
	for _, s := range []string{
		"event: a\r\rdata: b\r\n\r\nevent:c\ndata:c\n\n",
		"\xEF\xBB\xBFdata: x\ndata:  y\n\n: c\nevent: e\n\ndata",
		"event: e\ndata: a\r",
		"data\n\nevent\ndata:\n\n\r\n",
		"event: message_stop\ndata: {}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d decoder
		chunks, err := decodeAll(&d, iotest.HalfReader(bytes.NewReader(in)), false)
		checkContract(t, chunks, err)
	})
}

// FuzzDecoder interprets its input as a program of Messages events, three
// bytes an event (which event, which block index, which fragment of
// content), so that every input is a stream of events in some order, and
// checks that decoding it keeps the stream contract. Block indexes include
// negative ones, both ends of int64 and one beyond it; fragments include
// NUL, invalid UTF-8 and a lone surrogate.
func FuzzDecoder(f *testing.F) {
	for _, prog := range [][]byte{
		{0, 0, 0, 1, 0, 0, 6, 0, 1, 6, 0, 4, 11, 0, 0, 12, 0, 0, 13, 0, 0},                                       // text
		{0, 0, 0, 2, 0, 0, 7, 0, 1, 8, 0, 3, 11, 0, 0, 4, 1, 1, 9, 1, 2, 9, 1, 3, 11, 1, 0, 12, 1, 0, 13, 0, 0},  // thinking, tool call
		{0, 0, 0, 4, 0, 1, 4, 1, 1, 4, 2, 0, 9, 1, 7, 11, 2, 0, 12, 1, 0},                                        // parallel calls, no message_stop
		{0, 0, 0, 3, 0, 2, 5, 1, 0, 9, 1, 7, 10, 1, 0, 15, 0, 0},                                                 // redacted, server tool, error
		{1, 2, 0, 6, 2, 1, 9, 2, 2, 4, 2, 0, 12, 3, 0},                                                           // protocol errors
		{0, 0, 0, 4, 6, 1, 1, 5, 10, 6, 5, 11, 4, 4, 0, 9, 6, 2, 9, 4, 12, 9, 6, 3, 12, 1, 0, 13, 0, 0, 6, 5, 1}, // odd indexes, text after the stop
		{0, 0, 0, 4, 7, 0, 9, 7, 2, 13, 0, 0},                                                                    // an index beyond int64
		{0, 0, 0, 4, 0, 1, 9, 0, 2, 9, 3, 3, 9, 0, 3},                                                            // a delta for a block never started, truncated
	} {
		f.Add(prog)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		var d decoder
		chunks, err := decodeAll(&d, bytes.NewReader(programStream(prog)), false)
		checkContract(t, chunks, err)
	})
}

// programStream renders a FuzzDecoder program as an event stream.
func programStream(prog []byte) []byte {
	frags := [...]string{"", "x", `{"a":`, "1}", "é—😀", `\"`, " ", "{}", `"`, "\n", "\x00", "\xff\xfe"}
	indexes := [...]string{"0", "1", "2", "3", "-1", "-9223372036854775808", "9223372036854775807", "18446744073709551616"}
	reasons := [...]string{"end_turn", "tool_use", "max_tokens", "refusal"}
	errTypes := [...]string{"overloaded_error", "api_error", "rate_limit_error", "invalid_request_error"}
	var b bytes.Buffer
	for i := 0; i+2 < len(prog); i += 3 {
		idx := int(prog[i+1] % 4)
		index := indexes[int(prog[i+1])%len(indexes)]
		q, _ := json.Marshal(frags[int(prog[i+2])%len(frags)])
		if prog[i+2]%16 == 15 {
			q = []byte("\"\xff\\ud800\"") // raw invalid UTF-8, an escaped lone surrogate
		}
		var ev string
		switch prog[i] % 16 {
		case 0:
			ev = `{"type":"message_start","message":{"id":"msg_f","model":"m","usage":{"input_tokens":3,"cache_read_input_tokens":2}}}`
		case 1:
			ev = fmt.Sprintf(`{"type":"content_block_start","index":%s,"content_block":{"type":"text","text":%s}}`, index, q)
		case 2:
			ev = fmt.Sprintf(`{"type":"content_block_start","index":%s,"content_block":{"type":"thinking","thinking":%s,"signature":""}}`, index, q)
		case 3:
			ev = fmt.Sprintf(`{"type":"content_block_start","index":%s,"content_block":{"type":"redacted_thinking","data":%s}}`, index, q)
		case 4:
			input := "{}"
			if prog[i+2]%2 == 1 {
				input = `{"k":[1,"v"]}`
			}
			ev = fmt.Sprintf(`{"type":"content_block_start","index":%s,"content_block":{"type":"tool_use","id":"toolu_%d","name":"f%d","input":%s}}`, index, prog[i+2]%3, idx, input)
		case 5:
			ev = fmt.Sprintf(`{"type":"content_block_start","index":%s,"content_block":{"type":"server_tool_use","id":"srv","name":"web_search","input":{}}}`, index)
		case 6:
			ev = fmt.Sprintf(`{"type":"content_block_delta","index":%s,"delta":{"type":"text_delta","text":%s}}`, index, q)
		case 7:
			ev = fmt.Sprintf(`{"type":"content_block_delta","index":%s,"delta":{"type":"thinking_delta","thinking":%s}}`, index, q)
		case 8:
			ev = fmt.Sprintf(`{"type":"content_block_delta","index":%s,"delta":{"type":"signature_delta","signature":%s}}`, index, q)
		case 9:
			ev = fmt.Sprintf(`{"type":"content_block_delta","index":%s,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, q)
		case 10:
			ev = fmt.Sprintf(`{"type":"content_block_delta","index":%s,"delta":{"type":"citations_delta","citation":{"cited_text":%s}}}`, index, q)
		case 11:
			ev = fmt.Sprintf(`{"type":"content_block_stop","index":%s}`, index)
		case 12:
			ev = fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q},"usage":{"output_tokens":%d}}`, reasons[idx], prog[i+2])
		case 13:
			ev = `{"type":"message_stop"}`
		case 14:
			ev = `{"type":"ping"}`
		case 15:
			ev = fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"m"}}`, errTypes[idx])
		}
		fmt.Fprintf(&b, "data: %s\n\n", ev)
	}
	return b.Bytes()
}

// checkContract checks that chunks, and the error that ended them, keep the
// stream contract of llm.Model: a done chunk ends every stream that did not
// fail, and comes last; tool calls are announced in order with distinct IDs
// before their deltas; the response holds the announced calls (in the order
// of their blocks, which may not be the order they were announced in), the
// deltas of each adding up to its arguments; and it holds the text and
// reasoning that were streamed.
func checkContract(t *testing.T, chunks []llm.Chunk, err error) {
	t.Helper()
	var (
		starts         []llm.Chunk
		args           []*strings.Builder
		announced      = map[string]int{} // id → position
		text, thinking int
		resp           *llm.Response
		ids            = map[string]bool{}
	)
	for i, c := range chunks {
		if resp != nil {
			t.Fatalf("chunk %d (%v) after the done chunk", i, c.Kind)
		}
		switch c.Kind {
		case llm.ChunkText:
			text += len(c.Text)
		case llm.ChunkReasoning:
			thinking += len(c.Text)
		case llm.ChunkToolCallStart:
			if c.Index != len(starts) {
				t.Fatalf("start %+v: index %d, want %d", c, c.Index, len(starts))
			}
			if c.ID == "" || ids[c.ID] {
				t.Fatalf("start %+v: empty or duplicate id", c)
			}
			ids[c.ID] = true
			announced[c.ID] = len(starts)
			starts = append(starts, c)
			args = append(args, new(strings.Builder))
		case llm.ChunkToolCallDelta:
			if c.Index < 0 || c.Index >= len(starts) {
				t.Fatalf("delta %+v for a call not announced", c)
			}
			if c.Text == "" {
				t.Fatalf("empty delta %+v", c)
			}
			args[c.Index].WriteString(c.Text)
		case llm.ChunkDone:
			if c.Response == nil {
				t.Fatal("done chunk without a response")
			}
			resp = c.Response
		default:
			t.Fatalf("unexpected chunk %+v", c)
		}
	}
	if err != nil {
		if resp != nil {
			t.Fatalf("error %v after the done chunk", err)
		}
		if !strings.HasPrefix(err.Error(), "anthropic: ") {
			t.Fatalf("error %q does not name the provider", err)
		}
		return
	}
	if resp == nil {
		t.Fatal("stream ended without a done chunk or an error")
	}
	calls := resp.Message.ToolCalls()
	if len(calls) != len(starts) {
		t.Fatalf("response has %d calls, %d were announced", len(calls), len(starts))
	}
	for i, call := range calls {
		pos, ok := announced[call.ID]
		if !ok {
			t.Fatalf("call %d (%s) was not announced", i, call.ID)
		}
		delete(announced, call.ID)
		if call.Name != starts[pos].Name {
			t.Errorf("call %d is %s %s, announced as %s %s", i, call.ID, call.Name, starts[pos].ID, starts[pos].Name)
		}
		want := args[pos].String()
		if want == "" {
			want = "{}"
		}
		if string(call.Arguments) != want {
			t.Errorf("call %d: arguments %q, want the concatenated deltas %q", i, call.Arguments, want)
		}
	}
	gotText, gotThinking := 0, 0
	for _, p := range resp.Message.Parts {
		switch p.Kind {
		case llm.PartText:
			gotText += len(p.Text)
		case llm.PartReasoning:
			gotThinking += len(p.Reasoning.Text)
		}
	}
	if gotText != text || gotThinking != thinking {
		t.Errorf("response holds %d bytes of text and %d of reasoning; %d and %d were streamed", gotText, gotThinking, text, thinking)
	}
}
