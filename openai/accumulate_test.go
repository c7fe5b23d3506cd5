package openai

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

// toolCallEvents returns an event stream whose events carry the given
// tool_calls arrays, ending with [DONE].
func toolCallEvents(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":%s}}]}\n\n", l)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// TestAccumulate checks how deltas that compatible servers, or a model
// writing nonsense, send are attributed to calls.
func TestAccumulate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lines []string
		want  []llm.Part // the calls of the response, in order
	}{
		{
			name: "interleaved ids on index 0",
			lines: []string{
				`[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]`,
				`[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"y\":"}}]`,
				`[{"index":0,"id":"a","function":{"arguments":"1}"}}]`,
				`[{"index":0,"id":"b","function":{"arguments":"2}"}}]`,
			},
			want: []llm.Part{callPart("a", "f", `{"x":1}`), callPart("b", "g", `{"y":2}`)},
		},
		{
			name: "a delta without id continues the call its index last went to",
			lines: []string{
				`[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]`,
				`[{"index":0,"id":"b","function":{"name":"g","arguments":"["}}]`,
				`[{"index":0,"function":{"arguments":"]"}}]`,
				`[{"index":0,"id":"a","function":{"arguments":"}"}}]`,
			},
			want: []llm.Part{callPart("a", "f", `{}`), callPart("b", "g", `[]`)},
		},
		{
			name: "ids without indexes, interleaved",
			lines: []string{
				`[{"id":"a","function":{"name":"f","arguments":"{"}},{"id":"b","function":{"name":"g","arguments":"["}}]`,
				`[{"id":"a","function":{"arguments":"}"}},{"id":"b","function":{"arguments":"]"}}]`,
			},
			want: []llm.Part{callPart("a", "f", `{}`), callPart("b", "g", `[]`)},
		},
		{
			name: "ordered by index, ties by arrival",
			lines: []string{
				`[{"index":2,"id":"c","function":{"name":"f","arguments":"3"}}]`,
				`[{"index":1,"id":"b1","function":{"name":"f","arguments":"2"}}]`,
				`[{"index":1,"id":"b2","function":{"name":"f","arguments":"2b"}}]`,
				`[{"index":0,"id":"a","function":{"name":"f","arguments":"1"}}]`,
			},
			want: []llm.Part{callPart("a", "f", `1`), callPart("b1", "f", `2`), callPart("b2", "f", `2b`), callPart("c", "f", `3`)},
		},
		{
			name: "a call without index follows the call before it",
			lines: []string{
				`[{"index":5,"id":"e","function":{"name":"f","arguments":"5"}}]`,
				`[{"id":"n","function":{"name":"g","arguments":"n"}}]`,
				`[{"index":1,"id":"b","function":{"name":"f","arguments":"1"}}]`,
			},
			want: []llm.Part{callPart("b", "f", `1`), callPart("e", "f", `5`), callPart("n", "g", `n`)},
		},
		{
			name: "negative and huge indexes",
			lines: []string{
				`[{"index":999999999,"id":"big","function":{"name":"f","arguments":"{}"}}]`,
				`[{"index":-999999999,"id":"neg","function":{"name":"g","arguments":"{}"}}]`,
				`[{"index":-1,"function":{"name":"h","arguments":"{\"a\":"}}]`,
				`[{"index":-1,"function":{"arguments":"1}"}}]`,
			},
			want: []llm.Part{callPart("neg", "g", `{}`), callPart("call_2", "h", `{"a":1}`), callPart("big", "f", `{}`)},
		},
		{
			name: "an id shared by two indexes names two calls",
			lines: []string{
				`[{"index":0,"id":"x","function":{"name":"f","arguments":"a"}},{"index":1,"id":"x","function":{"name":"g","arguments":"b"}}]`,
				`[{"index":0,"id":"y","function":{"name":"h","arguments":"c"}}]`,
				`[{"index":0,"id":"x","function":{"arguments":"d"}}]`,
			},
			want: []llm.Part{callPart("x", "f", `ad`), callPart("y", "h", `c`), callPart("x_2", "g", `b`)},
		},
		{
			name: "late id",
			lines: []string{
				`[{"index":0,"function":{"name":"f","arguments":"{"}}]`,
				`[{"index":0,"id":"late","function":{"arguments":"}"}}]`,
				`[{"index":0,"id":"late","function":{"arguments":" "}}]`,
			},
			want: []llm.Part{callPart("late", "f", `{} `)},
		},
		{
			name: "late id before the call is announced",
			lines: []string{
				`[{"index":0,"id":""}]`,
				`[{"index":0,"id":"late","function":{"name":"f","arguments":"{}"}}]`,
			},
			want: []llm.Part{callPart("late", "f", `{}`)},
		},
		{
			name: "late id taken by another call",
			lines: []string{
				`[{"index":0,"id":"a","function":{"name":"f"}}]`,
				`[{"index":1,"function":{"name":"g"}}]`,
				`[{"index":1,"id":"a","function":{"arguments":"{}"}}]`,
			},
			want: []llm.Part{callPart("a", "f", `{}`), callPart("a_2", "g", `{}`)},
		},
		{
			name: "NUL, control and non-ASCII bytes are kept",
			lines: []string{
				`[{"index":0,"id":"id\u0000\u0001é","function":{"name":"na\u0000me","arguments":"{\"a\":\"\u0000\"}\u0000"}}]`,
			},
			want: []llm.Part{callPart("id\x00\x01é", "na\x00me", "{\"a\":\"\x00\"}\x00")},
		},
		{
			// encoding/json decodes invalid UTF-8 in a string, and escaped
			// lone surrogates, as U+FFFD: the bytes are replaced, not kept.
			name: "invalid UTF-8 becomes U+FFFD",
			lines: []string{
				"[{\"index\":0,\"id\":\"i\xff\",\"function\":{\"name\":\"n\xfe\",\"arguments\":\"\\ud800\xc3\"}}]",
			},
			want: []llm.Part{callPart("i\uFFFD", "n\uFFFD", "\uFFFD\uFFFD")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeAll(strings.NewReader(toolCallEvents(tt.lines...)), false)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			done := got[len(got)-1]
			if done.Kind != llm.ChunkDone {
				t.Fatalf("last chunk %+v, want done", done)
			}
			if diff := cmp.Diff(tt.want, done.Response.Message.Parts); diff != "" {
				t.Errorf("calls mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAccumulateIndexCostsNothing checks that the size of an index does not
// decide what a delta allocates: nothing is sized or indexed by it.
func TestAccumulateIndexCostsNothing(t *testing.T) {
	allocs := func(index int) float64 {
		return testing.AllocsPerRun(100, func() {
			var a accumulator
			d := toolCallDelta{Index: optInt{v: index, ok: true}, Function: functionCallDelta{Name: "f", Arguments: "{}"}}
			a.add(&d, nil)
			a.calls()
		})
	}
	small := allocs(0)
	for _, index := range []int{-999999999, -1, 999999999} {
		if got := allocs(index); got != small {
			t.Errorf("a delta of index %d allocates %v times, one of index 0 %v", index, got, small)
		}
	}
}
