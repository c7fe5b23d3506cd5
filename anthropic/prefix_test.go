package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/internal/prefixcache/prefixtest"
	"github.com/hrns-dev/hrns/llm"
)

// checkTurn encodes req with its conversation and without, and fails
// unless the bodies and beta flags (or the errors) are the same. It returns
// the body.
func checkTurn(t *testing.T, c *Client, req *llm.Request) []byte {
	t.Helper()
	scratch := *req
	scratch.Conversation = nil
	want, wantBeta, wantErr := c.encodeRequest(&scratch)
	pieces, beta, err := c.encodeRequest(req)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error with the conversation %v, without %v", err, wantErr)
	}
	if len(want) > 1 {
		t.Fatalf("%d pieces without a conversation, want 1", len(want))
	}
	got := bytes.Join(pieces, nil)
	if !bytes.Equal(got, bytes.Join(want, nil)) || beta != wantBeta {
		t.Fatalf("body with the conversation (beta %q):\n%s\nwithout (beta %q):\n%s", beta, got, wantBeta, bytes.Join(want, nil))
	}
	return got
}

// cachePolicies are the clients' policies the tests play with.
var cachePolicies = []*CachePolicy{nil, {}, {Conversation: true}, {System: true, Tools: true}, {Conversation: true, TTL: "1h"}}

// playConversation plays a conversation of turns chosen by c (at most
// turns, fewer when c is a fuzzer's input used up), checking every turn's
// body against the body encoded without a cache: messages of every kind,
// merged turns, empty ones, system messages anywhere, cache breakpoints
// moving with the policy of each request, in-place edits and other
// changes.
//
// With owned, the player owns the transcript (llm.Conversation.Own): it
// calls Rewrote after every change that is not an append, and the cache
// reuses without comparing.
func playConversation(t *testing.T, c prefixtest.Chooser, turns int, owned bool) {
	t.Helper()
	client := &Client{Model: "m", Cache: cachePolicies[c.Intn(len(cachePolicies))]}
	tools := []llm.ToolSpec{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	if c.Intn(4) == 0 {
		tools = append(tools, llm.ToolSpec{Name: "computer", Computer: &llm.ComputerSpec{Width: 800, Height: 600}})
	}
	conv := new(llm.Conversation)
	if owned {
		conv.Own()
	}
	var msgs []llm.Message
	for range turns {
		if b, ok := c.(*prefixtest.ByteChooser); ok && b.Done() {
			return
		}
		for range c.Intn(3) + 1 {
			msgs = append(msgs, prefixtest.Rich(c, msgs))
		}
		if c.Intn(3) == 0 {
			msgs = prefixtest.Mutate(c, msgs)
			if owned {
				conv.Rewrote()
			}
		}
		req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv}
		switch c.Intn(8) {
		case 0:
			req.Extra = map[string]json.RawMessage{"metadata": json.RawMessage(`{"user_id":"u"}`)}
		case 1:
			req.Cache = &llm.CacheHint{Off: true}
		case 2:
			req.Cache = &llm.CacheHint{Long: true}
		case 3:
			req.ResponseFormat = &llm.ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}
		}
		checkTurn(t, client, req)
		if _, _, err := renderConversation(msgs); err != nil {
			// The last messages dropped until the rest is valid, as a
			// caller would after the error: the conversation goes on.
			for err != nil {
				msgs = msgs[:len(msgs)-1]
				_, _, err = renderConversation(msgs)
			}
			if owned {
				conv.Rewrote()
			}
		}
	}
}

// TestPrefixCacheSameBytes plays randomised conversations, mutated in
// place and otherwise between turns, and checks each turn's body, encoded
// with the conversation's cache, against the body encoded from scratch.
func TestPrefixCacheSameBytes(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 23))}, 30, false)
		})
		t.Run(fmt.Sprint(seed, "/owned"), func(t *testing.T) {
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 23))}, 30, true)
		})
	}
}

