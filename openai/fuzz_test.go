package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hrns-dev/hrns/llm"
)

// FuzzAccumulate feeds lines of tool_calls JSON, one array of deltas per
// line, through the decoder and checks the tool calls it assembles.
func FuzzAccumulate(f *testing.F) {
	seeds := []string{
		`[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]
[{"index":0,"function":{"arguments":"{\"x\":"}}]
[{"index":0,"function":{"arguments":"1}"}}]`,
		`[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}},{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y"}}]
[{"index":1,"function":{"arguments":"\":2}"}}]`,
		`[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]
[{"index":0,"id":"b","function":{"name":"f","arguments":"{}"}}]
[{"index":0,"id":"a","function":{"arguments":" "}}]`,
		`[{"id":"","function":{"name":"f","arguments":"{\"c\":1}"}},{"id":"","function":{"name":"f","arguments":"{\"c\":2}"}}]`,
		`[{"id":"x","function":{"name":"f","arguments":""}}]
[{"function":{"arguments":"{\"a\""}}]
[{"function":{"name":"f","arguments":":1}"}}]
[{"function":{"name":"g"}}]`,
		`[{"index":3,"id":"call_0","function":{"name":"f"}},{"index":4,"function":{"name":"g"}},{"index":5,"id":"call_0","function":{"arguments":"x"}}]`,
		`[{"index":0,"id":"","function":{"arguments":"{}"}}]
[{"index":0,"id":"late","function":{"name":"f"}}]
[{"index":-1,"function":{"name":"h","arguments":"[]"}}]`,
		// Interleaved calls on one index, ids on every delta.
		`[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]
[{"index":0,"id":"b","function":{"name":"g","arguments":"["}}]
[{"index":0,"id":"a","function":{"arguments":"}"}}]
[{"index":0,"id":"b","function":{"arguments":"]"}}]`,
		// Indexes out of order, negative and huge.
		`[{"index":999999999,"id":"z","function":{"name":"f","arguments":"1"}},{"index":-999999999,"id":"y","function":{"name":"g","arguments":"2"}}]
[{"index":1,"function":{"name":"h","arguments":"3"}},{"index":0,"function":{"name":"i","arguments":"4"}}]`,
		// An id shared by calls of two indexes, interleaved with a third.
		`[{"index":0,"id":"x","function":{"name":"f","arguments":"a"}},{"index":1,"id":"x","function":{"name":"g","arguments":"b"}}]
[{"index":0,"id":"y","function":{"name":"h","arguments":"c"}}]
[{"index":0,"id":"x","function":{"arguments":"d"}}]`,
		// NUL, invalid UTF-8 and escapes in names, ids and arguments.
		"[{\"index\":0,\"id\":\"\\u0000\\ud800\",\"function\":{\"name\":\"f\\u0000\",\"arguments\":\"\\u0000\xff\xfe\"}}]",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var body bytes.Buffer
		var inputArgs strings.Builder
		var inputs []toolCallDelta // every delta, in order
		for line := range bytes.Lines(in) {
			var deltas []toolCallDelta
			if json.Unmarshal(line, &deltas) != nil {
				continue
			}
			for _, d := range deltas {
				inputArgs.WriteString(d.Function.Arguments)
			}
			inputs = append(inputs, deltas...)
			var compact bytes.Buffer
			if json.Compact(&compact, line) != nil {
				t.Fatalf("valid JSON %q does not compact", line)
			}
			fmt.Fprintf(&body, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":%s}}]}\n\n", compact.Bytes())
		}
		body.WriteString("data: [DONE]\n\n")

		chunks, err := decodeAll(&body, false)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		var (
			starts    []llm.Chunk
			args      []*strings.Builder
			outArgs   strings.Builder
			announced = map[string]int{} // id → position
			responses []*llm.Response
		)
		for _, c := range chunks {
			switch c.Kind {
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
				outArgs.WriteString(c.Text)
			case llm.ChunkDone:
				responses = append(responses, c.Response)
			default:
				t.Fatalf("unexpected chunk %+v", c)
			}
		}
		if len(responses) != 1 || chunks[len(chunks)-1].Kind != llm.ChunkDone {
			t.Fatalf("got %d done chunks, want 1, last", len(responses))
		}
		// Every fragment of arguments reaches exactly one call, in order.
		if outArgs.String() != inputArgs.String() {
			t.Fatalf("streamed arguments %q, want %q", outArgs.String(), inputArgs.String())
		}
		calls := responses[0].Message.ToolCalls()
		if len(calls) != len(starts) {
			t.Fatalf("response has %d calls, %d were announced", len(calls), len(starts))
		}
		if len(calls) > len(inputs) {
			t.Fatalf("%d calls from %d deltas", len(calls), len(inputs))
		}
		// The calls of the response are the announced ones, maybe in
		// another order, each with the arguments streamed for it. An id
		// that came late replaces the announced one.
		ids := map[string]bool{}
		var gotArgs, wantArgs []string
		for i, call := range calls {
			if call.ID == "" || ids[call.ID] {
				t.Fatalf("call %d: empty or duplicate id %q", i, call.ID)
			}
			ids[call.ID] = true
			gotArgs = append(gotArgs, string(call.Arguments))
			if pos, ok := announced[call.ID]; ok {
				want := args[pos].String()
				if want == "" {
					want = "{}"
				}
				if string(call.Arguments) != want {
					t.Errorf("call %d (%s): arguments %q, want the concatenated deltas %q", i, call.ID, call.Arguments, want)
				}
				if n := starts[pos].Name; n != "" && call.Name != n {
					t.Errorf("call %d: name %q, announced %q", i, call.Name, n)
				}
			}
		}
		for _, a := range args {
			w := a.String()
			if w == "" {
				w = "{}"
			}
			wantArgs = append(wantArgs, w)
		}
		slices.Sort(gotArgs)
		slices.Sort(wantArgs)
		if !slices.Equal(gotArgs, wantArgs) {
			t.Errorf("arguments of the calls %q, want those streamed %q", gotArgs, wantArgs)
		}
		if want := refCalls(inputs); want != nil {
			var got []refCall
			for _, c := range calls {
				got = append(got, refCall{name: c.Name, args: string(c.Arguments)})
			}
			if !slices.Equal(want, got) {
				t.Errorf("calls %+v, want %+v", got, want)
			}
		}
		wantFinish := llm.FinishStop
		if len(calls) > 0 {
			wantFinish = llm.FinishToolCalls
		}
		if got := responses[0].FinishReason; got != wantFinish {
			t.Errorf("finish reason %q, want %q", got, wantFinish)
		}
	})
}

