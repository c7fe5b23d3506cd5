package otlp

import (
	"encoding/binary"
	"errors"
	"math"
)

// The protobuf wire format, as much of it as OTLP's requests use. Fields
// follow proto3: a scalar at its zero value is left out, except in a
// oneof or with explicit presence (the caller decides); a submessage
// that is set is written even when empty.

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendTag(b []byte, field int, wt int) []byte {
	return appendVarint(b, uint64(field)<<3|uint64(wt))
}

// appendUint writes a varint field (uint32, uint64, int32 as uint64,
// enum, bool) unless it is 0.
func appendUint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarint(appendTag(b, field, wireVarint), v)
}

func appendBool(b []byte, field int, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, field, 1)
}

// appendSint32 writes a zigzag-encoded sint32 unless it is 0.
func appendSint32(b []byte, field int, v int32) []byte {
	return appendUint(b, field, uint64(uint32(v<<1)^uint32(v>>31)))
}

func appendFixed64(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendFixed64Always(b, field, v)
}

// appendFixed64Always writes a fixed64 field even when it is 0 (a oneof
// member, or a field with explicit presence).
func appendFixed64Always(b []byte, field int, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(appendTag(b, field, wireFixed64), v)
}

func appendFixed32(b []byte, field int, v uint32) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(appendTag(b, field, wireFixed32), v)
}

// appendDouble writes a double unless it is +0 (proto3 keeps -0).
func appendDouble(b []byte, field int, v float64) []byte {
	return appendFixed64(b, field, math.Float64bits(v))
}

func appendString(b []byte, field int, s string) []byte {
	if s == "" {
		return b
	}
	return appendStringAlways(b, field, s)
}

func appendStringAlways(b []byte, field int, s string) []byte {
	b = appendVarint(appendTag(b, field, wireBytes), uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, field int, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	return appendBytesAlways(b, field, p)
}

func appendBytesAlways(b []byte, field int, p []byte) []byte {
	b = appendVarint(appendTag(b, field, wireBytes), uint64(len(p)))
	return append(b, p...)
}

// appendMessage writes a submessage field: fn appends the message's
// fields to b, and appendMessage puts the length in front of them.
func appendMessage(b []byte, field int, fn func([]byte) []byte) []byte {
	b = appendTag(b, field, wireBytes)
	start := len(b)
	b = fn(b)
	n := len(b) - start
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	b = append(b, l[:k]...)
	copy(b[start+k:], b[start:start+n])
	copy(b[start:], l[:k])
	return b
}

// appendPackedFixed64 writes a packed repeated fixed64 or double field
// unless it is empty.
func appendPackedFixed64(b []byte, field int, n int, at func(int) uint64) []byte {
	if n == 0 {
		return b
	}
	b = appendVarint(appendTag(b, field, wireBytes), uint64(8*n))
	for i := range n {
		b = binary.LittleEndian.AppendUint64(b, at(i))
	}
	return b
}

// appendPackedVarint writes a packed repeated uint64 field unless it is
// empty.
func appendPackedVarint(b []byte, field int, vs []uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	return appendMessage(b, field, func(b []byte) []byte {
		for _, v := range vs {
			b = appendVarint(b, v)
		}
		return b
	})
}

var errMalformed = errors.New("malformed protobuf")

// maxGroupDepth bounds the groups within groups eachField skips.
const maxGroupDepth = 64

// The wire types of a group's start and end (deprecated; skipped).
const (
	wireStartGroup = 3
	wireEndGroup   = 4
)

// eachField calls f with each field of the protobuf message b, in order:
// its number, wire type and value (v for numbers, p for bytes, within b).
// Groups are skipped. A message that ends within a field is malformed.
func eachField(b []byte, f func(field, wt int, v uint64, p []byte)) error {
	_, err := fields(b, 0, 0, f)
	return err
}

// fields reads the fields of b as eachField, within the group of number
// group (0: none) at depth: it returns what follows the group's end.
func fields(b []byte, group uint64, depth int, f func(field, wt int, v uint64, p []byte)) ([]byte, error) {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29-1 {
			return nil, errMalformed
		}
		b = b[n:]
		var v uint64
		var p []byte
		switch wt := int(tag & 7); wt {
		case wireVarint:
			if v, n = binary.Uvarint(b); n <= 0 {
				return nil, errMalformed
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return nil, errMalformed
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return nil, errMalformed
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return nil, errMalformed
			}
			p, b = b[n:n+int(l)], b[n+int(l):]
		case wireStartGroup:
			if depth >= maxGroupDepth {
				return nil, errMalformed
			}
			var err error
			if b, err = fields(b, tag>>3, depth+1, func(int, int, uint64, []byte) {}); err != nil {
				return nil, err
			}
			continue
		case wireEndGroup:
			if tag>>3 != group || group == 0 {
				return nil, errMalformed
			}
			return b, nil
		default:
			return nil, errMalformed
		}
		if group == 0 {
			f(int(tag>>3), int(tag&7), v, p)
		}
	}
	if group != 0 {
		return nil, errMalformed // a group without its end
	}
	return b, nil
}

// partialSuccess reads the partial_success (field 1) of an
// ExportTraceServiceResponse or an ExportMetricsServiceResponse: the
// items the collector rejected (its field 1, rejected_spans or
// rejected_data_points) and its error message (field 2). As protobuf
// merges a message given more than once, the last of each value wins;
// fields of other numbers or wire types are skipped.
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	var inner error
	err = eachField(b, func(field, wt int, _ uint64, p []byte) {
		if field != 1 || wt != wireBytes || inner != nil {
			return
		}
		inner = eachField(p, func(field, wt int, v uint64, p []byte) {
			switch {
			case field == 1 && wt == wireVarint:
				rejected = int64(v)
			case field == 2 && wt == wireBytes:
				msg = string(p)
			}
		})
	})
	if err == nil {
		err = inner
	}
	return rejected, msg, err
}
