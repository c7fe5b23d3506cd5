package openai

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// recordedEvents returns the data of every event of the recorded streams
// in testdata.
func recordedEvents(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no recorded streams: %v", err)
	}
	var events [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		var r sse.Reader
		r.Init(bytes.NewReader(b))
		for {
			_, data, err := r.Next()
			if err != nil {
				break
			}
			events = append(events, bytes.Clone(data))
		}
	}
	return events
}

// scanSeeds are events that take the scanner's less common paths.
var scanSeeds = []string{
	`{"choices":[{"index":0,"delta":{"content":"a\"b\\c\/d\b\f\n\r\t"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\u00e9\ud83d\ude00\ud800x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"é😀"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xffb\"}}]}",
	`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":null}}],"usage":null}`,
	`{"choices":[],"x":{"a":[1,-2.5e+3,true,false,null,{"b":"c"}]}}`,
	`{"choices":null}`,
	`{"Choices":[{"index":0,"delta":{"content":"x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x","content":"y"}}]}`,
	`{"choices":[{"index":1.5,"delta":{}}]}`,
	`{"choices":[{"index":-0,"delta":{"tool_calls":[{"index":-0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1e2}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1234567890}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":null,"function":null}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	`{"choices":[{"index":0,"delta":{}}]} ` + "\v",
	`{"choices":[{"index":0,"delta":{}}]}  {}`,
	`{"object":"error","message":"m","type":"t","code":5}`,
	`{"error":{"message":"m"}}`,
	`{"id":null,"model":1}`,
	`{"choices":[{"index":0,"message":{"content":"x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":1}}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2,"audio_tokens":0}}}`,
	`{"choices":[],"usage":{"prompt_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":null,"prompt_cache_hit_tokens":7}}`,
	`{"choices":[],"usage":{}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}`,
	`{"choices":[],"usage":{"prompt_tokens":12345678901}}`,
	`{"choices":[],"usage":{"prompt_tokens":1.5}}`,
	`{"choices":[],"usage":{"prompt_tokens":"1"}}`,
	`{"choices":[],"usage":{"Prompt_tokens":1}}`,
	`{"choices":[],"usage":[]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}]`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}],}`,
	`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`null `,
	`{"a":01}`,
	`{"a":tru}`,
	`{"a":"\x"}`,
	`{"a":"\u12"}`,
	`{"choices":[{"index":0,"delta":{"content":"` + "\x01" + `"}}]}`,
}

// decodeWire decodes data into a wire the way the decoder's encoding/json
// path does: reset, then a JSONDecoder that has decoded prev.
func decodeWire(prev, data []byte, scan bool) (chunkWire, bool) {
	var w chunkWire
	var dec sse.JSONDecoder
	var s scanner
	if len(prev) > 0 {
		w.reset()
		if !scan || !s.chunk(prev, &w) {
			w.reset()
			if dec.Decode(prev, &w) != nil || !dec.Clean() {
				// A failed event ends a stream; one that leaves the
				// decoder unclean sends the next to encoding/json.
				dec.Reset()
			}
		}
	}
	w.reset()
	if scan {
		return w, s.chunk(data, &w)
	}
	return w, dec.Decode(data, &w) == nil
}

// FuzzScanChunk checks the scanner against encoding/json on any event,
// decoded into a wire that decoded another event before (whose buffers
// both reuse): when the scanner does not give up, encoding/json accepts
// the event too and decodes the same value.
func FuzzScanChunk(f *testing.F) {
	events := recordedEvents(f)
	for i, ev := range events {
		f.Add(events[max(i-1, 0)], ev)
	}
	for _, s := range scanSeeds {
		f.Add(events[0], []byte(s))
		f.Add([]byte(s), events[len(events)-1])
	}
	f.Fuzz(func(t *testing.T, prev, data []byte) {
		got, ok := decodeWire(prev, data, true)
		if !ok {
			return // encoding/json decodes it
		}
		want, wantOK := decodeWire(prev, data, false)
		if !wantOK {
			t.Fatalf("the scanner accepted %q, encoding/json rejects it", data)
		}
		if !sameWire(got, want) {
			t.Fatalf("%q:\nscanner       %+v\nencoding/json %+v", data, got, want)
		}
	})
}

// sameWire compares two decoded wires, taking an empty slice and a nil one
// as equal (the decoder does not tell them apart, and the capacities the
// two paths grew may differ).
func sameWire(a, b chunkWire) bool {
	if string(a.ID) != string(b.ID) || string(a.Model) != string(b.Model) || string(a.Object) != string(b.Object) ||
		(a.Choices == nil) != (b.Choices == nil) && len(a.Choices)+len(b.Choices) > 0 ||
		len(a.Choices) != len(b.Choices) || !reflect.DeepEqual(a.Usage, b.Usage) || !reflect.DeepEqual(a.Error, b.Error) ||
		a.Message != b.Message || a.Type != b.Type || a.Code != b.Code {
		return false
	}
	for i := range a.Choices {
		x, y := a.Choices[i], b.Choices[i]
		if len(x.Delta.ToolCalls) != len(y.Delta.ToolCalls) {
			return false
		}
		for j := range x.Delta.ToolCalls {
			if x.Delta.ToolCalls[j] != y.Delta.ToolCalls[j] {
				return false
			}
		}
		x.Delta.ToolCalls, y.Delta.ToolCalls = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// FuzzScanStream decodes any bytes as an event stream twice, with the
// scanner and with encoding/json alone, and checks that the chunks and the
// error are the same.
func FuzzScanStream(f *testing.F) {
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
	for _, s := range scanSeeds {
		f.Add([]byte("data: " + s + "\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	}
	f.Add([]byte("data: {\"choices\":[]}\v\n\ndata: {\"choices\":[{\"index\":0,\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, gotErr := decodeStream(in, false)
		want, wantErr := decodeStream(in, true)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("error %v, encoding/json alone %v", gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks\n%+v\nencoding/json alone\n%+v", got, want)
		}
	})
}

// decodeStream decodes a whole stream, with or without the scanner.
func decodeStream(in []byte, noScan bool) ([]llm.Chunk, error) {
	d := decoder{noScan: noScan}
	d.init(iotest.HalfReader(bytes.NewReader(in)), false)
	var out []llm.Chunk
	for {
		chunks, err := d.next()
		if err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		out = append(out, chunks...)
	}
}

// TestScanRecorded checks that the scanner decodes every event of the
// recorded streams that encoding/json decodes as a streamed chunk without
// an error: giving up there would mean it misses the common case.
func TestScanRecorded(t *testing.T) {
	t.Parallel()
	var n int
	for _, ev := range recordedEvents(t) {
		want, ok := decodeWire(nil, ev, false)
		if !ok || want.Error != nil || string(want.Object) == `"error"` || bytes.Contains(ev, []byte(`\u`)) {
			continue
		}
		got, ok := decodeWire(nil, ev, true)
		if !ok {
			t.Errorf("the scanner gave up on %s", ev)
			continue
		}
		if !sameWire(got, want) {
			t.Errorf("%s:\nscanner       %+v\nencoding/json %+v", ev, got, want)
		}
		n++
	}
	if n < 50 {
		t.Errorf("only %d recorded events decoded by the scanner", n)
	}
}
