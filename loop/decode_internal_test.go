package loop

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

type panicsOnDecode struct{}

func (*panicsOnDecode) UnmarshalJSON([]byte) error { panic("decoded") }

type textDecoded struct{ s string }

func (t *textDecoded) UnmarshalText(b []byte) error { t.s = string(b); return nil }

// Only types whose decoding runs no method and yields no shared memory are
// decoded before the handler's goroutine starts.
func TestPlainDecoding(t *testing.T) {
	type plain struct {
		S  string  `json:"s"`
		N  int     `json:"n"`
		F  float64 `json:"f"`
		B  bool    `json:"b"`
		A  [2]uint `json:"a"`
		In struct {
			X int8 `json:"x"`
		} `json:"in"`
	}
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{plain{}, true},
		{struct{}{}, true},
		{&plain{}, false},
		{struct{ L []string }{}, false},
		{struct{ M map[string]int }{}, false},
		{struct{ P *int }{}, false},
		{struct{ I any }{}, false},
		{struct{ T time.Time }{}, false},
		{struct{ D panicsOnDecode }{}, false},
		{struct{ D [1]textDecoded }{}, false},
		{struct{ R json.RawMessage }{}, false},
		{struct{ N json.Number }{}, true},
		{map[string]any{}, false},
	} {
		if got := plainDecoding(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("plainDecoding(%T) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// A handler made by NewTool gets the arguments as it would decode them
// itself, and decodes them itself when they are no longer the ones the
// executor decoded (a wrapper, a hook that rewrote them).
func TestDecodedArgumentsAreTheCallsArguments(t *testing.T) {
	type args struct {
		Path  string `json:"path"`
		Limit int    `json:"limit,omitempty" default:"100"`
	}
	var got []args
	def := NewTool("read", "Reads.", func(_ context.Context, a args) (string, error) {
		got = append(got, a)
		return "ok", nil
	})
	if def.decode == nil {
		t.Fatal("no decode for a plain type")
	}
	ts := MustToolset(def)
	x := &executor{tools: ts, opts: &Options{}}
	x.opts.setDefaults()
	p := &execCall{call: llm.ToolCall{ID: "c1", Name: "read", Arguments: llm.Arguments(`{"path":"a.txt"}`)}}
	x.resolveCall(p)
	if p.parsed == nil || p.parsed.decoded == nil {
		t.Fatalf("call not decoded: %+v", p.parsed)
	}
	if _, err := def.Handler(t.Context(), p.parsed); err != nil {
		t.Fatal(err)
	}
	// A wrapper that hands the handler other arguments.
	other := *p.parsed
	other.Arguments = json.RawMessage(`{"path":"b.txt","limit":3}`)
	if _, err := def.Handler(t.Context(), &other); err != nil {
		t.Fatal(err)
	}
	// The same call again: the same value, not one the first run changed.
	if _, err := def.Handler(t.Context(), p.parsed); err != nil {
		t.Fatal(err)
	}
	want := []args{{"a.txt", 100}, {"b.txt", 3}, {"a.txt", 100}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handler got (-want +got):\n%s", diff)
	}
	// What the executor decoded is what encoding/json decodes.
	var fresh args
	if err := json.Unmarshal(p.parsed.Arguments, &fresh); err != nil {
		t.Fatal(err)
	}
	if p.parsed.decoded.(args) != fresh {
		t.Errorf("decoded %+v, encoding/json %+v", p.parsed.decoded, fresh)
	}
}

// A type with its own decoding is decoded in the handler, on its goroutine,
// where a panic becomes the call's error.
func TestOwnDecodingRunsInTheHandler(t *testing.T) {
	type args struct {
		D panicsOnDecode `json:"d"`
	}
	def := NewTool("t", "T.", func(context.Context, args) (string, error) { return "ok", nil })
	if def.decode != nil {
		t.Fatal("decode set for a type with UnmarshalJSON")
	}
	x := &executor{tools: MustToolset(def), opts: &Options{}, emit: func(Chunk) bool { return true }, consumerGone: func() bool { return false }}
	x.opts.setDefaults()
	p := &execCall{call: llm.ToolCall{ID: "c1", Name: "t", Arguments: llm.Arguments(`{"d":{}}`)}}
	x.resolveCall(p)
	if p.failure != nil {
		t.Fatal(p.failure)
	}
	_, err := x.runHandler(t.Context(), p)
	var te *ToolError
	if !errors.As(err, &te) || te.Kind != ToolPanicked || !strings.Contains(te.Msg, "decoded") {
		t.Errorf("err = %v, want the decoder's panic as the call's", err)
	}
}
