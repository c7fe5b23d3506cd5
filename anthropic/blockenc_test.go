package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// fuzzBlock builds a block of every field from the fuzzer's values: which
// fields are set is in mask, and a tool result holds a text block, and
// an image block when mask says so.
func fuzzBlock(mask uint16, s1, s2 string, input []byte) block {
	pick := func(bit uint16, s string) string {
		if mask&(1<<bit) != 0 {
			return s
		}
		return ""
	}
	b := block{
		Type: pick(0, s1) + "x", Text: pick(1, s2), Title: pick(2, s1), ID: pick(3, s2), Name: pick(4, s1),
		ToolUseID: pick(5, s2), IsError: mask&(1<<6) != 0, Signature: pick(7, s1), Data: pick(8, s2),
	}
	if mask&(1<<9) != 0 {
		b.Input = input
	}
	if mask&(1<<10) != 0 {
		b.Source = &source{Type: s1, MediaType: pick(1, s2), Data: pick(2, s2), URL: pick(3, s1)}
	}
	if mask&(1<<11) != 0 {
		t := pick(12, s2)
		b.Thinking = &t
	}
	if mask&(1<<13) != 0 {
		b.Content = []block{{Type: typeText, Text: s2}}
		if mask&(1<<14) != 0 {
			b.Content = append(b.Content, block{Type: typeImage, Source: &source{Type: "base64", MediaType: "image/png", Data: s1}})
		}
	}
	if mask&(1<<15) != 0 {
		b.CacheControl = &cacheControl{Type: "ephemeral", TTL: pick(4, s2)}
	}
	return b
}

// FuzzBlockEncoding holds appendBlock, the hand-written encoding of a
// block, to encoding/json's encoding of the same block (HTML escaping
// off): every field, strings that need escaping, invalid UTF-8, inputs
// with white space, and inputs that are not JSON (which appendBlock
// refuses, leaving dst as it was).
func FuzzBlockEncoding(f *testing.F) {
	f.Add(uint16(0xffff), "tool_result", "line 1\nline 2 \"quoted\" <b>&amp;</b> é漢🙂 \u2028", []byte(`{ "path" : "a b\" c",	"n": [1, 2] }`))
	f.Add(uint16(0x0201), "\xff\xfe\x00\x1f\\", "", []byte(`not json`))
	f.Add(uint16(0x2a2a), "text", "abcdefgh", []byte(`{}`))
	f.Add(uint16(0x0a00), "", "\u2029", []byte(" {\"a\":\"\\\\ \"} "))
	f.Fuzz(func(t *testing.T, mask uint16, s1, s2 string, input []byte) {
		b := fuzzBlock(mask, s1, s2, input)
		var app prefixcache.Appender
		want, wantErr := app.Append([]byte("[x"), true, &b)
		got, ok := appendBlock([]byte("[x"), &b)
		if !ok {
			if wantErr == nil {
				t.Fatalf("appendBlock refused a block encoding/json encodes as %s", want)
			}
			if string(got) != "[x" {
				t.Fatalf("appendBlock refused but wrote %q", got)
			}
			return
		}
		if wantErr != nil {
			t.Fatalf("appendBlock encoded %s, encoding/json refused it: %v", got, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("appendBlock = %s, want %s", got, want)
		}
		if len(b.Input) > 0 && blockSize(&b) < len(b.Input) {
			t.Fatalf("blockSize %d below the input's %d bytes", blockSize(&b), len(b.Input))
		}
	})
}

// TestAppendBlockRenderedKinds encodes the blocks every kind of message
// renders to, with appendBlock and with encoding/json.
func TestAppendBlockRenderedKinds(t *testing.T) {
	msgs := []llm.Message{
		llm.UserMessage("hello <b>&</b>"),
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ImagePart("image/png", []byte("\x89PNG\r\n\x1a\n")), {Kind: llm.PartDocument, Media: &llm.Media{MIMEType: "text/plain", Data: []byte("notes"), Name: "n.txt"}}}},
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartDocument, Media: &llm.Media{URL: "https://example.com/a.pdf"}}}},
		assistant(thinkingPart("", "sig"), llm.TextPart("Reading."), callPart("c1", "read", " {\"path\": \"a b\"}\n")),
		assistant(llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Redacted: "opaque"}}, callPart("c2", "read", "not json")),
		{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c1", IsError: true,
			Content: []llm.Part{llm.TextPart("line\n\t\"q\""), llm.ImagePart("image/png", []byte("\x89PNG\r\n\x1a\n"))}}}}},
	}
	var app prefixcache.Appender
	for i := range msgs {
		r := renderMessage(i, &msgs[i])
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, b := range r.blocks {
			want, err := app.Append(nil, true, &b)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := appendBlock(nil, &b)
			if !ok || !bytes.Equal(got, want) {
				t.Errorf("message %d: appendBlock = %s (%v), want %s", i, got, ok, want)
			}
			if !json.Valid(got) {
				t.Errorf("message %d: %s is not JSON", i, got)
			}
		}
	}
}
