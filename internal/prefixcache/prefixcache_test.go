package prefixcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// jsonEncoder encodes each message as one element, its llm JSON, and
// counts the messages it encodes; clean is false after a message whose
// text is "dirty".
type jsonEncoder struct {
	app   Appender
	added *int
}

func (e jsonEncoder) Add(dst []byte, first bool, _ int, m *llm.Message) ([]byte, bool, error) {
	if m.Role == "bad" {
		return dst, false, fmt.Errorf("bad message")
	}
	*e.added++
	dst, err := e.app.Append(dst, first, m)
	return dst, m.Text() != "dirty", err
}

func (e jsonEncoder) Finish(dst []byte, _ bool) ([]byte, error) { return dst, nil }

// encodeAll encodes msgs from scratch, as the cache must.
func encodeAll(t *testing.T, msgs []llm.Message) string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), "["), "]")
}

// TestCacheEncodesOnlyNew checks that a request that appends to the last
// encodes only the new messages, that a change re-encodes from the changed
// message on (from before a message that is not clean), and that an
// error keeps what was kept.
func TestCacheEncodesOnlyNew(t *testing.T) {
	var added int
	e := jsonEncoder{added: &added}
	c := New(MaxBytes)
	step := func(msgs []llm.Message, wantAdded int) {
		t.Helper()
		added = 0
		prefix, rest, err := c.Encode(msgs, e)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(bytes.Join(prefix, nil))+string(rest), encodeAll(t, msgs); got != want {
			t.Fatalf("encoded %s, want %s", got, want)
		}
		if added != wantAdded {
			t.Errorf("%d messages encoded, want %d", added, wantAdded)
		}
	}
	msgs := []llm.Message{llm.UserMessage("a"), llm.UserMessage("b")}
	step(msgs, 2)
	msgs = append(msgs, llm.UserMessage("c"))
	step(msgs, 1)
	msgs[1].Parts[0].Text = "B" // in place
	step(msgs, 2)
	msgs = append(msgs, llm.UserMessage("dirty"), llm.UserMessage("d"))
	step(msgs, 2)
	msgs = append(msgs, llm.UserMessage("e"))
	step(msgs, 1)
	msgs[4] = llm.UserMessage("D") // after a message that is not clean
	step(msgs, 3)
	step(msgs[:2], 0)
	if _, _, err := c.Encode(append(msgs[:2:2], llm.Message{Role: "bad"}), e); err == nil {
		t.Fatal("no error for a bad message")
	}
	if c.Len() != 2 {
		t.Errorf("%d messages kept after the error, want 2", c.Len())
	}
	step(msgs[:3], 1)
}

// TestCacheBound checks that a cache never holds more than its limit: a
// message that does not fit is encoded at every request, with those after
// it, and keptSize says what keeping a message costs.
func TestCacheBound(t *testing.T) {
	var added int
	e := jsonEncoder{added: &added}
	big := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ImagePart("image/png", make([]byte, 5000))}}
	small := llm.UserMessage("a")
	for _, m := range []llm.Message{big, small} {
		var k keptMessages
		if got, want := k.add(&m), keptSize(&m); got != want {
			t.Errorf("add kept %d bytes, keptSize says %d", got, want)
		}
	}
	c := New(4000)
	msgs := []llm.Message{small, small, big, small}
	for turn := range 3 {
		prefix, rest, err := c.Encode(msgs, e)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(bytes.Join(prefix, nil))+string(rest), encodeAll(t, msgs); got != want {
			t.Fatalf("turn %d: encoded %s, want %s", turn, got, want)
		}
		if c.Size() > 4000 || c.Len() != 2 {
			t.Fatalf("turn %d: %d messages, %d bytes kept; want 2, at most 4000", turn, c.Len(), c.Size())
		}
	}
	// Without the big message, the rest fits again.
	msgs = []llm.Message{small, small, small}
	if _, _, err := c.Encode(msgs, e); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 3 {
		t.Errorf("%d messages kept, want 3", c.Len())
	}
}

