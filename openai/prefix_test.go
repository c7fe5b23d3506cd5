package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// A chooser makes the choices of a generated conversation: a seeded random
// source in the tests, the fuzzer's bytes in FuzzPrefixCache.
type chooser interface {
	intn(n int) int // in [0, n); n > 0
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser takes its choices from b, then zeros.
type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

func (c *byteChooser) done() bool { return len(c.b) == 0 }

// texts are the pieces generated strings are made of: JSON escapes, HTML,
// non-ASCII, invalid UTF-8, the field names of the body.
var texts = []string{"", "a", "hello", `"quoted"`, `\back`, "<b>&amp;</b>", "é漢🙂", "\xff\xfe", "\n\t", `"messages":[]`, "\u2028", "{}"}

// genString returns a new string (a new pointer, even for equal content).
func genString(c chooser) string {
	var b strings.Builder
	for range c.intn(3) + 1 {
		b.WriteString(texts[c.intn(len(texts))])
	}
	return strings.Clone(b.String())
}

// genArgs returns new argument bytes: an object, or anything a model might
// write.
func genArgs(c chooser) llm.Arguments {
	switch c.intn(4) {
	case 0:
		return llm.Arguments(`{"path":"` + fmt.Sprint(c.intn(1000)) + `"}`)
	case 1:
		return llm.Arguments(genString(c))
	case 2:
		return nil
	}
	return llm.Arguments(` {"a":[1,2]} `)
}

func genMedia(c chooser, doc bool) *llm.Media {
	m := &llm.Media{MIMEType: []string{"", "image/png", "application/pdf", "text/plain"}[c.intn(4)]}
	if c.intn(4) == 0 && !doc {
		m.URL = "https://example.com/" + genString(c)
		return m
	}
	m.Data = []byte("\x89PNG" + genString(c))
	if c.intn(2) == 0 {
		m.Name = genString(c)
	}
	return m
}

// genMessage returns a new message of any role the wire takes, and now and
// then one it refuses (an image in a system message, an unknown role).
func genMessage(c chooser) llm.Message {
	switch c.intn(10) {
	case 0:
		return llm.SystemMessage(genString(c))
	case 1, 2:
		m := llm.UserMessage(genString(c))
		switch c.intn(4) {
		case 0:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartImage, Media: genMedia(c, false)})
		case 1:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartDocument, Media: genMedia(c, true)})
		}
		return m
	case 3, 4:
		m := llm.Message{Role: llm.RoleAssistant}
		if c.intn(2) == 0 {
			m.Parts = append(m.Parts, llm.TextPart(genString(c)))
		}
		if c.intn(3) == 0 {
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: genString(c)}})
		}
		for range c.intn(3) {
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{
				ID: genString(c), Name: genString(c), Arguments: genArgs(c)}})
		}
		return m
	case 5, 6, 7:
		m := llm.Message{Role: llm.RoleTool}
		for range c.intn(3) + 1 {
			r := &llm.ToolResult{CallID: genString(c), Name: genString(c), IsError: c.intn(4) == 0}
			r.Content = append(r.Content, llm.TextPart(genString(c)))
			switch c.intn(5) {
			case 0:
				r.Content = append(r.Content, llm.Part{Kind: llm.PartImage, Media: genMedia(c, false)})
			case 1:
				r.Content = append(r.Content, llm.Part{Kind: llm.PartDocument, Media: genMedia(c, true)})
			}
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, ToolResult: r})
		}
		return m
	case 8:
		return llm.Message{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", []byte("x"))}}
	}
	if c.intn(3) == 0 {
		return llm.Message{Role: "bogus", Parts: []llm.Part{llm.TextPart("x")}}
	}
	return llm.UserMessage(genString(c))
}

