package gemini

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
// the reads, and as a JSON answer, and checks that the decoder keeps the
// stream contract. The framing itself is fuzzed by FuzzReader in
// internal/sse.
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
	f.Add([]byte(`data: {"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"s"}]},"finishReason":"STOP"}]}` + "\n\n"))
	f.Add([]byte(`[{"error":{}}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d decoder
		chunks, err := decodeAll(&d, iotest.HalfReader(bytes.NewReader(in)), false)
		checkContract(t, chunks, err)
		chunks, err = decodeAll(&d, bytes.NewReader(in), true)
		checkContract(t, chunks, err)
	})
}

// FuzzDecoder interprets its input as a program of Gemini events, two
// bytes a part (which part, which fragment), a byte 0xff ending an event,
// so that every input is a stream of well-formed responses, and checks
// that decoding it keeps the stream contract and that the response sends
// back what came: every signature on a part of the rendered model turn.
func FuzzDecoder(f *testing.F) {
	for _, prog := range [][]byte{
		{0, 1, 0, 2, 0xff, 9, 0},             // text, finish
		{1, 1, 1, 2, 0xff, 0, 3, 2, 0, 9, 0}, // thought, text signed
		{3, 1, 3, 2, 4, 0, 9, 0},             // calls
		{5, 0, 0xff, 6, 1, 8, 0},             // error, block, usage
	} {
		f.Add(prog)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		var d decoder
		chunks, err := decodeAll(&d, bytes.NewReader(programStream(prog)), false)
		checkContract(t, chunks, err)
		if err != nil {
			return
		}
		resp := chunks[len(chunks)-1].Response
		var sigs []string
		for _, p := range resp.Message.Parts {
			switch {
			case p.Reasoning != nil && p.Reasoning.Signature != "":
				sigs = append(sigs, p.Reasoning.Signature)
			case p.ToolCall != nil && p.ToolCall.Signature != "":
				sigs = append(sigs, p.ToolCall.Signature)
			}
		}
		parts, err := modelParts(resp.Message.Parts)
		if err != nil {
			t.Fatalf("the response does not render back: %v", err)
		}
		var sent []string
		for _, p := range parts {
			if p.ThoughtSignature != "" {
				sent = append(sent, p.ThoughtSignature)
			}
		}
		if strings.Join(sigs, "|") != strings.Join(sent, "|") {
			t.Fatalf("signatures %q came, %q go back", sigs, sent)
		}
	})
}

// programStream renders a FuzzDecoder program as an event stream.
func programStream(prog []byte) []byte {
	frags := [...]string{"", "x", "é—😀", `\"`, " ", "\n", "\x00", "\xff\xfe"}
	var b bytes.Buffer
	var parts []string
	var extra []string
	flush := func(final string) {
		fmt.Fprintf(&b, `data: {"candidates":[{"content":{"parts":[%s]}%s,"index":0}]%s,"responseId":"r"}`+"\n\n",
			strings.Join(parts, ","), final, strings.Join(extra, ""))
		parts, extra = nil, nil
	}
	for i := 0; i < len(prog); i++ {
		if prog[i] == 0xff {
			flush("")
			continue
		}
		if i+1 >= len(prog) {
			break
		}
		op, n := prog[i], int(prog[i+1])
		i++
		q, _ := json.Marshal(frags[n%len(frags)])
		sig := ""
		if n&8 != 0 {
			sig = fmt.Sprintf(`,"thoughtSignature":"s%d"`, i)
		}
		switch op % 10 {
		case 0:
			parts = append(parts, `{"text":`+string(q)+sig+`}`)
		case 1:
			parts = append(parts, `{"text":`+string(q)+`,"thought":true`+sig+`}`)
		case 2:
			parts = append(parts, `{"text":""`+fmt.Sprintf(`,"thoughtSignature":"t%d"`, i)+`}`)
		case 3:
			parts = append(parts, fmt.Sprintf(`{"functionCall":{"name":"f","args":{"a":%s}}%s}`, q, sig))
		case 4:
			parts = append(parts, fmt.Sprintf(`{"functionCall":{"id":"id%d","name":"g"}%s}`, n%3, sig))
		case 5:
			b.WriteString(`data: {"error":{"code":503,"status":"UNAVAILABLE","message":"x"}}` + "\n\n")
		case 6:
			extra = append(extra, `,"promptFeedback":{"blockReason":"OTHER"}`)
		case 7:
			parts = append(parts, `{"inlineData":{"mimeType":"image/png","data":"AA=="}`+sig+`}`)
		case 8:
			extra = append(extra, fmt.Sprintf(`,"usageMetadata":{"promptTokenCount":%d,"thoughtsTokenCount":%d}`, n, n/2))
		case 9:
			reasons := [...]string{"STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "OTHER"}
			flush(`,"finishReason":"` + reasons[n%len(reasons)] + `"`)
		}
	}
	if len(parts) > 0 || len(extra) > 0 {
		flush("")
	}
	return b.Bytes()
}

// checkContract checks what every decoded stream must satisfy: deltas only
// for announced calls, the final response made of what the chunks said,
// and nothing after the done chunk.
func checkContract(t *testing.T, chunks []llm.Chunk, err error) {
	t.Helper()
	calls := map[int]*strings.Builder{}
	var text, reasoning strings.Builder
	for i, c := range chunks {
		switch c.Kind {
		case llm.ChunkText:
			text.WriteString(c.Text)
		case llm.ChunkReasoning:
			reasoning.WriteString(c.Text)
		case llm.ChunkToolCallStart:
			if calls[c.Index] != nil || c.Index != len(calls) || c.ID == "" {
				t.Fatalf("call start %+v", c)
			}
			calls[c.Index] = &strings.Builder{}
		case llm.ChunkToolCallDelta:
			b := calls[c.Index]
			if b == nil {
				t.Fatalf("delta for unannounced call %d", c.Index)
			}
			b.WriteString(c.Text)
		case llm.ChunkDone:
			if err != nil || i != len(chunks)-1 || c.Response == nil {
				t.Fatalf("done chunk at %d of %d, err %v", i, len(chunks), err)
			}
			m := c.Response.Message
			if m.Text() != text.String() {
				t.Fatalf("response text %q, chunks %q", m.Text(), text.String())
			}
			var r strings.Builder
			seen := map[string]bool{}
			for j, tc := range m.ToolCalls() {
				if seen[tc.ID] {
					t.Fatalf("call ID %q repeated", tc.ID)
				}
				seen[tc.ID] = true
				if b := calls[j]; b == nil || b.String() != string(tc.Arguments) {
					t.Fatalf("call %d arguments %q", j, tc.Arguments)
				}
			}
			for _, p := range m.Parts {
				if p.Kind == llm.PartReasoning {
					r.WriteString(p.Reasoning.Text)
				}
			}
			if r.String() != reasoning.String() {
				t.Fatalf("reasoning %q, chunks %q", r.String(), reasoning.String())
			}
		default:
			t.Fatalf("chunk kind %v", c.Kind)
		}
	}
	if err == nil && (len(chunks) == 0 || chunks[len(chunks)-1].Kind != llm.ChunkDone) {
		t.Fatal("no error and no done chunk")
	}
}
