package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/internal/prefixcache/prefixtest"
	"github.com/hrns-dev/hrns/llm"
)

// checkTurn encodes req with its conversation and without, and fails
// unless the bodies (or the errors) are the same.
func checkTurn(t *testing.T, c *Client, req *llm.Request) {
	t.Helper()
	want, wantErr := c.marshalRequest(&llm.Request{Messages: req.Messages, Tools: req.Tools, Extra: req.Extra, ToolChoice: req.ToolChoice, ParallelToolCalls: req.ParallelToolCalls})
	pieces, err := c.encodeRequest(req)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error with the conversation %v, without %v", err, wantErr)
	}
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Fatalf("body with the conversation:\n%s\nwithout:\n%s", got, want)
	}
}

// runConversation plays a conversation of turns chosen by c, checking
// every turn's body against the body encoded without a cache. When conv is
// owned (llm.Conversation.Own), the player is the owner: it calls Rewrote
// after every change that is not an append, and only then.
func runConversation(t *testing.T, c prefixtest.Chooser, turns int, conv *llm.Conversation) {
	t.Helper()
	client := &Client{Model: "m"}
	tools := []llm.ToolSpec{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	_, owned := conv.Version()
	var msgs []llm.Message
	for range turns {
		for range c.Intn(3) + 1 {
			msgs = append(msgs, prefixtest.Message(c))
		}
		if c.Intn(3) == 0 {
			msgs = prefixtest.Mutate(c, msgs)
			if owned {
				conv.Rewrote()
			}
		}
		req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv}
		if c.Intn(8) == 0 {
			req.Extra = map[string]json.RawMessage{"user": json.RawMessage(`"u"`)}
		}
		checkTurn(t, client, req)
		// Invalid messages are dropped, as a caller would after the error.
		if _, err := renderMessages(msgs); err != nil {
			msgs = msgs[:0:0]
			if owned {
				conv.Rewrote()
			}
		}
	}
}

// ownedConversation returns a conversation whose transcript the test owns.
func ownedConversation() *llm.Conversation {
	conv := new(llm.Conversation)
	conv.Own()
	return conv
}

// TestPrefixCacheSameBytes plays randomised conversations, mutated in
// place and otherwise between turns, and checks each turn's body, encoded
// with the conversation's cache, against the body encoded from scratch.
func TestPrefixCacheSameBytes(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 21))}, 30, new(llm.Conversation))
		})
	}
}

// TestPrefixCacheOwnedSameBytes plays the same conversations with an owner
// that reports its rewrites (as the agent loop does): the cache then
// reuses without comparing, and every body must still be the body encoded
// from scratch, through in-place edits, dropped and replaced messages.
func TestPrefixCacheOwnedSameBytes(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 21))}, 30, ownedConversation())
		})
	}
}