// FuzzPrefixCache plays conversations chosen by the fuzzer's bytes and
// checks each turn's body against the body encoded from scratch.
func FuzzPrefixCache(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 1, 2, 3, 4, 0, 0, 7, 8, 9, 1, 0, 2, 1, 1, 1})
	f.Add(bytes.Repeat([]byte{3, 0, 1, 2, 5, 6, 7, 0, 9}, 20))
	for seed := range uint64(10) {
		b := make([]byte, 300)
		r := rand.New(rand.NewPCG(seed, 3))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &prefixtest.ByteChooser{B: data}
		playConversation(t, c, 50, c.Intn(2) == 0)
	})
}

// loopConversation plays a long conversation shaped as an agent loop's,
// owned as the loop owns it: a system prompt, a task, then turns of
// thinking and tool calls answered by tool results (now and then an
// image, a user message the turn's hook adds, several calls at once, a
// text before the calls), and now and then a compaction that replaces
// the start with a summary (Rewrote). It checks every turn's body
// against the body encoded from scratch, and returns the conversation.
func loopConversation(t *testing.T, seed uint64, turns int, client *Client) *llm.Conversation {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 4))
	conv := new(llm.Conversation)
	conv.Own()
	tools := []llm.ToolSpec{{Name: "read", Description: "Reads a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	msgs := []llm.Message{llm.SystemMessage("You are terse."), llm.UserMessage("Read the notes.")}
	for k := range turns {
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv})
		var parts []llm.Part
		if r.IntN(2) == 0 {
			parts = append(parts, thinkingPart("thinking "+strconv.Itoa(k), "sig"+strconv.Itoa(k)))
		}
		if r.IntN(5) == 0 {
			parts = append(parts, llm.TextPart("Reading."))
		}
		var results []llm.Part
		for c := range r.IntN(3) + 1 {
			id := fmt.Sprintf("call_%d_%d", k, c)
			parts = append(parts, callPart(id, "read", `{"path":"notes/`+id+`"}`))
			res := &llm.ToolResult{CallID: id, Name: "read", Content: []llm.Part{llm.TextPart(strings.Repeat("line of notes\n", r.IntN(40)))}}
			if r.IntN(10) == 0 {
				res.Content = append(res.Content, llm.ImagePart("image/png", []byte("\x89PNG\r\n\x1a\n"+id)))
			}
			results = append(results, llm.Part{Kind: llm.PartToolResult, ToolResult: res})
		}
		msgs = append(msgs, assistant(parts...), llm.Message{Role: llm.RoleTool, Parts: results})
		if r.IntN(8) == 0 {
			msgs = append(msgs, llm.UserMessage("Turn "+strconv.Itoa(k)+" of the budget."))
		}
		if r.IntN(40) == 0 && len(msgs) > 10 {
			// Compaction: a summary in place of the start.
			keep := msgs[len(msgs)-4:]
			msgs = append([]llm.Message{msgs[0], llm.UserMessage("Summary of turns so far.")}, keep...)
			conv.Rewrote()
		}
	}
	checkTurn(t, client, &llm.Request{Messages: append(msgs, assistant(llm.TextPart("Done."))), Tools: tools, Conversation: conv})
	return conv
}

// TestPrefixCacheLongLoop plays long conversations shaped as an agent
// loop's, with each cache policy, and checks that the cache reuses all but
// the last turns: a turn encodes what is new and the turns whose
// breakpoints move.
func TestPrefixCacheLongLoop(t *testing.T) {
	for i, policy := range cachePolicies {
		for seed := range uint64(2) {
			conv := loopConversation(t, seed+10*uint64(i), 300, &Client{Model: "m", Cache: policy})
			if n := prefixcache.For(conv, prefixKey{}).Len(); n < 4 {
				t.Errorf("policy %v, seed %d: %d messages kept", policy, seed, n)
			}
		}
	}
}

