package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hrns-dev/hrns/llm"
)

// decodeAll runs the decoder over a body to its end, as Client.stream does.
func decodeAll(d *decoder, body io.Reader, jsonBody bool) ([]llm.Chunk, error) {
	d.init(body, jsonBody)
	var out []llm.Chunk
	for {
		chunks, err := d.next()
		if err != nil {
			return out, err
		}
		out = append(out, chunks...)
		if d.done {
			return out, nil
		}
	}
}

// FuzzEvents decodes any bytes as an event stream, whatever the sizes of
// the reads, and checks that the decoder keeps the stream contract. The
// framing itself is fuzzed by FuzzReader in internal/sse.
func FuzzEvents(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no wire streams: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: [DONE]\n\nevent: response.completed\ndata: {\"response\":{}}\n\n"))
	f.Add([]byte("event: error\ndata: {}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d decoder
		chunks, err := decodeAll(&d, iotest.HalfReader(bytes.NewReader(in)), false)
		checkContract(t, chunks, err)
		// The same bytes as a whole JSON answer.
		chunks, err = decodeAll(&d, bytes.NewReader(in), true)
		checkContract(t, chunks, err)
	})
}

// FuzzDecoder interprets its input as a program of Responses events, three
// bytes an event (which event, which item, which fragment), so that every
// input is a stream of well-formed events in some order, and checks that
// decoding it keeps the stream contract. Output indexes include negative
// ones and both ends of int64; fragments include NUL, invalid UTF-8 and a
// lone surrogate.
func FuzzDecoder(f *testing.F) {
	for _, prog := range [][]byte{
		{0, 0, 0, 1, 0, 0, 4, 0, 1, 4, 0, 2, 9, 0, 0, 12, 0, 0},                   // text
		{0, 0, 0, 2, 0, 0, 6, 0, 1, 6, 0, 4, 9, 0, 0, 3, 1, 0, 7, 1, 2, 12, 0, 0}, // reasoning, call
		{3, 0, 0, 3, 1, 1, 7, 0, 2, 7, 1, 7, 8, 0, 3, 10, 1, 0, 12, 0, 0},         // parallel calls
		{1, 0, 0, 5, 0, 1, 13, 0, 0, 14, 0, 0},                                    // refusal, incomplete, failed
		{7, 5, 2, 1, 2, 0, 1, 2, 0, 15, 0, 0, 11, 6, 0},                           // protocol errors, error event
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
	indexes := [...]string{"0", "1", "2", "3", "-1", "-9223372036854775808", "9223372036854775807", "5"}
	reasons := [...]string{"max_output_tokens", "content_filter", "other", ""}
	codes := [...]string{"server_error", "rate_limit_exceeded", "invalid_prompt", "context_length_exceeded"}
	var b bytes.Buffer
	for i := 0; i+2 < len(prog); i += 3 {
		n := int(prog[i+1])
		index := indexes[n%len(indexes)]
		id := fmt.Sprintf("it_%d", n%5)
		callID := fmt.Sprintf("call_%d", n%3)
		q, _ := json.Marshal(frags[int(prog[i+2])%len(frags)])
		if prog[i+2]%16 == 15 {
			q = []byte("\"\xff\\ud800\"") // raw invalid UTF-8, an escaped lone surrogate
		}
		var ev string
		switch prog[i] % 16 {
		case 0:
			ev = `{"type":"response.created","response":{"id":"resp_f","model":"m","status":"in_progress"}}`
		case 1:
			ev = fmt.Sprintf(`{"type":"response.output_item.added","output_index":%s,"item":{"id":%q,"type":"message","content":[]}}`, index, id)
		case 2:
			ev = fmt.Sprintf(`{"type":"response.output_item.added","output_index":%s,"item":{"id":%q,"type":"reasoning","summary":[]}}`, index, id)
		case 3:
			ev = fmt.Sprintf(`{"type":"response.output_item.added","output_index":%s,"item":{"id":%q,"type":"function_call","call_id":%q,"name":"f","arguments":%s}}`, index, id, callID, q)
		case 4:
			ev = fmt.Sprintf(`{"type":"response.output_text.delta","item_id":%q,"output_index":%s,"delta":%s}`, id, index, q)
		case 5:
			ev = fmt.Sprintf(`{"type":"response.refusal.delta","item_id":%q,"output_index":%s,"delta":%s}`, id, index, q)
		case 6:
			ev = fmt.Sprintf(`{"type":"response.reasoning_summary_text.delta","item_id":%q,"output_index":%s,"summary_index":%d,"delta":%s}`, id, index, prog[i+2]%2, q)
		case 7:
			ev = fmt.Sprintf(`{"type":"response.function_call_arguments.delta","item_id":%q,"output_index":%s,"delta":%s}`, id, index, q)
		case 8:
			ev = fmt.Sprintf(`{"type":"response.function_call_arguments.done","item_id":%q,"output_index":%s,"arguments":%s}`, id, index, q)
		case 9:
			ev = fmt.Sprintf(`{"type":"response.output_item.done","output_index":%s,"item":{"id":%q,"type":"message","content":[{"type":"output_text","text":%s}]}}`, index, id, q)
		case 10:
			ev = fmt.Sprintf(`{"type":"response.output_item.done","output_index":%s,"item":{"id":%q,"type":"function_call","call_id":%q,"name":"g","arguments":%s}}`, index, id, callID, q)
		case 11:
			ev = fmt.Sprintf(`{"type":"response.output_item.done","output_index":%s,"item":{"id":%q,"type":"reasoning","encrypted_content":"e","summary":[{"type":"summary_text","text":%s}]}}`, index, id, q)
		case 12:
			ev = fmt.Sprintf(`{"type":"response.completed","response":{"id":"resp_f","status":"completed","output":[{"id":%q,"type":"function_call","call_id":"c","name":"h","arguments":%s}],"usage":{"input_tokens":%d,"output_tokens":2}}}`, id, q, prog[i+2])
		case 13:
			ev = fmt.Sprintf(`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":%q},"output":[]}}`, reasons[n%4])
		case 14:
			ev = fmt.Sprintf(`{"type":"response.failed","response":{"status":"failed","error":{"code":%q,"message":"m"}}}`, codes[n%4])
		case 15:
			ev = fmt.Sprintf(`{"type":"error","code":%q,"message":%s}`, codes[n%4], q)
		}
		fmt.Fprintf(&b, "event: x\ndata: %s\n\n", ev)
	}
	return b.Bytes()
}

// checkContract checks that chunks, and the error that ended them, keep the
// stream contract of llm.Model: a done chunk ends every stream that did not
// fail, and comes last; tool calls are announced in order with distinct IDs
// before their deltas; the response holds the announced calls, the deltas
// of each adding up to its arguments; it holds the text and reasoning that
// were streamed; errors name the provider.
func checkContract(t *testing.T, chunks []llm.Chunk, err error) {
	t.Helper()
	var (
		starts          []llm.Chunk
		args            []*strings.Builder
		announced       = map[string]int{}
		text, reasoning int
		resp            *llm.Response
	)
	for i, c := range chunks {
		if resp != nil {
			t.Fatalf("chunk %d (%v) after the done chunk", i, c.Kind)
		}
		switch c.Kind {
		case llm.ChunkText:
			text += len(c.Text)
		case llm.ChunkReasoning:
			reasoning += len(c.Text)
		case llm.ChunkToolCallStart:
			if c.Index != len(starts) {
				t.Fatalf("start %+v: index %d, want %d", c, c.Index, len(starts))
			}
			if _, dup := announced[c.ID]; c.ID == "" || dup {
				t.Fatalf("start %+v: empty or duplicate id", c)
			}
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
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) && !strings.HasPrefix(err.Error(), "openai-responses: ") {
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
			t.Errorf("call %d is %s %s, announced as %s", i, call.ID, call.Name, starts[pos].Name)
		}
		if want := args[pos].String(); string(call.Arguments) != want {
			t.Errorf("call %d: arguments %q, want the concatenated deltas %q", i, call.Arguments, want)
		}
	}
	gotText, gotReasoning := 0, 0
	for _, p := range resp.Message.Parts {
		switch p.Kind {
		case llm.PartText:
			gotText += len(p.Text)
		case llm.PartReasoning:
			gotReasoning += len(p.Reasoning.Text)
		}
	}
	if gotText != text || gotReasoning != reasoning {
		t.Errorf("response holds %d bytes of text and %d of reasoning; %d and %d were streamed", gotText, gotReasoning, text, reasoning)
	}
}
