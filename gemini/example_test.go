package gemini_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// A client streams an answer; the scripted server stands in for Google.
func ExampleClient_Stream() {
	srv := geminitest.NewServer(geminitest.Reply{Thoughts: "Greet briefly.", Text: "Hello from Gemini."})
	defer srv.Close()
	c := &gemini.Client{BaseURL: srv.URL(), APIKey: "test-key", Model: "gemini-2.5-flash"}

	for chunk, err := range c.Stream(context.Background(), &llm.Request{
		Messages:  []llm.Message{llm.UserMessage("Say hi")},
		Reasoning: &llm.ReasoningConfig{BudgetTokens: 1024},
	}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch chunk.Kind {
		case llm.ChunkReasoning:
			fmt.Printf("thought: %q\n", chunk.Text)
		case llm.ChunkText:
			fmt.Printf("text: %q\n", chunk.Text)
		case llm.ChunkDone:
			fmt.Println("finish:", chunk.Response.FinishReason)
		}
	}
	// Output:
	// thought: "Greet briefly."
	// text: "Hello from Gemini."
	// finish: stop
}

// An agent runs tools with Gemini: the model's call comes without an id
// and with a thought signature, both handled by the provider.
func Example_agent() {
	srv := geminitest.NewServer(
		geminitest.Reply{ToolCalls: []llm.ToolCall{geminitest.ToolCall("", "add", `{"a":2,"b":3}`)}, Signature: "c2ln"},
		geminitest.Reply{Text: "2 + 3 = 5."},
	)
	defer srv.Close()
	add := loop.NewTool("add", "Adds two integers.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (string, error) {
		return fmt.Sprint(in.A + in.B), nil
	})
	agent := loop.NewAgent(&gemini.Client{BaseURL: srv.URL(), Model: "gemini-2.5-flash"}, loop.MustToolset(add), nil)
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("What is 2 + 3?")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Answer)

	// The second request sent the signature back on the call.
	var body struct {
		Contents []struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	json.Unmarshal(srv.Requests()[1].Body, &body)
	call := body.Contents[1].Parts[0]
	fmt.Println(string(call["functionCall"]), string(call["thoughtSignature"]))
	// Output:
	// 2 + 3 = 5.
	// {"name":"add","args":{"a":2,"b":3}} "c2ln"
}