// mutate changes msgs the ways a caller may between turns: in place (a
// string replaced, a byte rewritten in the arrays the request points to,
// a message overwritten in the slice) or by a new slice (messages dropped,
// a summary in place of the start). It returns the messages to send next.
func mutate(c chooser, msgs []llm.Message) []llm.Message {
	if len(msgs) == 0 {
		return msgs
	}
	i := c.intn(len(msgs))
	m := &msgs[i]
	switch c.intn(9) {
	case 0:
		msgs[i] = genMessage(c)
	case 1:
		return msgs[:i] // dropped at the end
	case 2:
		return append([]llm.Message{llm.UserMessage("summary: " + genString(c))}, msgs[i:]...)
	case 3:
		m.Role = []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool}[c.intn(4)]
	case 4:
		if m.Parts = append(m.Parts[:0:0], m.Parts...); len(m.Parts) > 0 {
			m.Parts = m.Parts[:len(m.Parts)-1]
		}
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if c.intn(2) == 0 {
			continue
		}
		switch {
		case p.Kind == llm.PartText:
			p.Text = genString(c)
		case p.ToolCall != nil:
			switch a := p.ToolCall.Arguments; {
			case len(a) > 0 && c.intn(2) == 0:
				a[c.intn(len(a))] ^= byte(c.intn(255) + 1) // in place
			case c.intn(2) == 0:
				p.ToolCall.ID = genString(c)
			default:
				p.ToolCall.Name = genString(c)
			}
		case p.Media != nil && len(p.Media.Data) > 0:
			p.Media.Data[c.intn(len(p.Media.Data))]++ // in place
		case p.ToolResult != nil:
			r := p.ToolResult
			switch k := c.intn(len(r.Content) + 1); {
			case k == len(r.Content):
				r.IsError = !r.IsError
				r.CallID = genString(c)
			case r.Content[k].Media != nil && len(r.Content[k].Media.Data) > 0:
				r.Content[k].Media.Data[0] ^= 1
			default:
				r.Content[k].Text = genString(c)
			}
		case p.Reasoning != nil:
			p.Reasoning.Text = genString(c)
		}
	}
	return msgs
}

// checkTurn encodes req with its conversation and without, and fails
// unless the bodies (or the errors) are the same.
func checkTurn(t *testing.T, c *Client, req *llm.Request) {
	t.Helper()
	want, wantErr := c.marshalRequest(&llm.Request{Messages: req.Messages, Tools: req.Tools, Extra: req.Extra})
	pieces, err := c.encodeRequest(req)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error with the conversation %v, without %v", err, wantErr)
	}
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Fatalf("body with the conversation:\n%s\nwithout:\n%s", got, want)
	}
}

// runConversation plays a conversation of turns chosen by c, checking
// every turn's body against the body encoded without a cache.
func runConversation(t *testing.T, c chooser, turns int, conv *llm.Conversation) {
	t.Helper()
	client := &Client{Model: "m"}
	tools := []llm.ToolSpec{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	var msgs []llm.Message
	for range turns {
		for range c.intn(3) + 1 {
			msgs = append(msgs, genMessage(c))
		}
		if c.intn(3) == 0 {
			msgs = mutate(c, msgs)
		}
		req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv}
		if c.intn(8) == 0 {
			req.Extra = map[string]json.RawMessage{"user": json.RawMessage(`"u"`)}
		}
		checkTurn(t, client, req)
		// Invalid messages are dropped, as a caller would after the error.
		if _, err := renderMessages(msgs); err != nil {
			msgs = msgs[:0:0]
		}
	}
}

// TestPrefixCacheSameBytes plays randomised conversations, mutated in
// place and otherwise between turns, and checks each turn's body, encoded
// with the conversation's cache, against the body encoded from scratch.
func TestPrefixCacheSameBytes(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runConversation(t, randChooser{rand.New(rand.NewPCG(seed, 21))}, 30, new(llm.Conversation))
		})
	}
}

// TestPrefixCacheSmallLimit checks the same with a bound so small that the
// cache stops keeping messages part way.
func TestPrefixCacheSmallLimit(t *testing.T) {
	for seed := range uint64(50) {
		conv := new(llm.Conversation)
		p := conv.State(prefixKey{}, func() any { return &prefixCache{limit: 2000} }).(*prefixCache)
		runConversation(t, randChooser{rand.New(rand.NewPCG(seed, 1))}, 30, conv)
		if p.size >= p.limit+200_000 {
			t.Fatalf("the cache holds %d bytes for a limit of %d", p.size, p.limit)
		}
	}
}

// FuzzPrefixCache plays conversations chosen by the fuzzer's bytes and
// checks each turn's body against the body encoded from scratch.
func FuzzPrefixCache(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 1, 2, 3, 4, 0, 0, 7, 8, 9, 1, 0, 2, 1, 1, 1})
	f.Add(bytes.Repeat([]byte{3, 0, 1, 2, 5, 6, 7, 0, 9}, 20))
	for seed := range uint64(10) {
		b := make([]byte, 200)
		r := rand.New(rand.NewPCG(seed, 2))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{b: data}
		client := &Client{Model: "m"}
		conv := new(llm.Conversation)
		var msgs []llm.Message
		for turn := 0; turn < 50 && !c.done(); turn++ {
			msgs = append(msgs, genMessage(c))
			if c.intn(2) == 0 {
				msgs = mutate(c, msgs)
			}
			checkTurn(t, client, &llm.Request{Messages: msgs, Conversation: conv})
			if _, err := renderMessages(msgs); err != nil {
				msgs = nil
			}
		}
	})
}