// refCall is a call as refCalls assembles it.
type refCall struct {
	index      int
	name, args string
}

// refCalls assembles deltas that all carry an id and an index, as the
// accumulator must: one call per id and index, named by its first name,
// with its arguments concatenated, in the order of the indexes (then of
// arrival), without the calls that got neither a name nor arguments. It
// returns nil for other deltas.
func refCalls(deltas []toolCallDelta) []refCall {
	if len(deltas) == 0 {
		return nil
	}
	var calls []*refCall
	byKey := map[idIndex]*refCall{}
	for _, d := range deltas {
		if d.ID == "" || !d.Index.ok {
			return nil
		}
		k := idIndex{d.ID, d.Index.v}
		c := byKey[k]
		if c == nil {
			c = &refCall{index: d.Index.v}
			byKey[k] = c
			calls = append(calls, c)
		}
		if c.name == "" {
			c.name = d.Function.Name
		}
		c.args += d.Function.Arguments
	}
	var out []refCall
	for _, c := range calls {
		if c.name != "" || c.args != "" {
			if c.args == "" {
				c.args = "{}"
			}
			out = append(out, *c)
		}
	}
	slices.SortStableFunc(out, func(a, b refCall) int { return cmp.Compare(a.index, b.index) })
	for i := range out {
		out[i].index = 0 // compared by position
	}
	return out
}

// FuzzEvents decodes any bytes as an event stream, whatever the sizes of
// the reads, and checks the stream contract: no panic; a done chunk ends
// every stream that did not fail, and comes last; calls are announced in
// order with distinct ids before their deltas, and the response holds them,
// each with the arguments its deltas add up to.
func FuzzEvents(f *testing.F) {
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
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-5,\"id\":\"\\u0000\",\"function\":{\"name\":\"\\xff\",\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after\"}}]}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d decoder
		d.init(iotest.HalfReader(bytes.NewReader(in)), false)
		var chunks []llm.Chunk
		for {
			batch, err := d.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if _, ok := errors.AsType[*llm.APIError](err); !ok && !strings.HasPrefix(err.Error(), "openai: ") {
					t.Fatalf("error %q does not name the provider", err)
				}
				for _, c := range append(chunks, batch...) {
					if c.Kind == llm.ChunkDone {
						t.Fatalf("error %v after the done chunk", err)
					}
				}
				return
			}
			chunks = append(chunks, batch...)
		}
		if len(chunks) == 0 || chunks[len(chunks)-1].Kind != llm.ChunkDone {
			t.Fatal("stream ended without a done chunk or an error")
		}
		var args []*strings.Builder
		announced := map[string]int{}
		for _, c := range chunks[:len(chunks)-1] {
			switch c.Kind {
			case llm.ChunkText, llm.ChunkReasoning:
			case llm.ChunkToolCallStart:
				if _, dup := announced[c.ID]; c.Index != len(args) || c.ID == "" || dup {
					t.Fatalf("start %+v: want index %d and a new id", c, len(args))
				}
				announced[c.ID] = len(args)
				args = append(args, new(strings.Builder))
			case llm.ChunkToolCallDelta:
				if c.Index < 0 || c.Index >= len(args) || c.Text == "" {
					t.Fatalf("delta %+v: empty or for a call not announced", c)
				}
				args[c.Index].WriteString(c.Text)
			default:
				t.Fatalf("unexpected chunk %+v", c)
			}
		}
		calls := chunks[len(chunks)-1].Response.Message.ToolCalls()
		if len(calls) != len(args) {
			t.Fatalf("response has %d calls, %d were announced", len(calls), len(args))
		}
		ids := map[string]bool{}
		for _, c := range calls {
			if c.ID == "" || ids[c.ID] {
				t.Fatalf("call %+v: empty or duplicate id", c)
			}
			ids[c.ID] = true
			if pos, ok := announced[c.ID]; ok {
				want := args[pos].String()
				if want == "" {
					want = "{}"
				}
				if string(c.Arguments) != want {
					t.Errorf("call %s: arguments %q, want %q", c.ID, c.Arguments, want)
				}
			}
		}
	})
}
