package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var body bytes.Buffer
		var inputArgs strings.Builder
		for line := range bytes.Lines(in) {
			var deltas []toolCallDelta
			if json.Unmarshal(line, &deltas) != nil {
				continue
			}
			for _, d := range deltas {
				inputArgs.WriteString(d.Function.Arguments)
			}
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
			args      []strings.Builder
			outArgs   strings.Builder
			ids       = map[string]bool{}
			responses []*llm.Response
		)
		for _, c := range chunks {
			switch c.Kind {
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
		for i, call := range calls {
			if call.ID != starts[i].ID {
				t.Errorf("call %d: id %q, announced %q", i, call.ID, starts[i].ID)
			}
			if starts[i].Name != "" && call.Name != starts[i].Name {
				t.Errorf("call %d: name %q, announced %q", i, call.Name, starts[i].Name)
			}
			want := args[i].String()
			if want == "" {
				want = "{}"
			}
			if string(call.Arguments) != want {
				t.Errorf("call %d: arguments %q, want the concatenated deltas %q", i, call.Arguments, want)
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