// TestEqualMessageSeesEveryField changes each field of a message that has
// every field set, one at a time and in place, and checks that
// keptMessages tells it from what it kept. A field added to the message
// types fails here until printer.message visits it.
func TestEqualMessageSeesEveryField(t *testing.T) {
	full := func() llm.Message {
		media := func() *llm.Media { return &llm.Media{MIMEType: "a", Data: []byte("b"), URL: "c", Name: "d"} }
		part := func() llm.Part {
			return llm.Part{Kind: "k", Text: "t", Media: media(),
				ToolCall:  &llm.ToolCall{ID: "i", Name: "n", Arguments: llm.Arguments("{}"), Signature: "s"},
				Reasoning: &llm.Reasoning{Text: "r", Signature: "s", Redacted: "x"}}
		}
		p := part()
		p.ToolResult = &llm.ToolResult{CallID: "c", Name: "n", Content: []llm.Part{part()}, IsError: false}
		return llm.Message{Role: "r", Parts: []llm.Part{p}}
	}
	var paths []string
	var walk func(v reflect.Value, path string, visit func(v reflect.Value, path string))
	walk = func(v reflect.Value, path string, visit func(reflect.Value, string)) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name, visit)
			}
		case reflect.Pointer:
			if v.IsNil() {
				if strings.Contains(path, ".Content[") {
					return // a result's content holds no results
				}
				t.Fatalf("%s is nil in the full message", path)
			}
			visit(v, path)
			walk(v.Elem(), path, visit)
		case reflect.Slice:
			visit(v, path)
			if v.Type().Elem().Kind() != reflect.Uint8 {
				for i := range v.Len() {
					walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), visit)
				}
			}
		default:
			visit(v, path)
		}
	}
	m := full()
	walk(reflect.ValueOf(&m).Elem(), "", func(_ reflect.Value, path string) { paths = append(paths, path) })
	for k, path := range paths {
		m := full()
		var kept keptMessages
		kept.add(&m)
		if !kept.equal(0, &m) {
			t.Fatal("a message differs from what is kept of it")
		}
		n := 0
		walk(reflect.ValueOf(&m).Elem(), "", func(v reflect.Value, p string) {
			if n++; n-1 != k {
				return
			}
			switch v.Kind() {
			case reflect.String:
				v.SetString(v.String() + "!")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Slice:
				if v.Type().Elem().Kind() == reflect.Uint8 {
					v.Index(0).Set(reflect.ValueOf(byte('!')).Convert(v.Type().Elem())) // in place
				} else {
					v.Set(v.Slice(0, 0)) // one element fewer
				}
			case reflect.Pointer:
				v.Set(reflect.Zero(v.Type())) // nil
			default:
				t.Fatalf("%s: a field of kind %s: teach this test and printer.message about it", p, v.Kind())
			}
		})
		if kept.equal(0, &m) {
			t.Errorf("changing %s went unnoticed", path)
		}
	}
	if len(paths) < 30 {
		t.Fatalf("only %d fields visited", len(paths))
	}
}

// TestAppender checks that Append gives what json.Marshal gives, without
// HTML escaping, joined by commas, and leaves dst as it was on an error.
func TestAppender(t *testing.T) {
	var a Appender
	values := []any{"a<b>&", 12, nil, map[string]any{"k": []int{1, 2}}, llm.UserMessage("hi \u2028 \"there\"")}
	var dst, want []byte
	for i, v := range values {
		var err error
		if dst, err = a.Append(dst, i == 0, v); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			want = append(want, ',')
		}
		b = bytes.ReplaceAll(b, []byte(`\u003c`), []byte("<"))
		b = bytes.ReplaceAll(b, []byte(`\u003e`), []byte(">"))
		want = append(want, bytes.ReplaceAll(b, []byte(`\u0026`), []byte("&"))...)
		if string(dst) != string(want) {
			t.Fatalf("after %d values: %s, want %s", i+1, dst, want)
		}
	}
	before := string(dst)
	got, err := a.Append(dst, false, func() {})
	if err == nil || string(got) != before || len(got) != len(before) {
		t.Errorf("Append of a func: %q, %v; want an error and %q", got, err, before)
	}
	if a.w.b != nil {
		t.Error("the Appender holds on to the slice it appended to")
	}
}

// TestCacheCopiesNothingKept checks that a turn adding a message larger
// than the room left in the cache's array goes on in a new array: the
// bytes kept for the earlier messages stay where they were (a conversation
// of 50 KiB tool results used to copy all it held at every turn), and the
// body is still the one encoded from scratch.
func TestCacheCopiesNothingKept(t *testing.T) {
	var added int
	e := jsonEncoder{added: &added}
	c := New(MaxBytes)
	big := func(i int) llm.Message { return llm.UserMessage(strings.Repeat(string(rune('a'+i)), 50<<10)) }
	msgs := []llm.Message{big(0)}
	first, _, err := c.Encode(msgs, e)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 6; i++ {
		msgs = append(msgs, big(i))
		prefix, rest, err := c.Encode(msgs, e)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(bytes.Join(prefix, nil))+string(rest), encodeAll(t, msgs); got != want {
			t.Fatalf("turn %d: encoded %d bytes, not those encoded from scratch (%d)", i, len(got), len(want))
		}
		if &prefix[0][0] != &first[0][0] {
			t.Fatalf("turn %d: the first message's bytes were copied to a new array", i)
		}
	}
}

