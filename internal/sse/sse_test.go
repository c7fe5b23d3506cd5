package sse

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// event is an event as the Reader returns it.
type event struct{ Event, Data string }

// readEvents reads all events of an event stream.
func readEvents(r io.Reader) ([]event, error) {
	var sr Reader
	sr.Init(r)
	var out []event
	for {
		ev, data, err := sr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, event{string(ev), string(data)})
	}
}

// readData returns the data of every event in an event stream.
func readData(r io.Reader) ([]string, error) {
	events, err := readEvents(r)
	var out []string
	for _, ev := range events {
		out = append(out, ev.Data)
	}
	return out, err
}

func TestReaderData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"mixed terminators", "data: a\r\n\ndata: b\r\r\ndata: c\n\r", []string{"a", "b", "c"}},
		{"no space", "data:a\n\n", []string{"a"}},
		{"only one space dropped", "data:  a \n\n", []string{" a "}},
		{"multi-line", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"empty data line", "data\n\ndata:\n\n", []string{"", ""}},
		{"comments", ": hi\n:\ndata: a\n: mid\n\n", []string{"a"}},
		{"other fields", "event: message\nid: 7\nretry: 10\nfoo: bar\ndata: a\n\n", []string{"a"}},
		{"event without data", "event: ping\n\n: keep-alive\n\ndata: a\n\n", []string{"a"}},
		{"extra blank lines", "\n\n\ndata: a\n\n\n\n", []string{"a"}},
		{"bom", "\xEF\xBB\xBFdata: a\n\n", []string{"a"}},
		{"bom only at start", "data: \xEF\xBB\xBFa\n\n", []string{"\xEF\xBB\xBFa"}},
		{"unterminated event", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"unterminated after lf", "data: a\n", []string{"a"}},
		{"colon in value", "data: a: b\n\n", []string{"a: b"}},
		{"NUL and invalid UTF-8 are data", "data: a\x00b\xff\xfe\n\nevent: \x00\ndata: \xc3\n\n", []string{"a\x00b\xff\xfe", "\xc3"}},
		{"field case matters", "Data: a\n\n", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := readData(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			// Any split of the input into reads gives the same events.
			got, err = readData(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events read byte by byte mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReaderEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []event
	}{
		{"one event", "event: ping\ndata: {}\n\n", []event{{"ping", "{}"}}},
		{"no event name", "data: x\n\n", []event{{"", "x"}}},
		{"name does not leak into the next event", "event: a\ndata: 1\n\ndata: 2\n\n", []event{{"a", "1"}, {"", "2"}}},
		{"event without data is dropped with its name", "event: ping\n\ndata: 2\n\n", []event{{"", "2"}}},
		{"last name wins", "event: a\nevent: b\ndata: x\n\n", []event{{"b", "x"}}},
		{"multi-line data", "data: a\ndata: b\n\n", []event{{"", "a\nb"}}},
		{"CRLF and CR", "event: e\r\ndata: a\r\n\r\ndata: b\r\r", []event{{"e", "a"}, {"", "b"}}},
		{"comments and other fields", ": hi\nid: 1\nretry: 5\ndata: a\n\n", []event{{"", "a"}}},
		{"no space after colon, extra spaces kept", "data:a\ndata:  b\n\n", []event{{"", "a\n b"}}},
		{"field without colon", "data\n\n", []event{{"", ""}}},
		{"byte order mark", "\xEF\xBB\xBFdata: a\n\n", []event{{"", "a"}}},
		{"unterminated last event", "data: a\n\ndata: b", []event{{"", "a"}, {"", "b"}}},
		{"blank lines only", "\n\n\r\n", nil},
	}
	for _, tt := range tests {
		for name, r := range map[string]io.Reader{
			"whole":    strings.NewReader(tt.in),
			"one byte": iotest.OneByteReader(strings.NewReader(tt.in)),
		} {
			got, err := readEvents(r)
			if err != nil {
				t.Fatalf("%s (%s): %v", tt.name, name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (%s): events mismatch (-want +got):\n%s", tt.name, name, diff)
			}
		}
	}
}

func TestReaderUnterminated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		// want is Unterminated after each event.
		want []bool
	}{
		{"terminated", "data: a\n\ndata: b\n\n", []bool{false, false}},
		{"last event cut", "data: a\n\ndata: b", []bool{false, true}},
		{"cut after a line end", "data: a\n", []bool{true}},
		{"cut after CR", "data: a\r", []bool{true}},
		{"blank line after CR", "data: a\r\r", []bool{false}},
	}
	for _, tt := range tests {
		var r Reader
		r.Init(strings.NewReader(tt.in))
		var got []bool
		for {
			_, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			got = append(got, r.Unterminated())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Unterminated mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestReaderReuse(t *testing.T) {
	t.Parallel()
	// A Reader initialised again reads the second stream as if it were new:
	// no byte order mark skipped, no name or cut state carried over.
	var r Reader
	r.Init(strings.NewReader("event: a\ndata: 1"))
	if _, _, err := r.Next(); err != nil || !r.Unterminated() {
		t.Fatalf("first stream: err %v, Unterminated %v", err, r.Unterminated())
	}
	r.Init(strings.NewReader("\xEF\xBB\xBFdata: 2\n\n"))
	ev, data, err := r.Next()
	if err != nil || string(ev) != "" || string(data) != "2" || r.Unterminated() {
		t.Fatalf("second stream: event %q, data %q, err %v, Unterminated %v", ev, data, err, r.Unterminated())
	}
}

// TestReaderRelease checks that Readers that give their line buffers back
// and take them again, many at once, each read their own stream, and that
// the data Next returned last stays as it was after Release, whoever
// reads with the buffer next.
func TestReaderRelease(t *testing.T) {
	t.Parallel()
	done := make(chan error)
	for g := range 8 {
		go func() {
			var r Reader
			for i := range 200 {
				want := strings.Repeat(string(rune('a'+g)), 100+i*37)
				r.Init(strings.NewReader("data: " + want + "\n\n"))
				_, data, err := r.Next()
				r.Release()
				var other Reader
				other.Init(strings.NewReader("data: " + strings.Repeat("z", len(want)) + "\n\n"))
				other.Next()
				other.Release()
				if err != nil || string(data) != want {
					done <- fmt.Errorf("reader %d, stream %d: data %.20q…, err %v; want %.20q…", g, i, data, err, want)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestReaderLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1<<20)
	got, err := readData(strings.NewReader("data: " + long + "\n\n"))
	if err != nil || len(got) != 1 || got[0] != long {
		t.Fatalf("1 MiB line: got %d events, err %v", len(got), err)
	}

	tooLong := strings.NewReader("data: " + strings.Repeat("x", MaxLineSize) + "\n\n")
	_, err = readData(tooLong)
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("line over the limit: err = %v, want bufio.ErrTooLong", err)
	}
	if !strings.Contains(err.Error(), "longer than 16777216 bytes") {
		t.Errorf("error %q does not state the limit", err)
	}
}

func TestReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: {\"cut"), iotest.ErrReader(boom))
	got, err := readData(r)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

func TestScanLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data    string
		atEOF   bool
		advance int
		token   string
		more    bool // the split asks for more data
	}{
		{"a\nb", false, 2, "a", false},
		{"a\r\nb", false, 3, "a", false},
		{"a\rb", false, 2, "a", false},
		{"a\r", false, 0, "", true}, // an LF may follow
		{"a\r", true, 2, "a", false},
		{"a", false, 0, "", true},
		{"a", true, 1, "a", false},
		{"\n", false, 1, "", false},
		{"a\r\r\n", false, 2, "a", false},
		{"", true, 0, "", true},
	}
	for _, tt := range tests {
		advance, token, err := ScanLines([]byte(tt.data), tt.atEOF)
		if err != nil {
			t.Fatalf("ScanLines(%q, %v): %v", tt.data, tt.atEOF, err)
		}
		if more := advance == 0 && token == nil; more != tt.more || advance != tt.advance || string(token) != tt.token {
			t.Errorf("ScanLines(%q, %v) = %d, %q; want %d, %q (more data: %v)", tt.data, tt.atEOF, advance, token, tt.advance, tt.token, tt.more)
		}
	}
}
