package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// checkScratch encodes req with its conversation and without (every other
// field the same), and fails unless the bodies (or the errors) are the
// same.
func checkScratch(t *testing.T, c *Client, req *llm.Request) {
	t.Helper()
	scratch := *req
	scratch.Conversation = nil
	want, wantErr := c.marshalRequest(&scratch)
	pieces, err := c.encodeRequest(req)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error with the conversation %v, without %v", err, wantErr)
	}
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Fatalf("body with the conversation:\n%s\nwithout:\n%s", got, want)
	}
}

// TestToolsCacheSameBytes changes a conversation's tools between turns (a
// schema rewritten in place, a description, a name, the order, a computer
// screen, a tool added, removed, none), the model, the client's
// strictness and the tool choice, and checks every body against the body
// encoded without the conversation: the encoded "tools" field is reused
// only while the tools render the same.
func TestToolsCacheSameBytes(t *testing.T) {
	client := &Client{Model: "m"}
	conv := new(llm.Conversation)
	conv.Own()
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	tools := []llm.ToolSpec{{Name: "read", Description: "reads", InputSchema: schema}}
	msgs := []llm.Message{llm.UserMessage("hi")}
	turn := func(tools []llm.ToolSpec) {
		t.Helper()
		msgs = append(msgs, llm.AssistantMessage("ok"), llm.UserMessage("more"))
		checkScratch(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv})
	}
	turn(tools)
	turn(tools)
	if f := toolsFor(conv).Kept(tools, toolsExtra(true, "m")); f == nil {
		t.Fatal("the tools of the last turn are not kept")
	}
	copy(schema[len(`{"type":"object","properties":{"`):], "b") // in place, same length
	turn(tools)
	tools[0].Description = "reads a file"
	turn(tools)
	tools[0].Name = "reed"
	turn(tools)
	tools = append(tools, llm.ToolSpec{Name: "write <&>", InputSchema: json.RawMessage(" { \"type\" : \"object\" } ")})
	turn(tools)
	turn([]llm.ToolSpec{tools[1], tools[0]}) // the order
	turn(tools)
	client.NoStrict = true
	turn(tools)
	client.NoStrict = false
	turn(tools)
	screen := &llm.ComputerSpec{Width: 1024, Height: 768}
	computer := append(slices.Clone(tools), llm.ToolSpec{Name: "computer", InputSchema: schema, Computer: screen})
	turn(computer)
	for _, model := range []string{"computer-use-preview", "computer-use-preview", "gpt-5.4", "m", "computer-use-preview"} {
		client.Model = model
		turn(computer)
	}
	screen.Width = 1280 // in place
	turn(computer)
	screen.Width = 0 // in place: an error now
	turn(computer)
	screen.Width = 1280
	turn(computer)
	msgs = append(msgs, llm.UserMessage("more"))
	checkScratch(t, client, &llm.Request{Messages: msgs, Tools: computer, Conversation: conv, Model: "gpt-5.4"})
	client.Model = "m"
	turn(tools[:1])
	turn(nil)
	turn([]llm.ToolSpec{{Name: "empty"}})
	turn(tools)
	checkScratch(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv, Extra: map[string]json.RawMessage{"user": json.RawMessage(`"u"`)}})
	// Kept tools (not rendered again) with the fields that go with tools.
	no := false
	for _, tc := range []llm.ToolChoice{{Mode: llm.ToolChoiceRequired}, {Mode: llm.ToolChoiceRequired}, {Mode: llm.ToolChoiceNone},
		{Mode: llm.ToolChoiceTool, Name: "reed"}, {Mode: llm.ToolChoiceTool}, {Mode: "bogus"}, {}} {
		msgs = append(msgs, llm.UserMessage("more"))
		checkScratch(t, client, &llm.Request{Messages: msgs, Tools: tools, Conversation: conv, ToolChoice: tc, ParallelToolCalls: &no})
	}
	// Tools that do not render fail as they would without the cache,
	// after kept ones and before.
	bad := append(slices.Clone(tools), llm.ToolSpec{Name: "bad", InputSchema: json.RawMessage(`{"type":`)})
	turn(bad)
	turn(tools)
	turn([]llm.ToolSpec{{InputSchema: schema}})
	turn(tools)
}