// TestCacheSegmentsSameBytes plays conversations of messages of every
// size, from a few bytes to tens of KiB, cut back and rewritten at random,
// so that the cache's arrays are cut within and between segments, and
// checks every turn against the encoding from scratch.
func TestCacheSegmentsSameBytes(t *testing.T) {
	var added int
	e := jsonEncoder{added: &added}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		c := New(MaxBytes)
		var msgs []llm.Message
		for turn := range 40 {
			for range r.IntN(3) + 1 {
				size := []int{1, 100, 3000, 5000, 40 << 10}[r.IntN(5)]
				msgs = append(msgs, llm.UserMessage(strings.Repeat("x\"é", size/3+1)))
			}
			if r.IntN(4) == 0 {
				n := r.IntN(len(msgs) + 1)
				msgs = msgs[:n:n] // a new array from here on: the cache compares
			}
			prefix, rest, err := c.Encode(msgs, e)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(bytes.Join(prefix, nil))+string(rest), encodeAll(t, msgs); got != want {
				t.Fatalf("seed %d, turn %d: encoded %d bytes, not those encoded from scratch (%d)", seed, turn, len(got), len(want))
			}
		}
	}
}

// runEncoder is a Lookahead, a small model of Anthropic's and Gemini's:
// consecutive messages of one role become one element, their texts joined,
// written by the run's last message once the next message shows the run
// ends; a message whose text is "" is skipped (it merges nothing), one
// whose role is "system" goes aside; the last run is marked with a "*",
// so that it and the run before it are the tail.
type runEncoder struct {
	msgs  []llm.Message
	aside *Aside
	run   []string
	role  llm.Role
	reach int
	last  int // the last message of the last run
	added *int
	sys   []string // the texts aside, as Finish found them

	// memo, when set, memoizes each message's role and text as it is
	// read; stale counts the values it gave that were not the message's.
	memo  *Memo
	stale *int
}

func (e *runEncoder) turn(i int) bool {
	if e.memo != nil {
		want := string(e.msgs[i].Role) + ":" + e.msgs[i].Text()
		if v := e.memo.Get(i); v == nil {
			e.memo.Put(i, want, len(want))
		} else if v != want {
			*e.stale++
		}
	}
	return e.msgs[i].Role != "system" && e.msgs[i].Text() != ""
}

func (e *runEncoder) Tail(msgs []llm.Message) int {
	e.last = -1
	runs := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if !e.turn(i) {
			continue
		}
		if e.last < 0 {
			e.last = i
		}
		if runs == 0 || msgs[i].Role != e.role {
			if runs == 2 {
				return i + 1
			}
			runs++
			e.role = msgs[i].Role
		}
	}
	return 0
}

func (e *runEncoder) Reach() int { return e.reach }

func (e *runEncoder) Add(dst []byte, first bool, i int, m *llm.Message) ([]byte, bool, error) {
	*e.added++
	e.reach = i + 1
	if m.Role == "system" {
		e.aside.Add(i, m.Text())
		return dst, len(e.run) == 0, nil
	}
	if !e.turn(i) {
		return dst, len(e.run) == 0, nil
	}
	e.run, e.role = append(e.run, m.Text()), m.Role
	j := i + 1
	for j < len(e.msgs) && !e.turn(j) {
		j++
	}
	e.reach = j + 1
	if j < len(e.msgs) && e.msgs[j].Role == m.Role {
		return dst, false, nil
	}
	el := string(m.Role) + ":" + strings.Join(e.run, "+")
	if i == e.last {
		el += "*"
	}
	e.run = nil
	if !first {
		dst = append(dst, ',')
	}
	return append(dst, el...), true, nil
}

func (e *runEncoder) Finish(dst []byte, _ bool) ([]byte, error) {
	e.sys = append([]string(nil), e.aside.Texts()...)
	return dst, nil
}

// encodeRuns encodes msgs from scratch as runEncoder must: the elements
// and the texts aside.
func encodeRuns(msgs []llm.Message) (string, []string) {
	var els, sys []string
	var roles []llm.Role
	for _, m := range msgs {
		switch {
		case m.Role == "system":
			sys = append(sys, m.Text())
		case m.Text() == "":
		case len(roles) > 0 && roles[len(roles)-1] == m.Role:
			els[len(els)-1] += "+" + m.Text()
		default:
			roles = append(roles, m.Role)
			els = append(els, string(m.Role)+":"+m.Text())
		}
	}
	if len(els) > 0 {
		els[len(els)-1] += "*"
	}
	return strings.Join(els, ","), sys
}

