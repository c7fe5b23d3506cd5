package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// The simple contract: a description, flat arguments, string in and out.
func ExampleNew() {
	// A scripted model stands in for a real provider.
	model := llmtest.NewModel(
		llmtest.Call("call_1", "lookup_project", `{"id":"42"}`),
		llmtest.Text("Project 42 is project-42."),
	)
	tool := loop.NewSimpleTool(
		"Looks up a project name",
		[]loop.ToolArgument{{Name: "id", Type: "string"}},
		func(args map[string]any) string {
			id, _ := args["id"].(string)
			return "project-" + id
		},
	)
	agent := loop.New(model, map[string]loop.Tool{"lookup_project": tool})
	for chunk := range agent.RunLoop(context.Background(), []llm.Message{
		llm.SystemMessage("You look up projects."),
		llm.UserMessage("What is project 42?"),
	}) {
		switch chunk.Type {
		case loop.ChunkToolCallStart:
			fmt.Printf("calling %s %s\n", chunk.ToolCall.Name, chunk.ToolCall.Arguments)
		case loop.ChunkToolCallResult:
			fmt.Printf("result: %s\n", chunk.Content)
		case loop.ChunkEnd: // always last; a failed run has its error here
			if err := chunk.Result.Err; err != nil {
				fmt.Println("error:", err) // a refused key, retries spent...
				return
			}
			fmt.Printf("answer: %s\n", chunk.Result.Answer)
		}
	}
	// Output:
	// calling lookup_project {"id":"42"}
	// result: project-42
	// answer: Project 42 is project-42.
}

// A typed tool: the schema comes from the argument struct, arguments are
// validated and defaults applied before the function runs.
func ExampleNewTool() {
	type WeatherArgs struct {
		City  string `json:"city" jsonschema:"the city to look up"`
		Units string `json:"units,omitempty" jsonschema:"temperature units" enum:"celsius,fahrenheit" default:"celsius"`
	}
	type Weather struct {
		City string  `json:"city"`
		Temp float64 `json:"temp"`
	}
	weather := loop.NewTool("get_weather", "Current weather in a city.",
		func(ctx context.Context, in WeatherArgs) (Weather, error) {
			if in.Units == "fahrenheit" {
				return Weather{in.City, 64.4}, nil
			}
			return Weather{in.City, 18}, nil
		})
	fmt.Println(string(weather.InputSchema))

	model := llmtest.NewModel(llmtest.Call("c1", "get_weather", `{"city":"Paris"}`), llmtest.Text("18°C in Paris."))
	agent := loop.NewAgent(model, loop.MustToolset(weather), nil)
	res, _ := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Weather in Paris?")})
	fmt.Println(res.Messages[2].Parts[0].ToolResult.Text())
	fmt.Println(res.Answer)
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"the city to look up"},"units":{"type":"string","description":"temperature units","default":"celsius","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}
	// {"city":"Paris","temp":18}
	// 18°C in Paris.
}

// A toolset refuses a second tool under a name already wired.
func ExampleToolset_Add() {
	read := &loop.ToolDef{Name: "read_file", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
		return loop.TextOutput("contents"), nil
	}}
	ts := loop.MustToolset(read)
	err := ts.Add(read)
	fmt.Println(errors.Is(err, loop.ErrDuplicateTool), err)
	// Output:
	// true duplicate tool name: "read_file" is already wired
}

