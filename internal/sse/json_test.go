package sse

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSONDecoder(t *testing.T) {
	t.Parallel()
	type value struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	tests := []struct {
		name string
		data string
		want value
		err  error // nil, or the sentinel the error must match
	}{
		{"object", `{"a":1,"b":"x"}`, value{A: 1, B: "x"}, nil},
		{"white space around", " \t{\"a\":2}\n ", value{A: 2}, nil},
		{"another object", `{"b":"y"}`, value{B: "y"}, nil},
		{"cut short", `{"a":`, value{}, errEventEnd},
	}
	var d JSONDecoder
	for _, tt := range tests {
		var v value
		err := d.Decode([]byte(tt.data), &v)
		if !errors.Is(err, tt.err) {
			t.Fatalf("%s: err = %v, want %v", tt.name, err, tt.err)
		}
		if err == nil {
			if diff := cmp.Diff(tt.want, v); diff != "" {
				t.Errorf("%s: value mismatch (-want +got):\n%s", tt.name, diff)
			}
		}
	}
}

func TestJSONDecoderTrailingData(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`{"a":1} x`, `{"a":1}{"a":2}`, `[1] 2`} {
		var d JSONDecoder
		var v any
		if err := d.Decode([]byte(data), &v); !errors.Is(err, errTrailingData) {
			t.Errorf("%q: err = %v, want %v", data, err, errTrailingData)
		}
	}
}

func TestJSONDecoderReset(t *testing.T) {
	t.Parallel()
	var d JSONDecoder
	var v map[string]int
	if err := d.Decode([]byte(`{"a":1} {"a"`), &v); err == nil {
		t.Fatal("trailing data decoded")
	}
	// Without a reset the decoder would read on from what it holds of the
	// failed event.
	d.Reset()
	v = nil
	if err := d.Decode([]byte(`{"b":2}`), &v); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"b": 2}, v); diff != "" {
		t.Errorf("value after Reset mismatch (-want +got):\n%s", diff)
	}
}

func TestJSONDecoderScalars(t *testing.T) {
	t.Parallel()
	// A scalar is complete only when white space follows it in the event.
	var d JSONDecoder
	var n int
	if err := d.Decode([]byte("12 "), &n); err != nil || n != 12 {
		t.Errorf("\"12 \": %d, %v; want 12, nil", n, err)
	}
	d.Reset()
	if err := d.Decode([]byte("12"), &n); !errors.Is(err, errEventEnd) {
		t.Errorf("\"12\": err = %v, want %v", err, errEventEnd)
	}
}

// TestJSONDecoderBytes records what becomes of bytes that are not plain
// text in the strings of an event: escaped NUL and control characters are
// kept, invalid UTF-8 and escaped lone surrogates become U+FFFD (as
// encoding/json decodes them), and a raw control character is a syntax
// error, as JSON requires. The reader itself passes any bytes through.
func TestJSONDecoderBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data string
		want       string
		wantErr    bool
	}{
		{"escaped NUL", `{"s":"a\u0000b"}`, "a\x00b", false},
		{"escaped control", `{"s":"\u0001\u001f"}`, "\x01\x1f", false},
		{"invalid UTF-8", "{\"s\":\"a\xffb\xc3\"}", "a\uFFFDb\uFFFD", false},
		{"lone surrogate", `{"s":"\ud800x"}`, "\uFFFDx", false},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, "😀", false},
		{"raw NUL", "{\"s\":\"a\x00b\"}", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d JSONDecoder
			var v struct {
				S string `json:"s"`
			}
			err := d.Decode([]byte(tt.data), &v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if v.S != tt.want {
				t.Errorf("decoded %q, want %q", v.S, tt.want)
			}
		})
	}
}

// TestJSONDecoderLongTrailingSpace decodes events whose value is followed
// by more white space than the decoder reads at once: the part it never
// read must not be counted, or the next event looks cut or padded.
func TestJSONDecoderLongTrailingSpace(t *testing.T) {
	t.Parallel()
	var d JSONDecoder
	for i, data := range []string{
		`{"a":1}` + strings.Repeat(" ", 5000),
		`{"a":2}` + strings.Repeat("\n", 700),
		`{"a":3}`,
	} {
		var v struct {
			A int `json:"a"`
		}
		if err := d.Decode([]byte(data), &v); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if v.A != i+1 {
			t.Fatalf("event %d: a = %d", i, v.A)
		}
	}
}

// TestJSONDecoderClean checks which leftovers of an event leave the
// decoder clean: JSON white space does, other white space does not (the
// next value would start with it). Clean errs on the safe side: the end of
// a long event, which the decoder did not read, is not clean unless it is
// JSON white space, though the decoder will never read it.
func TestJSONDecoderClean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data             string
		clean, nextFails bool
	}{
		{`{"a":1}`, true, false},
		{"{\"a\":1} \t\r\n", true, false},
		{`{"a":1}` + strings.Repeat(" ", 3000), true, false},
		{"{\"a\":1}\v", false, true},
		{"{\"a\":1} \u00a0", false, true},
		{"{\"a\":1}" + strings.Repeat(" ", 3000) + "\f", false, false},
	}
	for _, tt := range tests {
		var d JSONDecoder
		if !d.Clean() {
			t.Fatal("a new decoder is not clean")
		}
		var v any
		if err := d.Decode([]byte(tt.data), &v); err != nil {
			t.Fatalf("%q: %v", tt.data, err)
		}
		if got := d.Clean(); got != tt.clean {
			t.Errorf("%q: Clean() = %v, want %v", tt.data, got, tt.clean)
		}
		if err := d.Decode([]byte(`{"a":2}`), &v); (err != nil) != tt.nextFails {
			t.Errorf("%q: the next event: err = %v, want an error: %v", tt.data, err, tt.nextFails)
		}
	}
}
