package micro

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/raw"
	"github.com/hrns-dev/hrns/bench/internal/task"
)

// scanAcc is what scanChunk fills: the sketch of a hand-written decoder for
// chat.completion.chunk, to tell how much a decoder that skips what it does
// not need could save over encoding/json. It is not hrns code: it handles
// only the fields the benchmark's streams use, and no error objects.
type scanAcc struct {
	text   []byte
	args   []byte
	id     string
	name   string
	finish string
	usage  [2]int64 // prompt, completion
	chunks int
}

var errScan = errors.New("scan: malformed chunk")

// scanner walks one JSON value.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errScan
	}
	s.i++
	return nil
}

// str returns a string's raw bytes (escapes kept) and whether it has any.
func (s *scanner) str() ([]byte, bool, error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start, esc := s.i, false
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			esc = true
			s.i += 2
			continue
		case '"':
			v := s.b[start:s.i]
			s.i++
			return v, esc, nil
		}
		s.i++
	}
	return nil, false, errScan
}

// appendStr appends a string's value to dst, unescaping it.
func (s *scanner) appendStr(dst []byte) ([]byte, error) {
	v, esc, err := s.str()
	if err != nil || !esc {
		return append(dst, v...), err
	}
	var u string
	if err := json.Unmarshal(s.b[bytes.LastIndex(s.b[:s.i-len(v)-1], []byte(`"`)):s.i], &u); err != nil {
		return dst, err
	}
	return append(dst, u...), nil
}

// skip skips one value of any kind.
func (s *scanner) skip() error {
	switch s.peek() {
	case '"':
		_, _, err := s.str()
		return err
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, _, err := s.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errScan
	default:
		for s.i < len(s.b) && !strings.ContainsRune(",}] \n\t\r", rune(s.b[s.i])) {
			s.i++
		}
		return nil
	}
}

// object calls field for each key of an object.
func (s *scanner) object(field func(key []byte) error) error {
	if s.peek() == 'n' {
		return s.skip()
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, _, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errScan
		}
	}
}

// array calls elem for each element of an array.
func (s *scanner) array(elem func() error) error {
	if s.peek() == 'n' {
		return s.skip()
	}
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errScan
		}
	}
}

func (s *scanner) int() (int64, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
		s.i++
	}
	return strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
}

// scanChunk adds one chunk to a.
func scanChunk(data []byte, a *scanAcc) error {
	s := &scanner{b: data}
	a.chunks++
	var err error
	return s.object(func(key []byte) error {
		switch string(key) {
		case "choices":
			return s.array(func() error {
				return s.object(func(key []byte) error {
					switch string(key) {
					case "delta":
						return s.object(func(key []byte) error {
							switch string(key) {
							case "content":
								if s.peek() == 'n' {
									return s.skip()
								}
								a.text, err = s.appendStr(a.text)
								return err
							case "tool_calls":
								return s.array(func() error {
									return s.object(func(key []byte) error {
										switch string(key) {
										case "id":
											v, err := s.appendStr(nil)
											a.id = string(v)
											return err
										case "function":
											return s.object(func(key []byte) error {
												switch string(key) {
												case "name":
													v, err := s.appendStr(nil)
													if len(v) > 0 {
														a.name = string(v)
													}
													return err
												case "arguments":
													a.args, err = s.appendStr(a.args)
													return err
												}
												return s.skip()
											})
										}
										return s.skip()
									})
								})
							}
							return s.skip()
						})
					case "finish_reason":
						if s.peek() == 'n' {
							return s.skip()
						}
						v, err := s.appendStr(nil)
						a.finish = string(v)
						return err
					}
					return s.skip()
				})
			})
		case "usage":
			return s.object(func(key []byte) error {
				switch string(key) {
				case "prompt_tokens":
					a.usage[0], err = s.int()
					return err
				case "completion_tokens":
					a.usage[1], err = s.int()
					return err
				}
				return s.skip()
			})
		}
		return s.skip()
	})
}

// TestScanChunk checks the sketch against the baseline on the mock's
// streams.
func TestScanChunk(t *testing.T) {
	for _, st := range []mock.Stream{
		mock.TextStream(mock.FinalText(100)),
		mock.ToolCallStream("call_1", task.ToolName, `{"path":"notes/\"quoted\"\\turn-1.txt"}`, 8),
	} {
		var want raw.Accumulator
		var got scanAcc
		err := raw.ReadStream(bytes.NewReader(st.Whole), func(data []byte) error {
			if err := want.Add(data); err != nil {
				return err
			}
			return scanChunk(data, &got)
		})
		if err != nil {
			t.Fatal(err)
		}
		want.Finish()
		if string(got.text) != want.Text.String() || got.chunks != want.Chunks {
			t.Errorf("text %q (%d chunks), want %q (%d)", got.text, got.chunks, want.Text.String(), want.Chunks)
		}
		if len(want.Calls) > 0 {
			c := want.Calls[0]
			if got.id != c.ID || got.name != c.Function.Name || string(got.args) != c.Function.Arguments {
				t.Errorf("call %q %q %s, want %q %q %s", got.id, got.name, got.args, c.ID, c.Function.Name, c.Function.Arguments)
			}
		}
		if got.usage != [2]int64{412, 96} {
			t.Errorf("usage %v", got.usage)
		}
	}
}