// A client-side tool suspends the run; the caller supplies the result and
// the run resumes where it stopped.
func ExampleAgent_Resume() {
	model := llmtest.NewModel(
		llmtest.Call("call_1", "get_order_status", `{"order_id":"4242"}`),
		llmtest.Text("Order 4242 has shipped."),
	)
	orders := loop.NewClientTool("get_order_status", "Looks up an order.",
		json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`))
	agent := loop.NewAgent(model, loop.MustToolset(orders), nil)

	res, _ := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Where is order 4242?")})
	fmt.Println(res.Status)
	for _, c := range res.Suspension.Pending() {
		fmt.Println("waiting for", c.Call.Name, string(c.Call.Arguments))
	}

	// The suspension is plain data: store it, then resume, here or elsewhere.
	stored, _ := json.Marshal(res.Suspension)
	var s loop.Suspension
	json.Unmarshal(stored, &s)
	res, _ = loop.Drain(agent.Resume(context.Background(), &s, &loop.ResumeInput{
		Results: []llm.ToolResult{{CallID: "call_1", Content: []llm.Part{llm.TextPart("shipped")}}},
	}))
	fmt.Println(res.Status, res.Answer)
	// Output:
	// suspended
	// waiting for get_order_status {"order_id":"4242"}
	// completed Order 4242 has shipped.
}

// An approver decides calls of tools that require approval.
func ExampleApproverFunc() {
	deleteFile := &loop.ToolDef{
		Name: "delete_file", RequiresApproval: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("deleted"), nil
		},
	}
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		var args struct{ Path string }
		json.Unmarshal(req.Call.Arguments, &args)
		if args.Path == "go.mod" {
			return loop.Decision{Verdict: loop.Reject, Reason: "go.mod must stay"}, nil
		}
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	model := llmtest.NewModel(llmtest.Call("c1", "delete_file", `{"path":"go.mod"}`), llmtest.Text("I may not delete go.mod."))
	agent := loop.NewAgent(model, loop.MustToolset(deleteFile), &loop.Options{Approver: approver})
	for chunk := range agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("Delete go.mod")}) {
		if chunk.Type == loop.ChunkToolCallError {
			fmt.Println(chunk.Content)
		}
	}
	// Output:
	// the call to tool "delete_file" was rejected: go.mod must stay
}

// Streaming an answer as it is written: a retry chunk voids the deltas of
// the failed attempt, so a consumer that collects them starts over, and the
// answer appears exactly once.
func ExampleAgent_RunLoop_retry() {
	overloaded := &llm.APIError{StatusCode: 529, Message: "overloaded"}
	model := llmtest.NewModel(
		// The first attempt streams part of its answer, then fails.
		llmtest.Reply{Text: "The answer is forty", Err: overloaded, FailAfter: 2},
		llmtest.Text("The answer is forty-two."),
	)
	agent := loop.NewAgent(model, nil, &loop.Options{Retry: loop.RetryPolicy{BaseDelay: time.Millisecond}})
	var answer strings.Builder
	for chunk := range agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("What is the answer?")}) {
		switch chunk.Type {
		case loop.ChunkMessage:
			answer.WriteString(chunk.Content)
		case loop.ChunkRetry:
			fmt.Printf("retrying after: %v\n", chunk.Err)
			answer.Reset() // the failed attempt's text is void
		case loop.ChunkEnd:
			if err := chunk.Result.Err; err != nil {
				fmt.Println("failed:", err)
				return
			}
		}
	}
	fmt.Println(answer.String())
	// Output:
	// retrying after: llm: HTTP 529: overloaded
	// The answer is forty-two.
}

// Context compaction: when a request would pass most of the context
// window, old tool results are trimmed to stubs (and, if that is not
// enough, old turns are summarised by the model) before it is sent.
func ExampleCompaction() {
	page := strings.Repeat("lorem ipsum ", 400) // about 1,200 tokens
	model := llmtest.NewModel(
		llmtest.Call("c1", "fetch", `{"page":1}`),
		llmtest.Call("c2", "fetch", `{"page":2}`),
		llmtest.Call("c3", "fetch", `{"page":3}`),
		llmtest.Call("c4", "fetch", `{"page":4}`),
		llmtest.Text("Four pages of lorem ipsum."),
	)
	type args struct {
		Page int `json:"page"`
	}
	fetch := loop.NewTool("fetch", "Fetches a page.", func(_ context.Context, in args) (string, error) {
		return page, nil
	})
	agent := loop.NewAgent(model, loop.MustToolset(fetch), &loop.Options{
		// Keep only the last turn whole, to show a trim early.
		Compaction: &loop.Compaction{ContextWindow: 4000, KeepTurns: 1},
	})
	for chunk := range agent.RunLoop(context.Background(), []llm.Message{
		llm.SystemMessage("You read pages."),
		llm.UserMessage("What do pages 1 to 4 say?"),
	}) {
		switch chunk.Type {
		case loop.ChunkCompaction:
			c := chunk.Compaction
			fmt.Printf("turn %d: %s, %d results trimmed, about %d -> %d tokens\n",
				chunk.Turn, c.Strategy, c.Trimmed, c.TokensBefore, c.TokensAfter)
		case loop.ChunkEnd:
			res := chunk.Result
			fmt.Println("answer:", res.Answer)
			fmt.Println(res.Messages[3].Parts[0].ToolResult.Text())
		}
	}
	// Output:
	// turn 4: trim, 2 results trimmed, about 3714 -> 1355 tokens
	// answer: Four pages of lorem ipsum.
	// [compacted: the result of fetch (call c1) was dropped to save context: 4800 bytes]
}

// A sub-agent: an agent with its own model, tools and prompt, offered to
// another agent as a tool. Its chunks reach the parent's consumer tagged
// with its name and depth; only its answer enters the parent's transcript.
func ExampleAgentTool() {
	lookup := loop.NewTool("lookup", "Looks up a word.", func(_ context.Context, in struct {
		Word string `json:"word"`
	}) (string, error) {
		return in.Word + ": a small shell", nil
	})
	researcher := loop.NewAgent(llmtest.NewModel(
		llmtest.Call("r1", "lookup", `{"word":"hrns"}`),
		llmtest.Text("hrns means a small shell."),
	), loop.MustToolset(lookup), &loop.Options{MaxTurns: 5})

	lead := loop.NewAgent(llmtest.NewModel(
		llmtest.Call("c1", "research", `{"task":"What does hrns mean?"}`),
		llmtest.Text("It means a small shell."),
	), loop.MustToolset(loop.AgentTool("research", "Researches a question.", researcher,
		&loop.AgentToolOptions{SystemPrompt: "You look words up."})), nil)

	for chunk := range lead.RunLoop(context.Background(), []llm.Message{llm.UserMessage("What does hrns mean?")}) {
		who := "lead"
		if chunk.Agent != "" {
			who = fmt.Sprintf("%s (depth %d)", chunk.Agent, chunk.Depth)
		}
		switch chunk.Type {
		case loop.ChunkToolCallStart:
			fmt.Printf("%s calls %s %s\n", who, chunk.ToolCall.Name, chunk.ToolCall.Arguments)
		case loop.ChunkToolCallResult:
			fmt.Printf("%s got: %s\n", who, chunk.Content)
		case loop.ChunkEnd:
			fmt.Printf("answer: %s (%d messages in the lead's transcript)\n", chunk.Result.Answer, len(chunk.Result.Messages))
		}
	}
	// Output:
	// lead calls research {"task":"What does hrns mean?"}
	// research (depth 1) calls lookup {"word":"hrns"}
	// research (depth 1) got: hrns: a small shell
	// lead got: hrns means a small shell.
	// answer: It means a small shell. (4 messages in the lead's transcript)
}
