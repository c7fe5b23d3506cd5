package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// maxDepth bounds the nesting of converted values; it also stops a list
// that contains itself.
const maxDepth = 100

// toJSON encodes a Starlark value as JSON, keeping the order of dict keys.
// None, bool, int, float, str, bytes (as a string), list, tuple, set and
// dicts with string keys are converted; anything else is an error.
func toJSON(v starlark.Value) ([]byte, error) {
	var b bytes.Buffer
	if err := appendJSON(&b, v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func appendJSON(b *bytes.Buffer, v starlark.Value, depth int) error {
	if depth > maxDepth {
		return errors.New("value nested too deeply (or contains itself)")
	}
	switch v := v.(type) {
	case starlark.NoneType:
		b.WriteString("null")
	case starlark.Bool:
		b.WriteString(strconv.FormatBool(bool(v)))
	case starlark.Int:
		b.WriteString(v.String())
	case starlark.Float:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("cannot convert float %s to JSON", v)
		}
		out, _ := json.Marshal(f)
		b.Write(out)
	case starlark.String:
		writeString(b, string(v))
	case starlark.Bytes:
		writeString(b, string(v))
	case *starlark.List:
		return appendSeq(b, v, depth)
	case starlark.Tuple:
		return appendSeq(b, v, depth)
	case *starlark.Set:
		return appendSeq(b, v, depth)
	case *starlark.Dict:
		b.WriteByte('{')
		for i, item := range v.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return fmt.Errorf("cannot convert a dict with %s keys to JSON: keys must be strings", item[0].Type())
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, string(k))
			b.WriteByte(':')
			if err := appendJSON(b, item[1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("cannot convert %s to JSON", v.Type())
	}
	return nil
}

func appendSeq(b *bytes.Buffer, v starlark.Iterable, depth int) error {
	b.WriteByte('[')
	it := v.Iterate()
	defer it.Done()
	var x starlark.Value
	for i := 0; it.Next(&x); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendJSON(b, x, depth+1); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// fromJSON decodes JSON into Starlark values: objects become dicts (in the
// order of their keys), arrays lists, numbers int when integral and float
// otherwise.
func fromJSON(data []byte) (starlark.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := starlark.NewDict(0)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if err := d.SetKey(starlark.String(k), v); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			var elems []starlark.Value
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				elems = append(elems, v)
			}
			_, err := dec.Token() // ']'
			return starlark.NewList(elems), err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return starlark.String(t), nil
	case json.Number:
		return number(string(t))
	case bool:
		return starlark.Bool(t), nil
	case nil:
		return starlark.None, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func number(s string) (starlark.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return starlark.MakeBigInt(i), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("bad JSON number %q", s)
	}
	return starlark.Float(f), nil
}

// resultValue turns a capability's text result into a Starlark value: a
// JSON object or array is decoded, anything else is a string.
func resultValue(text string) starlark.Value {
	t := strings.TrimSpace(text)
	if t != "" && (t[0] == '{' || t[0] == '[') {
		if v, err := fromJSON([]byte(t)); err == nil {
			return v
		}
	}
	return starlark.String(text)
}
