package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hrns-dev/hrns/llm"
)

// refEvents is a direct, whole-input reading of the event stream format,
// against which FuzzEvents checks the incremental reader.
func refEvents(in string) []sseEvent {
	in = strings.TrimPrefix(in, "\uFEFF")
	var lines []string
	for in != "" {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in)
			break
		}
		lines = append(lines, in[:i])
		if strings.HasPrefix(in[i:], "\r\n") {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
	}
	var events []sseEvent
	var name string
	var data []string
	flush := func() {
		if data != nil {
			events = append(events, sseEvent{name, strings.Join(data, "\n")})
		}
		name, data = "", nil
	}
	for _, l := range lines {
		if l == "" {
			flush()
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			name = value
		}
	}
	flush()
	return events
}

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

// FuzzEvents checks the SSE reader against refEvents whatever the sizes of
// the reads, and that decoding the same bytes keeps the stream contract.
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
		want := refEvents(string(in))
		readers := map[string]io.Reader{
			"whole":    bytes.NewReader(in),
			"one byte": iotest.OneByteReader(bytes.NewReader(in)),
			"halves":   iotest.HalfReader(bytes.NewReader(in)),
		}
		for name, r := range readers {
			got, err := readEvents(r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("%s: events %q, want %q", name, got, want)
			}
			for _, ev := range got {
				if strings.ContainsAny(ev.Data+ev.Event, "\r") || strings.Contains(ev.Event, "\n") {
					t.Fatalf("%s: event %q holds a line end", name, ev)
				}
			}
		}
		var d decoder
		chunks, err := decodeAll(&d, iotest.HalfReader(bytes.NewReader(in)), false)
		checkContract(t, chunks, err)
	})
}

// FuzzStreamEvents feeds lines of JSON, one event's data per line, through
// the decoder and checks the stream contract.
func FuzzStreamEvents(f *testing.F) {
	seeds := []string{
		evStart + "\n" + evTextStart + "\n" +
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}` + "\n" + evStop + "\n" + evEnd,
		evStart + "\n" +
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n" +
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}` + "\n" +
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}` + "\n" +
			`{"type":"content_block_stop","index":0}` + "\n" +
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}` + "\n" +
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}` + "\n" +
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}` + "\n" +
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t2","name":"g","input":{"x":[1]}}}` + "\n" +
			`{"type":"content_block_stop","index":2}` + "\n" +
			`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`,
		evStart + "\n" +
			`{"type":"content_block_start","index":3,"content_block":{"type":"redacted_thinking","data":"abc"}}` + "\n" +
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"h","input":{}}}` + "\n" +
			`{"type":"content_block_start","index":-2,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}` + "\n" +
			`{"type":"content_block_delta","index":-2,"delta":{"type":"input_json_delta","partial_json":"{}"}}` + "\n" +
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}` + "\n" + `{"type":"ping"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var body bytes.Buffer
		for line := range bytes.Lines(in) {
			var compact bytes.Buffer
			if json.Compact(&compact, line) != nil {
				continue
			}
			fmt.Fprintf(&body, "data: %s\n\n", compact.Bytes())
		}
		var d decoder
		chunks, err := decodeAll(&d, &body, false)
		checkContract(t, chunks, err)
	})
}

// checkContract checks that chunks, and the error that ended them, keep the
// stream contract of llm.Model: a done chunk ends every stream that did not
// fail, and comes last; tool calls are announced in order with distinct IDs
// before their deltas; the deltas of each call add up to its arguments; and
// the response holds the text and reasoning that were streamed.
func checkContract(t *testing.T, chunks []llm.Chunk, err error) {
	t.Helper()
	var (
		starts         []llm.Chunk
		args           []strings.Builder
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
			starts = append(starts, c)
			args = append(args, strings.Builder{})
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
		if call.ID != starts[i].ID || call.Name != starts[i].Name {
			t.Errorf("call %d is %s %s, announced as %s %s", i, call.ID, call.Name, starts[i].ID, starts[i].Name)
		}
		want := args[i].String()
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
