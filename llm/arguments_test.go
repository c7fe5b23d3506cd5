package llm_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/llm"
)

func TestArgumentsJSON(t *testing.T) {
	tests := []struct {
		in             string
		encoded, shown string
		object         string
	}{
		{`{"path":"a.txt"}`, `"{\"path\":\"a.txt\"}"`, `{"path":"a.txt"}`, `{"path":"a.txt"}`},
		{` {"a": 1} `, `" {\"a\": 1} "`, ` {"a": 1} `, `{"a": 1}`},
		{`{"path": "notes.txt"`, `"{\"path\": \"notes.txt\""`, `"{\"path\": \"notes.txt\""`, `{}`},
		{`"x"`, `"\"x\""`, `"x"`, `{}`},
		{`[1]`, `"[1]"`, `[1]`, `{}`},
		{``, `""`, `""`, `{}`},
		{"a\x00b", `"a\u0000b"`, `"a\u0000b"`, `{}`},
	}
	for _, tt := range tests {
		a := llm.Arguments(tt.in)
		b, err := json.Marshal(a)
		if err != nil || string(b) != tt.encoded {
			t.Errorf("Marshal(%q) = %s, %v; want %s", tt.in, b, err, tt.encoded)
		}
		var back llm.Arguments
		if err := json.Unmarshal(b, &back); err != nil || string(back) != tt.in {
			t.Errorf("round trip of %q gave %q, %v", tt.in, back, err)
		}
		if got := string(a.JSON()); got != tt.shown || !json.Valid(a.JSON()) {
			t.Errorf("JSON(%q) = %s, want %s", tt.in, got, tt.shown)
		}
		if got := string(a.Object()); got != tt.object {
			t.Errorf("Object(%q) = %s, want %s", tt.in, got, tt.object)
		}
	}
}

// Transcripts stored before arguments were encoded as strings held the
// object itself; they still decode, to the same bytes.
func TestArgumentsDecodeOldTranscripts(t *testing.T) {
	var c llm.ToolCall
	if err := json.Unmarshal([]byte(`{"id":"c1","name":"f","arguments":{"a": [1, 2]}}`), &c); err != nil {
		t.Fatal(err)
	}
	if string(c.Arguments) != `{"a": [1, 2]}` {
		t.Errorf("arguments %q", c.Arguments)
	}
	if err := json.Unmarshal([]byte(`{"id":"c1","name":"f","arguments":null}`), &c); err != nil || c.Arguments != nil {
		t.Errorf("null gave %q, %v", c.Arguments, err)
	}
}

// Any bytes, once sanitised as the loop does, survive a JSON round trip
// exactly, and always have a valid JSON rendering.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"path": "x"`, "", `"s"`, "\xff\xfe{", "a\x00\u202e"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a := llm.Arguments(raw).Sanitize()
		if !utf8.Valid(a) {
			t.Fatalf("Sanitize left invalid UTF-8: %q", a)
		}
		if utf8.Valid(raw) && string(a) != string(raw) {
			t.Fatalf("Sanitize changed valid input %q to %q", raw, a)
		}
		b, err := json.Marshal(struct{ A llm.Arguments }{a})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ A llm.Arguments }
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if string(back.A) != string(a) {
			t.Fatalf("round trip %q -> %q", a, back.A)
		}
		if !json.Valid(llm.Arguments(raw).JSON()) {
			t.Fatalf("JSON() invalid for %q", raw)
		}
		if obj := llm.Arguments(raw).Object(); !json.Valid(obj) || obj[0] != '{' {
			t.Fatalf("Object() = %q", obj)
		}
	})
}