// TestPrefixCacheKeepsAllButTheTail checks what the cache keeps of an agent
// loop's conversation, owned or not: every message before the last user
// turn before the last turn, whose breakpoint moves at the next turn; and
// that it reuses what it kept, not encoding it again.
func TestPrefixCacheKeepsAllButTheTail(t *testing.T) {
	for _, owned := range []bool{false, true} {
		c := &Client{Model: "m"}
		conv := new(llm.Conversation)
		if owned {
			conv.Own()
		}
		msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("task")}
		var first *byte
		for k := range 6 {
			id := "c" + strconv.Itoa(k)
			msgs = append(msgs, assistant(callPart(id, "f", `{}`)), llm.ToolResultMessage(id, "r"+strconv.Itoa(k)))
			req := &llm.Request{Messages: msgs, Conversation: conv}
			body := checkTurn(t, c, req)
			// The tail: the tool results before the last assistant turn,
			// that turn and the last tool results.
			if got, want := prefixcache.For(conv, prefixKey{}).Len(), len(msgs)-3; got != want {
				t.Errorf("owned %v, turn %d: %d messages kept, want %d", owned, k, got, want)
			}
			pieces, _, err := c.encodeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			// The first request keeps only the system message, which
			// writes nothing in the list.
			if k == 1 {
				first = &pieces[1][0]
			} else if k > 1 && &pieces[1][0] != first {
				t.Errorf("owned %v, turn %d: the first turns were encoded again", owned, k)
			}
			if k == 5 {
				if n := strings.Count(string(body), `"cache_control"`); n != 3 {
					t.Errorf("%d breakpoints, want 3 (system, two turns):\n%s", n, body)
				}
			}
		}
	}
}

// TestPrefixCacheGoldens encodes the requests the golden files pin with a
// conversation, growing a message at a time, and checks each body against
// the body encoded from scratch, and the last against the golden file.
func TestPrefixCacheGoldens(t *testing.T) {
	for name, req := range map[string]*llm.Request{
		"full.request.json":          fullRequest(),
		"knobs.request.json":         knobsRequest(),
		"format_strict.request.json": formatRequest(true),
		"format_open.request.json":   formatRequest(false),
	} {
		t.Run(name, func(t *testing.T) {
			c := &Client{}
			if name == "full.request.json" {
				c.APIKey = "sk-ant-test"
			}
			conv := new(llm.Conversation)
			conv.Own()
			all := req.Messages
			var body []byte
			for n := range len(all) + 1 {
				turn := *req
				turn.Messages, turn.Conversation = all[:n], conv
				body = checkTurn(t, c, &turn)
			}
			checkGolden(t, name, body)
		})
	}
}

// TestPrefixCacheEncodesEachMessageOnce plays agent loops, owned and not,
// with each cache policy, and checks that each message is rendered and
// encoded once in the conversation's life, though the last three turns are
// written at every request (their breakpoints move): a tool result is
// memoized while it is in the tail, then kept.
func TestPrefixCacheEncodesEachMessageOnce(t *testing.T) {
	for _, owned := range []bool{false, true} {
		for _, policy := range cachePolicies {
			r := rand.New(rand.NewPCG(7, 7))
			c := &Client{Model: "m", Cache: policy}
			conv := new(llm.Conversation)
			if owned {
				conv.Own()
			}
			msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("task")}
			encodes := 0
			for k := range 40 {
				id := "c" + strconv.Itoa(k)
				var parts []llm.Part
				if r.IntN(2) == 0 {
					parts = append(parts, thinkingPart("thinking", "sig"))
				}
				msgs = append(msgs, assistant(append(parts, callPart(id, "f", `{"k":1}`))...), llm.ToolResultMessage(id, strings.Repeat("r", r.IntN(100))))
				if r.IntN(5) == 0 {
					msgs = append(msgs, llm.UserMessage("a nudge"))
				}
				req := &llm.Request{Messages: msgs, Conversation: conv}
				checkTurn(t, c, req)
				// checkTurn encoded it: the request again encodes nothing.
				var e *turnEncoder
				if _, _, err := c.encodeRequestWith(req, &e); err != nil {
					t.Fatal(err)
				}
				if e.encodes != 0 {
					t.Errorf("owned %v, policy %v, turn %d: the same request again encoded %d messages", owned, policy, k, e.encodes)
				}
				encodes = len(msgs)
			}
			// Count them afresh over a whole run.
			conv = new(llm.Conversation)
			if owned {
				conv.Own()
			}
			total := 0
			for n := 2; n <= len(msgs); n++ {
				var e *turnEncoder
				if _, _, err := c.encodeRequestWith(&llm.Request{Messages: msgs[:n], Conversation: conv}, &e); err != nil {
					t.Fatal(err)
				}
				total += e.encodes
			}
			if total != encodes {
				t.Errorf("owned %v, policy %v: %d messages encoded over a run of %d", owned, policy, total, encodes)
			}
		}
	}
}