// TestToolsCacheRandom plays randomised sequences of requests whose tools
// change or not between turns, in every way the "tools" field depends on
// (in place or not), with the model, strictness, tool choice and extra
// fields changing too, and checks every body against the body encoded from
// scratch.
func TestToolsCacheRandom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 36))
		client := &Client{Model: "m"}
		conv := new(llm.Conversation)
		if r.IntN(2) == 0 {
			conv.Own()
		}
		schemas := []string{
			`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`,
			`{"type":"object","properties":{"path":{"type":"number"}}}`,
			`{"type":"object"}`,
			``,
			`{"type":"object","properties":{"a":`,
		}
		names := []string{"read", "computer", "a<b>&c", ""}
		descs := []string{"", "reads", "writes \"quoted\""}
		models := []string{"m", "computer-use-preview", "gpt-5.4"}
		spec := func() llm.ToolSpec {
			s := llm.ToolSpec{Name: names[r.IntN(len(names))], Description: descs[r.IntN(len(descs))],
				InputSchema: json.RawMessage(schemas[r.IntN(len(schemas))])}
			if r.IntN(4) == 0 {
				s.Computer = &llm.ComputerSpec{Width: r.IntN(3) * 640, Height: 480}
			}
			return s
		}
		var tools []llm.ToolSpec
		for range 1 + r.IntN(3) {
			tools = append(tools, spec())
		}
		msgs := []llm.Message{llm.UserMessage("hi")}
		for turn := range 40 {
			switch r.IntN(12) {
			case 0: // a schema rewritten in place, same length
				if i := r.IntN(len(tools) + 1); i < len(tools) && len(tools[i].InputSchema) > 0 {
					s := tools[i].InputSchema
					s[r.IntN(len(s))] = " x}{\"1"[r.IntN(6)]
				}
			case 1: // a field of one spec
				if len(tools) > 0 {
					i := r.IntN(len(tools))
					n := spec()
					switch r.IntN(4) {
					case 0:
						tools[i].Name = n.Name
					case 1:
						tools[i].Description = n.Description
					case 2:
						tools[i].InputSchema = n.InputSchema
					case 3:
						tools[i].Computer = n.Computer
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
			case 5: // a screen resized in place
				for i := range tools {
					if c := tools[i].Computer; c != nil {
						c.Width = r.IntN(3) * 640
						break
					}
				}
			case 6:
				client.NoStrict = !client.NoStrict
			case 7:
				client.Model = models[r.IntN(len(models))]
			}
			msgs = append(msgs, llm.AssistantMessage("ok "+strconv.Itoa(turn)), llm.UserMessage("go on"))
			req := &llm.Request{Messages: msgs, Tools: tools, Conversation: conv}
			switch r.IntN(8) {
			case 0:
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired}
			case 1:
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: names[r.IntN(len(names))]}
			case 2:
				req.Model = models[r.IntN(len(models))]
			case 3:
				req.Extra = map[string]json.RawMessage{"user": json.RawMessage(`"u"`)}
			case 4:
				req.MaxTokens = 100
			}
			checkScratch(t, client, req)
		}
	}
}

// TestToolsCacheKeptPerConversation checks that two conversations of one
// client keep each its own tools.
func TestToolsCacheKeptPerConversation(t *testing.T) {
	client := &Client{Model: "m"}
	a, b := new(llm.Conversation), new(llm.Conversation)
	toolsA := []llm.ToolSpec{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
	toolsB := []llm.ToolSpec{{Name: "b", InputSchema: json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)}}
	msgs := []llm.Message{llm.UserMessage("hi")}
	for range 3 {
		checkScratch(t, client, &llm.Request{Messages: msgs, Tools: toolsA, Conversation: a})
		checkScratch(t, client, &llm.Request{Messages: msgs, Tools: toolsB, Conversation: b})
	}
	fa := toolsFor(a).Kept(toolsA, toolsExtra(true, "m"))
	fb := toolsFor(b).Kept(toolsB, toolsExtra(true, "m"))
	fab := toolsFor(a).Kept(toolsB, toolsExtra(true, "m"))
	if fa == nil || fb == nil || fab != nil {
		t.Fatal("each conversation keeps its own tools")
	}
}