// TestPrefixCacheOwnedTrusts checks that an owned conversation's cache
// does not read the messages it kept (which is what makes it flat in
// length): an in-place change the owner does not report is not seen, one
// it reports with Rewrote is, and a transcript shorter than the last one
// is taken as a rewrite even unreported.
func TestPrefixCacheOwnedTrusts(t *testing.T) {
	c := &Client{Model: "m"}
	conv := ownedConversation()
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("one")}
	body := func() string {
		t.Helper()
		pieces, err := c.encodeRequest(&llm.Request{Messages: msgs, Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		return string(bytes.Join(pieces, nil))
	}
	fresh := func() string {
		t.Helper()
		b, err := c.marshalRequest(&llm.Request{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	body()
	msgs[1].Parts[0].Text = "ONE" // in place, unreported: a breach of the contract
	msgs = append(msgs, llm.UserMessage("two"))
	if got := body(); !strings.Contains(got, `"one"`) || strings.Contains(got, `"ONE"`) {
		t.Fatalf("the owned cache read a kept message: %s", got)
	}
	conv.Rewrote()
	if got, want := body(), fresh(); got != want {
		t.Fatalf("after Rewrote:\n%s\nwant\n%s", got, want)
	}
	msgs = []llm.Message{llm.UserMessage("shorter")} // unreported, but fewer messages
	if got, want := body(), fresh(); got != want {
		t.Fatalf("after a shorter transcript:\n%s\nwant\n%s", got, want)
	}
	if p := prefixcache.For(conv, prefixKey{}); p.Len() != 1 {
		t.Errorf("%d messages kept, want 1", p.Len())
	}
}

// TestPrefixCacheSmallLimit checks the same with a bound so small that the
// cache stops keeping messages part way.
func TestPrefixCacheSmallLimit(t *testing.T) {
	for seed := range uint64(50) {
		conv := new(llm.Conversation)
		p := conv.State(prefixKey{}, func() any { return prefixcache.New(2000) }).(*prefixcache.Cache)
		runConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 1))}, 30, conv)
		if p.Size() > 2000 {
			t.Fatalf("the cache holds %d bytes for a limit of 2000", p.Size())
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
		c := &prefixtest.ByteChooser{B: data}
		client := &Client{Model: "m"}
		conv := new(llm.Conversation)
		owned := c.Intn(2) == 0 // the player owns the transcript and reports rewrites
		if owned {
			conv.Own()
		}
		var msgs []llm.Message
		for turn := 0; turn < 50 && !c.Done(); turn++ {
			msgs = append(msgs, prefixtest.Message(c))
			if c.Intn(2) == 0 {
				msgs = prefixtest.Mutate(c, msgs)
				if owned {
					conv.Rewrote()
				}
			}
			checkTurn(t, client, &llm.Request{Messages: msgs, Conversation: conv})
			if _, err := renderMessages(msgs); err != nil {
				msgs = nil
				if owned {
					conv.Rewrote()
				}
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
	if p := prefixcache.For(conv, prefixKey{}); p.Len() != 4 {
		t.Errorf("%d messages kept, want 4", p.Len())
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
			runConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(g, 3))}, 20, conv)
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

// FuzzTextMessageEncoding holds appendTextMessage, the hand-written
// encoding of messages with string content, to encoding/json's encoding of
// the same wireMessage (HTML escaping off), after a comma or first.
func FuzzTextMessageEncoding(f *testing.F) {
	f.Add("tool", "line 1\nline 2 \"quoted\" <b>&amp;</b> é漢🙂 \u2028", "call_1", false)
	f.Add("system", "\xff\xfe\x00\x1f\\", "", true)
	f.Add("user", strings.Repeat("abcdefgh", 20), "", false)
	f.Fuzz(func(t *testing.T, role, content, id string, first bool) {
		m := wireMessage{Role: role, Content: content, ToolCallID: id}
		if !appendsTextMessage(&m) {
			t.Fatal("a message with string content and no calls is not a text message")
		}
		var app prefixcache.Appender
		want, err := app.Append([]byte("[x"), first, &m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendTextMessage([]byte("[x"), first, &m); !bytes.Equal(got, want) {
			t.Fatalf("appendTextMessage = %s, want %s", got, want)
		}
	})
}

// TestToolsCacheSameBytes changes a conversation's tools between turns (a
// schema rewritten in place, a description, a tool added, removed, none,
// a name that needs escaping) and checks every body against the body
// encoded without the conversation: the encoded "tools" field is reused
// only while the tools render the same.
func TestToolsCacheSameBytes(t *testing.T) {
	client := &Client{Model: "m"}
	conv := ownedConversation()
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tools := []llm.ToolSpec{{Name: "read", Description: "reads", InputSchema: schema}}
	msgs := []llm.Message{llm.UserMessage("hi")}
	turn := func(tools []llm.ToolSpec) {
		t.Helper()
		msgs = append(msgs, llm.UserMessage("more"))
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv})
	}
	turn(tools)
	turn(tools)
	copy(schema[len(`{"type":"object","properties":{"`):], "b") // in place, same length
	turn(tools)
	tools[0].Description = "reads a file"
	turn(tools)
	tools = append(tools, llm.ToolSpec{Name: "write <&>", InputSchema: json.RawMessage(" { \"type\" : \"object\" } ")})
	turn(tools)
	turn(tools[:1])
	turn(nil)
	turn([]llm.ToolSpec{{Name: "empty"}})
	turn(tools)
	req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv, Extra: map[string]json.RawMessage{"user": json.RawMessage(`"u"`)}}
	checkTurn(t, client, req)
	// Kept tools (not rendered again) with the fields that go with tools.
	no := false
	for range 2 {
		msgs = append(msgs, llm.UserMessage("more"))
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv,
			ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}, ParallelToolCalls: &no})
	}
	msgs = append(msgs, llm.UserMessage("more"))
	checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv,
		ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool}}) // no name: the same error
	// Tools that do not render fail as they would without the cache,
	// after kept ones and before.
	bad := append(slices.Clone(tools), llm.ToolSpec{Name: "bad", InputSchema: json.RawMessage(`{"type":`)})
	turn(bad)
	turn(tools)
	turn([]llm.ToolSpec{{InputSchema: schema}})
	turn(tools)
}
