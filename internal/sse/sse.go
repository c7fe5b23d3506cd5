// Package sse reads server-sent event streams, the framing that the model
// providers stream their answers in: [Reader] splits a stream into events,
// and [JSONDecoder] decodes the data of events that each hold one JSON
// value.
//
// [Reader] follows the WHATWG event stream format
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// lines end in LF, CRLF or a lone CR; a blank line ends an event; the values
// of "data" lines are joined with "\n"; lines starting with ":" are comments;
// the last "event" line names the event; a line without a colon is a field
// with an empty value; a single space after the colon is dropped; a leading
// byte order mark is skipped; an event without a data field is not
// dispatched, and its name does not carry over to the next event.
//
// It deviates from the standard where a client of an API is better served:
//   - An event still open when the input ends is returned rather than
//     discarded, so that a stream cut short is reported as such (the event
//     is marked by [Reader.Unterminated]) rather than as a stream that
//     merely stopped early; some servers also end a complete stream without
//     the final blank line.
//   - A line longer than [MaxLineSize] fails the stream.
//   - The bytes are passed through as they are, not decoded as UTF-8 with
//     invalid sequences replaced.
//   - An event without an "event" line has the empty name, not "message".
//   - "id" and "retry" fields are ignored, like unknown fields: a stream is
//     never resumed.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxLineSize bounds one line of an event stream. A longer line fails the
// stream with an error wrapping [bufio.ErrTooLong].
const MaxLineSize = 16 << 20

// A Reader splits a server-sent event stream into events: the name from the
// "event" field and the data. Call [Reader.Init] before the first
// [Reader.Next]; a Reader may be initialised again to read another stream,
// keeping its buffers.
type Reader struct {
	sc    *bufio.Scanner
	line  *[]byte // the scanner's first buffer, from lineBuffers
	data  []byte
	event []byte
	// started is set once the first line (and any byte order mark on it)
	// has been seen.
	started bool
	// unterminated is set when the event last returned was cut by the end
	// of the input rather than ended by a blank line.
	unterminated bool
}

// lineBuffers are the scanners' first buffers, shared by the Readers that
// [Reader.Release] theirs: a stream a turn would otherwise allocate (and
// clear) a new one each turn.
var lineBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 8<<10)
	return &b
}}

// Init makes r read from rd.
func (r *Reader) Init(rd io.Reader) {
	r.Release()
	r.line = lineBuffers.Get().(*[]byte)
	r.sc = bufio.NewScanner(rd)
	r.sc.Buffer((*r.line)[:0], MaxLineSize)
	r.sc.Split(ScanLines)
	r.data = r.data[:0]
	r.event = r.event[:0]
	r.started = false
	r.unterminated = false
}

// Release gives r's line buffer back for another Reader to use, once r is
// done with its stream: after it, r reads nothing until [Reader.Init]. The
// slices [Reader.Next] returned stay valid (they are not the line buffer).
// A Reader that is never released only costs its buffer to the collector.
func (r *Reader) Release() {
	if r.line != nil {
		lineBuffers.Put(r.line)
		r.line = nil
	}
	r.sc = nil
}

// Next returns the name and data of the next event that has a data field.
// The name is empty when the event has no "event" line. The slices are
// valid until the following call. It returns io.EOF at the end of the
// input, or the error that stopped reading it.
func (r *Reader) Next() (event, data []byte, err error) {
	r.data = r.data[:0]
	r.event = r.event[:0]
	hasData := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if hasData {
				return r.event, r.data, nil
			}
			r.event = r.event[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
		case "event":
			r.event = append(r.event[:0], value...)
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, nil, fmt.Errorf("event stream line longer than %d bytes: %w", MaxLineSize, err)
		}
		return nil, nil, err
	}
	if hasData {
		r.unterminated = true
		return r.event, r.data, nil
	}
	return nil, nil, io.EOF
}

// Unterminated reports whether the event last returned by [Reader.Next] was
// cut by the end of the input rather than ended by a blank line: a caller
// that cannot decode it should report a stream cut short.
func (r *Reader) Unterminated() bool { return r.unterminated }

// ScanLines is a [bufio.SplitFunc] for event stream lines, which end in
// LF, CRLF or a lone CR. The terminator is not part of the token.
func ScanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	// Two vectorised searches beat one IndexAny: the scanner searches its
	// whole buffer again after each read while a long line arrives.
	end := bytes.IndexByte(data, '\n')
	if end < 0 {
		end = len(data)
	}
	if cr := bytes.IndexByte(data[:end], '\r'); cr >= 0 {
		switch {
		case cr+1 < len(data) && data[cr+1] == '\n':
			return cr + 2, data[:cr], nil
		case cr+1 < len(data) || atEOF:
			return cr + 1, data[:cr], nil
		}
		// A CR at the end of the buffer: an LF may follow.
		return 0, nil, nil
	}
	if end < len(data) {
		return end + 1, data[:end], nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
