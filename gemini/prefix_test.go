package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/internal/prefixcache/prefixtest"
	"github.com/hrns-dev/hrns/llm"
)

// checkTurn encodes req with its conversation and without, and fails
// unless the bodies (or the errors) are the same. It returns the body.
func checkTurn(t *testing.T, c *Client, req *llm.Request) []byte {
	t.Helper()
	scratch := *req
	scratch.Conversation = nil
	want, wantErr := c.encodeRequest(&scratch)
	pieces, err := c.encodeRequest(req)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error with the conversation %v, without %v", err, wantErr)
	}
	if len(want) > 1 {
		t.Fatalf("%d pieces without a conversation, want 1", len(want))
	}
	got := bytes.Join(pieces, nil)
	if !bytes.Equal(got, bytes.Join(want, nil)) {
		t.Fatalf("body with the conversation:\n%s\nwithout:\n%s", got, bytes.Join(want, nil))
	}
	return got
}

// playConversation plays a conversation of turns chosen by c (at most
// turns, fewer when c is a fuzzer's input used up), checking every turn's
// body against the body encoded without a cache: messages of every kind,
// merged contents, empty ones, system messages anywhere, tool results
// that name no tool and take the name of an earlier call, in-place edits
// and other changes.
//
// With owned, the player owns the transcript (llm.Conversation.Own): it
// calls Rewrote after every change that is not an append, and the cache
// reuses without comparing.
func playConversation(t *testing.T, c prefixtest.Chooser, turns int, owned bool) {
	t.Helper()
	client := &Client{Model: "m"}
	tools := []llm.ToolSpec{{Name: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
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
		switch c.Intn(6) {
		case 0:
			req.Extra = map[string]json.RawMessage{"safetySettings": json.RawMessage(`[]`)}
		case 1:
			req.ResponseFormat = &llm.ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}
		}
		checkTurn(t, client, req)
		if _, _, err := renderContents(msgs); err != nil {
			// The last messages dropped until the rest is valid, as a
			// caller would after the error: the conversation goes on.
			for err != nil {
				msgs = msgs[:len(msgs)-1]
				_, _, err = renderContents(msgs)
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
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 24))}, 30, false)
		})
		t.Run(fmt.Sprint(seed, "/owned"), func(t *testing.T) {
			playConversation(t, prefixtest.RandChooser{R: rand.New(rand.NewPCG(seed, 24))}, 30, true)
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

// TestPrefixCacheLongLoop plays long conversations shaped as an agent
// loop's, owned as the loop owns it: a system prompt, a task, then turns
// of thoughts and tool calls (signed, with and without the API's IDs)
// answered by tool results (now and then an image, or no tool name, a user
// message the turn's hook adds, several calls at once), and now and then
// a compaction that replaces the start with a summary (Rewrote). It
// checks every turn's body against the body encoded from scratch.
func TestPrefixCacheLongLoop(t *testing.T) {
	for seed := range uint64(3) {
		r := rand.New(rand.NewPCG(seed, 4))
		client := &Client{Model: "m"}
		conv := new(llm.Conversation)
		conv.Own()
		tools := []llm.ToolSpec{{Name: "read", Description: "Reads a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
		msgs := []llm.Message{llm.SystemMessage("You are terse."), llm.UserMessage("Read the notes.")}
		for k := range 300 {
			checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv})
			var parts []llm.Part
			if r.IntN(2) == 0 {
				parts = append(parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "thought " + strconv.Itoa(k), Signature: "sig"}})
			}
			var results []llm.Part
			for c := range r.IntN(3) + 1 {
				id := fmt.Sprintf("call_%d_%d", k, c)
				if r.IntN(3) == 0 {
					id = generatedIDPrefix + id
				}
				parts = append(parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "read", Arguments: []byte(`{"path":"` + id + `"}`), Signature: "s" + id}})
				res := &llm.ToolResult{CallID: id, Name: "read", Content: []llm.Part{llm.TextPart(strings.Repeat("line of notes\n", r.IntN(40)))}}
				if r.IntN(4) == 0 {
					res.Name = "" // the call's
				}
				if r.IntN(10) == 0 {
					res.Content = append(res.Content, llm.ImagePart("image/png", []byte("\x89PNG\r\n\x1a\n"+id)))
				}
				results = append(results, llm.Part{Kind: llm.PartToolResult, ToolResult: res})
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: parts}, llm.Message{Role: llm.RoleTool, Parts: results})
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
		checkTurn(t, client, &llm.Request{Messages: append(msgs, llm.AssistantMessage("Done.")), Tools: tools, Conversation: conv})
	}
}

