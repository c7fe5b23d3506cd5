package loop_test

// This file keeps every snippet of the "Add a tool" guide (the loop's
// reference documentation) as it is written there, and runs them against a
// loopback server speaking the OpenAI wire format.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// From the guide: "Example: custom tool type".
type ProjectTool struct {
	store map[string]string
}

func (t *ProjectTool) Description() string {
	return "Returns a project title by id"
}

func (t *ProjectTool) Arguments() []loop.ToolArgument {
	return []loop.ToolArgument{{Name: "id", Type: "string"}}
}

func (t *ProjectTool) Call(args map[string]any) string {
	id, _ := args["id"].(string)
	if value, ok := t.store[id]; ok {
		return value
	}
	return "not found"
}

func TestSeedGuide(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{
			openaitest.ToolCall("call_1", "lookup_project", `{"id":"42"}`),
			openaitest.ToolCall("call_2", "project_title", `{"id":"42"}`),
		}},
		openaitest.Reply{Text: "Project 42 (project-42) is called Harness."},
	)
	defer srv.Close()
	client := &openai.Client{BaseURL: srv.URL(), APIKey: "sk-test", Model: "gpt-test"}

	// From the guide: "Fastest path: loop.NewSimpleTool".
	tool := loop.NewSimpleTool(
		"Looks up a project name",
		[]loop.ToolArgument{{Name: "id", Type: "string"}},
		func(args map[string]any) string {
			id, _ := args["id"].(string)
			return "project-" + id
		},
	)

	agent := loop.New(client, map[string]loop.Tool{
		"lookup_project": tool,
		"project_title":  &ProjectTool{store: map[string]string{"42": "Harness"}},
	})

	// "Pass your system prompt as an openai.SystemMessage(...) in the
	// messages slice when you call RunLoop."
	messages := []llm.Message{
		openai.SystemMessage("You answer questions about projects."),
		openai.UserMessage("What is project 42?"),
	}
	var flow []string
	var res *loop.Result
	for chunk := range agent.RunLoop(context.Background(), messages) {
		switch chunk.Type {
		case loop.ChunkToolCallStart, loop.ChunkToolCallResult, loop.ChunkEnd:
			flow = append(flow, string(chunk.Type)+" "+toolName(chunk))
		}
		if chunk.Type == loop.ChunkEnd {
			res = chunk.Result
		}
	}
	want := []string{
		"tool_call_start lookup_project",
		"tool_call_result lookup_project",
		"tool_call_start project_title",
		"tool_call_result project_title",
		"end ",
	}
	if diff := cmp.Diff(want, flow); diff != "" {
		t.Errorf("chunk flow (-want +got):\n%s", diff)
	}
	if res.Err != nil || res.Answer != "Project 42 (project-42) is called Harness." {
		t.Fatalf("result: %v %q", res.Err, res.Answer)
	}

	// What went over the wire: the flat schema of the guide, the system
	// prompt, and each tool's string returned as a "tool" message.
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var first struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if first.Messages[0].Role != "system" || first.Messages[0].Content != "You answer questions about projects." {
		t.Errorf("system prompt not sent first: %+v", first.Messages[0])
	}
	schema := `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	for _, tl := range first.Tools {
		if string(tl.Function.Parameters) != schema {
			t.Errorf("%s schema = %s, want the guide's %s", tl.Function.Name, tl.Function.Parameters, schema)
		}
	}
	var second struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, m := range second.Messages {
		if m.Role == "tool" {
			tools = append(tools, m.ToolCallID+"="+m.Content)
		}
	}
	if diff := cmp.Diff([]string{"call_1=project-42", "call_2=Harness"}, tools); diff != "" {
		t.Errorf("tool messages (-want +got):\n%s", diff)
	}
}

func toolName(c loop.Chunk) string {
	if c.ToolCall == nil {
		return ""
	}
	return c.ToolCall.Name
}