// TestPrefixCacheReuses checks that the cache does what it is for: a turn
// that only appends reuses the earlier turns' bytes.
func TestPrefixCacheReuses(t *testing.T) {
	c := &Client{Model: "m"}
	conv := new(llm.Conversation)
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("u")}
	first, err := c.encodeRequest(&llm.Request{Messages: msgs, Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, assistant(callPart("c1", "f", `{}`)), llm.ToolResultMessage("c1", "r"))
	second, err := c.encodeRequest(&llm.Request{Messages: msgs, Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 4 || len(second) != 4 {
		t.Fatalf("pieces %d and %d, want 4 (head, prefix, rest, tail)", len(first), len(second))
	}
	p := conversationCache(conv)
	if p.kept.len() != 4 || p.added != 4 {
		t.Error("the second turn encoded the first turn's messages again")
	}
	if !bytes.HasPrefix(second[1], first[1]) {
		t.Errorf("prefix %s does not begin with %s", second[1], first[1])
	}
	if want := `{"role":"system","content":"s"},{"role":"user","content":"u"}`; string(first[1]) != want {
		t.Errorf("prefix %s, want %s", first[1], want)
	}
}

// TestPrefixCacheKeepsSentBytes checks that bytes a body holds are never
// written again, when the conversation grows and when it changes before
// its end: the transport may still be sending them.
func TestPrefixCacheKeepsSentBytes(t *testing.T) {
	c := &Client{Model: "m"}
	conv := new(llm.Conversation)
	msgs := []llm.Message{llm.UserMessage("one"), assistant(llm.TextPart("two"))}
	sent, err := c.encodeRequest(&llm.Request{Messages: msgs, Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	saved := bytes.Clone(bytes.Join(sent, nil))
	for i := range 20 {
		if i%3 == 0 {
			msgs[1] = assistant(llm.TextPart(fmt.Sprint("changed ", i))) // in place
		}
		msgs = append(msgs, llm.UserMessage(strings.Repeat("x", i)))
		if _, err := c.encodeRequest(&llm.Request{Messages: msgs, Conversation: conv}); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(sent, nil); !bytes.Equal(got, saved) {
			t.Fatalf("turn %d rewrote the first body:\n%s\nwas\n%s", i, got, saved)
		}
	}
}

// TestPrefixCacheConcurrent runs conversations at once on one client,
// each with its own Conversation, and others sharing one Conversation
// (which must stay correct, if useless), under the race detector.
func TestPrefixCacheConcurrent(t *testing.T) {
	shared := new(llm.Conversation)
	var wg sync.WaitGroup
	for g := range uint64(8) {
		conv := new(llm.Conversation)
		if g%2 == 0 {
			conv = shared
		}
		wg.Go(func() {
			runConversation(t, randChooser{rand.New(rand.NewPCG(g, 3))}, 20, conv)
		})
	}
	wg.Wait()
}

// TestPrefixCacheOverHTTP sends a conversation's turns to a server and
// checks that each body arrives as encoded from scratch, in one piece.
func TestPrefixCacheOverHTTP(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.ContentLength != int64(len(b)) {
			t.Errorf("body of %d bytes (%v), Content-Length %d", len(b), err, r.ContentLength)
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	c := testClient(srv)
	conv := new(llm.Conversation)
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("u")}
	var want [][]byte
	for i := range 5 {
		req := &llm.Request{Messages: msgs, Conversation: conv}
		w, err := c.marshalRequest(&llm.Request{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
		if _, err := collect(c.Stream(t.Context(), req)); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, assistant(callPart(fmt.Sprint("c", i), "f", `{"i":1}`)), llm.ToolResultMessage(fmt.Sprint("c", i), "result"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != len(want) {
		t.Fatalf("%d requests, want %d", len(bodies), len(want))
	}
	for i := range want {
		if !bytes.Equal(bodies[i], want[i]) {
			t.Errorf("request %d:\n%s\nwant\n%s", i, bodies[i], want[i])
		}
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