// TestPrefixCacheKeepsAllButTheTail checks what the cache keeps of an agent
// loop's conversation, owned or not: every message before the last
// content, which a message appended later may merge with; and that it
// reuses what it kept, not encoding it again.
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
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "f"}}}},
				llm.ToolResultMessage(id, "r"+strconv.Itoa(k)))
			req := &llm.Request{Messages: msgs, Conversation: conv}
			checkTurn(t, c, req)
			if got, want := prefixcache.For(conv, prefixKey{}).Len(), len(msgs)-1; got != want {
				t.Errorf("owned %v, turn %d: %d messages kept, want %d", owned, k, got, want)
			}
			pieces, err := c.encodeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = &pieces[1][0]
			} else if &pieces[1][0] != first {
				t.Errorf("owned %v, turn %d: the first contents were encoded again", owned, k)
			}
		}
	}
}

// TestPrefixCacheGoldens encodes the requests the golden files pin with a
// conversation, growing a message at a time, and checks each body against
// the body encoded from scratch, and the last against the golden file.
func TestPrefixCacheGoldens(t *testing.T) {
	for name, req := range map[string]*llm.Request{
		"multiturn.request.json": multiTurnRequest(),
		"knobs.request.json":     knobsRequest(),
		"tools.request.json": {Model: "gemini-2.5-flash", Messages: []llm.Message{llm.UserMessage("go")}, Tools: toolSchemas,
			ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "read_file"}},
	} {
		t.Run(name, func(t *testing.T) {
			conv := new(llm.Conversation)
			conv.Own()
			all := req.Messages
			var body []byte
			for n := range len(all) + 1 {
				turn := *req
				turn.Messages, turn.Conversation = all[:n], conv
				body = checkTurn(t, &Client{}, &turn)
			}
			golden(t, name, body)
		})
	}
}

// TestToolsCacheSameBytes changes a conversation's tools between turns (a
// schema rewritten in place, a description, a name, the order, a tool
// added, removed, none, a name that needs escaping, the tool choice) and
// checks every body against the body encoded without the conversation:
// the encoded "tools" field is reused only while the tools render the
// same.
func TestToolsCacheSameBytes(t *testing.T) {
	client := &Client{}
	conv := new(llm.Conversation)
	conv.Own()
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tools := []llm.ToolSpec{{Name: "read", Description: "reads", InputSchema: schema}}
	// The system instruction holds the placeholder's bytes: they are
	// escaped there, and the kept field goes after it.
	msgs := []llm.Message{llm.SystemMessage(`,"tools":[{"functionDeclarations":null}]`), llm.UserMessage("hi")}
	turn := func(tools []llm.ToolSpec) {
		t.Helper()
		msgs = append(msgs, llm.AssistantMessage("ok"), llm.UserMessage("more"))
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv})
	}
	turn(tools)
	turn(tools)
	if toolsFor(conv).Kept(tools, "") == nil {
		t.Fatal("the tools of the last turn are not kept")
	}
	copy(schema[len(`{"type":"object","properties":{"`):], "b") // in place, same length
	turn(tools)
	tools[0].Description = "reads a file"
	turn(tools)
	tools[0].Name = "reed"
	turn(tools)
	tools = append(tools, llm.ToolSpec{Name: "write <&>", InputSchema: json.RawMessage(" { \"type\" : \"object\", \"properties\": {\"x\": {\"type\": [\"string\", \"null\"]}} } ")})
	turn(tools)
	turn([]llm.ToolSpec{tools[1], tools[0]}) // the order
	turn(tools)
	turn(tools[:1])
	turn(nil)
	turn([]llm.ToolSpec{{Name: "empty"}})
	turn(tools)
	req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv, Extra: map[string]json.RawMessage{"safetySettings": json.RawMessage(`[]`)}}
	checkTurn(t, client, req)
	// Kept tools (not rendered again) with the fields that go with tools
	// and after them.
	for _, tc := range []llm.ToolChoice{{Mode: llm.ToolChoiceRequired}, {Mode: llm.ToolChoiceRequired}, {Mode: llm.ToolChoiceNone},
		{Mode: llm.ToolChoiceTool, Name: "reed"}, {Mode: llm.ToolChoiceTool}, {Mode: "bogus"}, {}} {
		msgs = append(msgs, llm.UserMessage("more"))
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv, ToolChoice: tc,
			ResponseFormat: &llm.ResponseFormat{Schema: json.RawMessage(`{"type":"object","properties":{"tools":{"type":"string","default":{"a":1,"tools":[{"functionDeclarations":null}]}}}}`)}})
	}
	// Tools that do not render fail as they would without the cache,
	// after kept ones and before.
	bad := append(slices.Clone(tools), llm.ToolSpec{Name: "bad", InputSchema: json.RawMessage(`{"type":`)})
	turn(bad)
	turn(tools)
	turn([]llm.ToolSpec{{InputSchema: schema}})
	turn(tools)
	turn(append(slices.Clone(tools), llm.ToolSpec{Name: "deep", InputSchema: json.RawMessage(strings.Repeat(`{"type":"object","properties":{"a":`, 40) + `{}` + strings.Repeat(`}}`, 40))}))
	turn(tools)
}