// TestPrefixCacheGrownSameAsWhole grows conversations of every kind of
// message one message at a time, with each cache policy, and checks each
// request's body against the body encoded whole, and, decoded, that the
// breakpoints are where the policy puts them: on the last block (thinking
// aside) of the last turn and of the last user turn before it, and
// nowhere else among the messages.
func TestPrefixCacheGrownSameAsWhole(t *testing.T) {
	for seed := range uint64(40) {
		ch := prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 41))}
		var all []llm.Message
		for range 30 {
			all = append(all, prefixtest.Rich(ch, all))
		}
		for _, policy := range cachePolicies {
			c := &Client{Model: "m", Cache: policy}
			conv := new(llm.Conversation)
			conv.Own()
			for n := range len(all) + 1 {
				msgs := all[:n]
				if _, _, err := renderConversation(msgs); err != nil {
					break // the conversation fails from here on
				}
				body := checkTurn(t, c, &llm.Request{Messages: msgs, Conversation: conv})
				var w struct {
					Messages []struct {
						Role    string `json:"role"`
						Content []struct {
							Type         string          `json:"type"`
							CacheControl json.RawMessage `json:"cache_control"`
						} `json:"content"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(body, &w); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				want := map[[2]int]bool{}
				markLast := func(i int) {
					blocks := w.Messages[i].Content
					for k := len(blocks) - 1; k >= 0; k-- {
						if typ := blocks[k].Type; typ != typeThinking && typ != typeRedactedThinking {
							want[[2]int{i, k}] = true
							return
						}
					}
				}
				if p := policy; (p == nil || p.Conversation) && len(w.Messages) > 0 {
					last := len(w.Messages) - 1
					markLast(last)
					for i := last - 1; i >= 0; i-- {
						if w.Messages[i].Role == "user" {
							markLast(i)
							break
						}
					}
				}
				for i, m := range w.Messages {
					if i > 0 && m.Role == w.Messages[i-1].Role {
						t.Fatalf("seed %d, %d messages: turns %d and %d are both %s", seed, n, i-1, i, m.Role)
					}
					for k, b := range m.Content {
						if got := b.CacheControl != nil; got != want[[2]int{i, k}] {
							t.Fatalf("seed %d, policy %v, %d messages: block %d of turn %d has a breakpoint %v, want %v:\n%s", seed, policy, n, k, i, got, !got, body)
						}
					}
				}
			}
		}
	}
}

// TestPrefixCacheConcurrentRequests encodes the requests of one
// conversation from two goroutines at once (run with -race): the cache
// and its memo are only touched under the cache's lock, and every body is
// the body encoded from scratch.
func TestPrefixCacheConcurrentRequests(t *testing.T) {
	c := &Client{Model: "m"}
	conv := new(llm.Conversation)
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("task")}
	var reqs []*llm.Request
	for k := range 30 {
		id := "c" + strconv.Itoa(k)
		msgs = append(msgs, assistant(callPart(id, "f", `{}`)), llm.ToolResultMessage(id, "r"+strconv.Itoa(k)))
		reqs = append(reqs, &llm.Request{Messages: msgs, Conversation: conv})
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, req := range reqs {
				scratch := *req
				scratch.Conversation = nil
				want, err := c.marshalRequest(&scratch)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := c.marshalRequest(req)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("body with the conversation (%v):\n%s\nwithout:\n%s", err, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// toolsPiece returns the piece of a body that is the kept tools field, nil
// for none.
func toolsPiece(pieces [][]byte) []byte {
	for _, p := range pieces {
		if bytes.HasPrefix(p, []byte(`,"tools":`)) {
			return p
		}
	}
	return nil
}

// TestToolsCacheSameBytes changes a conversation's tools and what else
// renders them between turns (a schema rewritten in place, a description,
// a tool added, a computer tool, the model, the breakpoint's TTL or none,
// extra fields) and checks every body against the body encoded without the
// conversation, and that a turn whose tools render as the last's reuses
// the field encoded then.
func TestToolsCacheSameBytes(t *testing.T) {
	c := &Client{Model: "claude-sonnet-4-5"}
	conv := new(llm.Conversation)
	conv.Own()
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tools := []llm.ToolSpec{{Name: "read", Description: "reads", InputSchema: schema}}
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("hi")}
	var last []byte
	turn := func(req llm.Request, reused bool) {
		t.Helper()
		msgs = append(msgs, assistant(llm.TextPart("ok")), llm.UserMessage("more"))
		req.Messages, req.Conversation = msgs, conv
		checkTurn(t, c, &req)
		pieces, _, err := c.encodeRequest(&req)
		if err != nil {
			t.Fatal(err)
		}
		field := toolsPiece(pieces)
		if len(req.Extra) == 0 && field == nil {
			t.Fatalf("no kept tools field among the pieces")
		}
		if got := field != nil && last != nil && &field[0] == &last[0]; got != reused {
			t.Fatalf("tools field reused %v, want %v", got, reused)
		}
		last = field
	}
	turn(llm.Request{Tools: tools}, false)
	turn(llm.Request{Tools: tools}, true)
	turn(llm.Request{Tools: tools}, true)
	copy(schema[len(`{"type":"object","properties":{"`):], "b") // in place, same length
	turn(llm.Request{Tools: tools}, false)
	tools[0].Description = "reads a file"
	turn(llm.Request{Tools: tools}, false)
	turn(llm.Request{Tools: tools, Cache: &llm.CacheHint{Long: true}}, false)
	turn(llm.Request{Tools: tools, Cache: &llm.CacheHint{Long: true}}, true)
	turn(llm.Request{Tools: tools, Cache: &llm.CacheHint{Off: true}}, false)
	turn(llm.Request{Tools: tools}, false)
	tools = append(tools, llm.ToolSpec{Name: "computer", Computer: &llm.ComputerSpec{Width: 800, Height: 600}})
	turn(llm.Request{Tools: tools}, false)
	turn(llm.Request{Tools: tools}, true)
	turn(llm.Request{Tools: tools, Model: "claude-opus-4-5"}, false)
	turn(llm.Request{Tools: tools, Model: "claude-opus-4-5", ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}}, true)
	tools[1].Computer.Width = 1024 // in place
	turn(llm.Request{Tools: tools, Model: "claude-opus-4-5"}, false)
	turn(llm.Request{Tools: tools, Model: "claude-3-opus-20240229"}, false)
	last = nil
	turn(llm.Request{Tools: tools, Extra: map[string]json.RawMessage{"metadata": json.RawMessage(`{"user_id":"u"}`)}}, false)
	turn(llm.Request{Tools: tools[:1]}, false)
	turn(llm.Request{Tools: []llm.ToolSpec{{Name: "a\x00<b>", Description: "\u2028", InputSchema: json.RawMessage(" { } ")}}}, false)
	turn(llm.Request{Tools: []llm.ToolSpec{{Name: "a\x00<b>", Description: "\u2028", InputSchema: json.RawMessage(" { } ")}}}, true)
	// A tool named as the placeholder's is encoded as itself.
	turn(llm.Request{Tools: []llm.ToolSpec{{Name: "\x00"}}}, false)
	turn(llm.Request{Tools: []llm.ToolSpec{{Name: "\x00"}}}, true)
}

// TestPlaceholderTools checks that the placeholder of kept tools encodes
// as placeholderField.
func TestPlaceholderTools(t *testing.T) {
	w := messagesRequest{Model: "m", Messages: []wireMessage{}, Tools: placeholderTools}
	body, err := prefixcache.Body("anthropic", &w, nil, "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body[0], append([]byte(`"messages":[]`), placeholderField...)) {
		t.Fatalf("placeholder tools encode as %s, not %s after the messages", body[0], placeholderField)
	}
}
