package sse

import (
	"bytes"
	"encoding/json"
	"errors"
)

// A JSONDecoder decodes the data of events that each hold one JSON value.
// It reuses one [json.Decoder], and so its buffers, across the events of a
// stream, where [json.Unmarshal] would allocate per event. The zero value
// is ready to use.
type JSONDecoder struct {
	dec    *json.Decoder // reads from ev; nil until the first event
	ev     eventReader
	served int64 // bytes of event data given to dec so far
}

var (
	errEventEnd     = errors.New("event ends inside a JSON value")
	errTrailingData = errors.New("event holds data after its JSON value")
)

// Decode decodes data, which must hold exactly one JSON value, into v. It
// fails if the value is cut short or followed by more than white space. As
// the end of data is not the end of the input to the [json.Decoder], a
// value that is not an object or an array (a number, a string, a literal)
// is only complete when white space follows it in data.
//
// After an error, the decoder may hold part of the failed event: call
// [JSONDecoder.Reset] before decoding another.
func (d *JSONDecoder) Decode(data []byte, v any) error {
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.ev)
	}
	// What the decoder did not read of the previous event (white space
	// after its value) it will never read: do not count it as served.
	d.served -= int64(len(d.ev.data) - d.ev.off)
	d.ev.data, d.ev.off = data, 0
	start := d.served
	d.served += int64(len(data))
	if err := d.dec.Decode(v); err != nil {
		return err
	}
	// The decoder reads across events; check that this value was the
	// whole event.
	used := d.dec.InputOffset() - start
	if used < 0 || used > int64(len(data)) || len(bytes.TrimSpace(data[used:])) > 0 {
		return errTrailingData
	}
	return nil
}

// Clean reports whether the decoder holds nothing of the events it has
// decoded but JSON white space (space, tab, CR, LF), which the next value
// skips: then decoding an event by other means, without the decoder, does
// not change what the decoder makes of the next. After [JSONDecoder.Decode]
// accepted an event ending in other white space (such as a vertical tab, or
// U+00A0), it is not clean: the next value will start with it, and fail.
func (d *JSONDecoder) Clean() bool {
	if d.dec == nil {
		return true
	}
	if !jsonSpace(d.ev.data[d.ev.off:]) {
		return false
	}
	rd := d.dec.Buffered()
	var buf [128]byte
	for {
		n, err := rd.Read(buf[:])
		if !jsonSpace(buf[:n]) {
			return false
		}
		if err != nil {
			return true
		}
	}
}

// jsonSpace reports whether b holds nothing but JSON white space.
func jsonSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// Reset drops what the decoder holds of earlier events, so that the next
// event is decoded afresh.
func (d *JSONDecoder) Reset() {
	d.dec, d.served, d.ev = nil, 0, eventReader{}
}

// eventReader serves the data of the current event to a json.Decoder. At
// the end of the data it fails, so that a value cut short is an error
// rather than a read of the next event.
type eventReader struct {
	data []byte
	off  int
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, errEventEnd
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}