// TestToolsCacheRandom plays randomised sequences of requests whose tools
// change or not between turns, in every way the "tools" field depends on
// (in place or not), with the tool choice, extra fields and system
// messages changing too, and checks every body against the body encoded
// from scratch.
func TestToolsCacheRandom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 36))
		client := &Client{}
		conv := new(llm.Conversation)
		if r.IntN(2) == 0 {
			conv.Own()
		}
		schemas := []string{
			`{"type":"object","properties":{"path":{"type":"string"}}}`,
			`{"type":"object","properties":{"path":{"type":"number"}}}`,
			`{"type":"object"}`,
			``,
			`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"integer"}}}`,
			`{"type":"object","properties":{"a":`,
		}
		names := []string{"read", "write", "a<b>&c", ""}
		descs := []string{"", "reads", "writes \"quoted\""}
		spec := func() llm.ToolSpec {
			return llm.ToolSpec{Name: names[r.IntN(len(names))], Description: descs[r.IntN(len(descs))],
				InputSchema: json.RawMessage(schemas[r.IntN(len(schemas))])}
		}
		var tools []llm.ToolSpec
		for range 1 + r.IntN(3) {
			tools = append(tools, spec())
		}
		msgs := []llm.Message{llm.UserMessage("hi")}
		for turn := range 40 {
			switch r.IntN(10) {
			case 0: // a schema rewritten in place, same length
				if i := r.IntN(len(tools) + 1); i < len(tools) && len(tools[i].InputSchema) > 0 {
					s := tools[i].InputSchema
					s[r.IntN(len(s))] = " x}{\"1"[r.IntN(6)]
				}
			case 1: // a field of one spec
				if len(tools) > 0 {
					i := r.IntN(len(tools))
					n := spec()
					switch r.IntN(3) {
					case 0:
						tools[i].Name = n.Name
					case 1:
						tools[i].Description = n.Description
					case 2:
						tools[i].InputSchema = n.InputSchema
					}
				}
			case 2: // the order
				r.Shuffle(len(tools), func(i, j int) { tools[i], tools[j] = tools[j], tools[i] })
			case 3: // a tool added or removed
				if r.IntN(2) == 0 || len(tools) == 0 {
					tools = append(tools, spec())
				} else {
					tools = slices.Delete(slices.Clone(tools), 0, 1)
				}
			case 4: // the same tools in a new slice
				tools = slices.Clone(tools)
			}
			if r.IntN(8) == 0 {
				msgs = append(msgs, llm.SystemMessage(`be brief ,"tools":[{"functionDeclarations":null}]`))
			}
			msgs = append(msgs, llm.AssistantMessage("ok "+strconv.Itoa(turn)), llm.UserMessage("go on"))
			req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv}
			switch r.IntN(8) {
			case 0:
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired}
			case 1:
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: names[r.IntN(len(names))]}
			case 2:
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone}
			case 3:
				req.Extra = map[string]json.RawMessage{"safetySettings": json.RawMessage(`[]`)}
			case 4:
				req.MaxTokens = 100
			}
			checkTurn(t, client, req)
		}
	}
}

// TestToolsCacheKeptPerConversation checks that two conversations of one
// client keep each its own tools.
func TestToolsCacheKeptPerConversation(t *testing.T) {
	client := &Client{}
	a, b := new(llm.Conversation), new(llm.Conversation)
	toolsA := []llm.ToolSpec{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
	toolsB := []llm.ToolSpec{{Name: "b", InputSchema: json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)}}
	msgs := []llm.Message{llm.UserMessage("hi")}
	for range 3 {
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: toolsA, Conversation: a})
		checkTurn(t, client, &llm.Request{Messages: msgs, Tools: toolsB, Conversation: b})
	}
	if toolsFor(a).Kept(toolsA, "") == nil || toolsFor(b).Kept(toolsB, "") == nil || toolsFor(a).Kept(toolsB, "") != nil {
		t.Fatal("each conversation keeps its own tools")
	}
}

// TestToolsCacheSharedConversation sends requests of two sets of tools on
// one conversation from several goroutines (a caller may share one): each
// body is the body encoded from scratch. Run with -race.
func TestToolsCacheSharedConversation(t *testing.T) {
	client := &Client{}
	conv := new(llm.Conversation)
	sets := [][]llm.ToolSpec{
		{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}},
		{{Name: "b", InputSchema: json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)}},
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			msgs := []llm.Message{llm.UserMessage("hi " + strconv.Itoa(g))}
			for i := range 20 {
				checkTurn(t, client, &llm.Request{Messages: msgs, Tools: sets[(g+i)%2], Conversation: conv})
			}
		})
	}
	wg.Wait()
}
