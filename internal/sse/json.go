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

// Reset drops what the decoder holds of earlier events, so that the next
// event is decoded afresh.
func (d *JSONDecoder) Reset() {
	d.dec, d.served = nil, 0
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