// TestCacheLookahead plays conversations of merged runs through a
// Lookahead encoder, growing, changed in place, cut back, with and without
// an owner (whose unreported cuts leave the messages kept), and checks
// every turn against the encoding from scratch, the texts aside included,
// and that a turn that only appends encodes only the tail and the new
// messages.
func TestCacheLookahead(t *testing.T) {
	roles := []llm.Role{"user", "assistant", "system"}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 8))
		conv := new(llm.Conversation)
		owned := seed%2 == 1
		if owned {
			conv.Own()
		}
		c := For(conv, struct{}{})
		var msgs []llm.Message
		for turn := range 40 {
			appended := r.IntN(3) + 1
			for range appended {
				msgs = append(msgs, llm.Message{Role: roles[r.IntN(3)], Parts: []llm.Part{llm.TextPart([]string{"", "a", "b"}[r.IntN(3)])}})
			}
			switch r.IntN(6) {
			case 0:
				if owned {
					break // the owner only appends, or cuts back (below)
				}
				i := r.IntN(len(msgs))
				msgs[i] = llm.Message{Role: roles[r.IntN(3)], Parts: []llm.Part{llm.TextPart("c")}}
				appended = -1
			case 1:
				// Cut back, unreported: still no more than a prefix of
				// what was sent, all unchanged.
				msgs = msgs[:r.IntN(len(msgs)+1)]
				appended = -1
			}
			var added, stale int
			e := &runEncoder{msgs: msgs, aside: c.Aside(), added: &added, memo: c.Memo(), stale: &stale}
			kept := c.Len()
			prefix, rest, err := c.Encode(msgs, e)
			if err != nil {
				t.Fatal(err)
			}
			if stale > 0 {
				t.Fatalf("seed %d, turn %d: the memo gave %d values of messages since changed", seed, turn, stale)
			}
			if tail := (&runEncoder{msgs: msgs}).Tail(msgs); len(c.memo.vals) > 0 && c.memo.start < tail {
				t.Errorf("seed %d, turn %d: the memo keeps message %d, before the tail at %d", seed, turn, c.memo.start, tail)
			}
			want, wantSys := encodeRuns(msgs)
			if got := string(bytes.Join(prefix, nil)) + string(rest); got != want || !reflect.DeepEqual(e.sys, wantSys) && len(e.sys)+len(wantSys) > 0 {
				t.Fatalf("seed %d, turn %d, %v: encoded %s aside %q, want %s aside %q", seed, turn, msgs, got, e.sys, want, wantSys)
			}
			if appended > 0 && added != len(msgs)-kept {
				t.Errorf("seed %d, turn %d: %d messages encoded, %d appended to %d kept", seed, turn, added, appended, kept)
			}
		}
	}
}

// TestMemo checks a Memo's bookkeeping: values put in any order, the
// bound, and what each drop forgets.
func TestMemo(t *testing.T) {
	m := &Memo{limit: 100}
	for _, i := range []int{7, 6, 9, 3} {
		if !m.Put(i, i*10, 10) {
			t.Fatalf("put %d refused", i)
		}
	}
	if m.Put(20, "big", 61) {
		t.Fatal("a value past the bound was kept")
	}
	if !m.Put(9, 90, 40) || m.size != 70 {
		t.Fatalf("size %d after replacing a value, want 70", m.size)
	}
	for i, want := range map[int]any{2: nil, 3: 30, 4: nil, 6: 60, 7: 70, 8: nil, 9: 90, 10: nil} {
		if got := m.Get(i); got != want {
			t.Errorf("Get(%d) = %v, want %v", i, got, want)
		}
	}
	m.dropBefore(6)
	if m.Get(3) != nil || m.Get(6) != 60 || m.Len() != 3 || m.size != 60 {
		t.Errorf("after dropBefore(6): Get(3) %v, Get(6) %v, Len %d, size %d", m.Get(3), m.Get(6), m.Len(), m.size)
	}
	m.dropFrom(7)
	if m.Get(7) != nil || m.Get(9) != nil || m.Get(6) != 60 || m.Len() != 1 || m.size != 10 {
		t.Errorf("after dropFrom(7): Get(7) %v, Get(6) %v, Len %d, size %d", m.Get(7), m.Get(6), m.Len(), m.size)
	}
	m.dropBefore(50)
	if m.Len() != 0 || m.size != 0 {
		t.Errorf("after dropBefore(50): Len %d, size %d", m.Len(), m.size)
	}
	m.Put(40, 1, 1)
	if m.Get(40) != 1 || m.Get(6) != nil {
		t.Errorf("a value put after all were dropped: Get(40) %v, Get(6) %v", m.Get(40), m.Get(6))
	}
}
