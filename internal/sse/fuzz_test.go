package sse

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// refEvents is a direct, whole-input reading of the event stream format,
// against which FuzzReader checks the incremental reader.
func refEvents(in string) []event {
	in = strings.TrimPrefix(in, "\uFEFF")
	var lines []string
	for in != "" {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in)
			break
		}
		lines = append(lines, in[:i])
		if strings.HasPrefix(in[i:], "\r\n") {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
	}
	var events []event
	var name string
	var data []string
	flush := func() {
		if data != nil {
			events = append(events, event{name, strings.Join(data, "\n")})
		}
		name, data = "", nil
	}
	for _, l := range lines {
		if l == "" {
			flush()
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			name = value
		}
	}
	flush()
	return events
}

// seedStreams adds the streams the providers' tests record to f's corpus.
func seedStreams(f *testing.F) {
	var files []string
	for _, dir := range []string{"../../openai/testdata", "../../anthropic/testdata"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.sse"))
		if err != nil || len(m) == 0 {
			f.Fatalf("no recorded streams in %s: %v", dir, err)
		}
		files = append(files, m...)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzReader checks the Reader against refEvents whatever the sizes of the
// reads.
func FuzzReader(f *testing.F) {
	seedStreams(f)
	for _, s := range []string{
		"data: a\r\rdata: b\r\n\r\ndata:c\n\n",
		"\xEF\xBB\xBFdata: x\ndata:  y\n\n: c\nevent: e\n\ndata",
		"data: a\r",
		"data\n\ndata:\n\n\r\n",
		"event: a\r\rdata: b\r\n\r\nevent:c\ndata:c\n\n",
		"event: e\ndata: a\r",
		"data\n\nevent\ndata:\n\n\r\n",
		"event: message_stop\ndata: {}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := refEvents(string(in))
		readers := map[string]io.Reader{
			"whole":    bytes.NewReader(in),
			"one byte": iotest.OneByteReader(bytes.NewReader(in)),
			"halves":   iotest.HalfReader(bytes.NewReader(in)),
		}
		for name, r := range readers {
			got, err := readEvents(r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("%s: events %q, want %q", name, got, want)
			}
			for _, ev := range got {
				if strings.ContainsAny(ev.Data+ev.Event, "\r") || strings.Contains(ev.Event, "\n") {
					t.Fatalf("%s: event %q holds a line end", name, ev)
				}
			}
		}
	})
}
