package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hrns-dev/hrns/internal/prefixcache/prefixtest"
	"github.com/hrns-dev/hrns/llm"
)

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

// playConversation plays a conversation of turns chosen by c (at most
// turns, fewer when c is a fuzzer's input used up), checking every turn's
// body against the body encoded without a cache.
//
// With owned, the player owns the transcript (llm.Conversation.Own): it
// calls Rewrote after every change that is not an append, and the cache
// reuses without comparing.
func playConversation(t *testing.T, c prefixtest.Chooser, turns int, owned bool) {
	t.Helper()
	client := &Client{Model: "m"}
	tools := []llm.ToolSpec{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}}
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
		if _, err := renderInput(msgs); err != nil {
			msgs = nil // dropped, as a caller would after the error
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
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 22))}, 30, false)
		})
		t.Run(fmt.Sprint(seed, "/owned"), func(t *testing.T) {
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 22))}, 30, true)
		})
	}
}

// FuzzPrefixCache plays conversations chosen by the fuzzer's bytes and
// checks each turn's body against the body encoded from scratch.
func FuzzPrefixCache(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 1, 2, 3, 4, 0, 0, 7, 8, 9, 1, 0, 2, 1, 1, 1})
	f.Add(bytes.Repeat([]byte{3, 0, 1, 2, 5, 6, 7, 0, 9}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &prefixtest.ByteChooser{B: data}
		playConversation(t, c, 50, c.Intn(2) == 0)
	})
}
