package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

func TestTodoWrite(t *testing.T) {
	ts := tools.Todo()
	item := func(content, status string) map[string]any {
		return map[string]any{"content": content, "status": status}
	}
	tests := []struct {
		name    string
		todos   any
		want    string
		wantErr string
	}{
		{"plan", []any{item("Read the code", "completed"), item("Fix the bug", "in_progress"), item("Run the tests", "pending")},
			"The plan is recorded: 3 steps, 1 completed, 1 in progress, 1 pending. Now: Fix the bug", ""},
		{"cleared", []any{}, "The plan is cleared.", ""},
		{"two in progress", []any{item("a", "in_progress"), item("b", "in_progress")}, "", "2 items are in_progress; work on one step at a time"},
		{"bad status", []any{item("a", "done")}, "", "done does not equal any of: [pending in_progress completed]"},
		{"empty content", []any{item(" ", "pending")}, "", "item 1 has no content"},
		{"long content", []any{item(strings.Repeat("x", 501), "pending")}, "", "item 1 is 501 bytes long; keep each item under 500"},
		{"too many", func() []any {
			var l []any
			for range 51 {
				l = append(l, item("x", "pending"))
			}
			return l
		}(), "", "the plan has 51 items; keep it to at most 50"},
		{"not a list", "do things", "", "todos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]any{"todos": tt.todos})
			// Through Invoke, so that the schema (with its enum) is checked
			// as in a run.
			out, err := ts.Invoke(t.Context(), llm.ToolCall{ID: "c1", Name: "todo_write", Arguments: args}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Content[0].Text; got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if def, _ := ts.Lookup("todo_write"); !def.Concurrent || def.RequiresApproval {
		t.Error("todo_write is not a concurrent tool without approval")
	}
}

func TestPlanOf(t *testing.T) {
	args := json.RawMessage(`{"todos":[{"content":"Write \u001b[31mit","status":"in_progress"},{"content":"Ship","status":"pending"}]}`)
	c := loop.Chunk{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{ID: "1", Name: "todo_write", Arguments: args}}
	plan, ok := tools.PlanOf(c)
	if !ok {
		t.Fatal("no plan in a todo_write result")
	}
	want := &tools.TodoList{Todos: []tools.TodoItem{{Content: "Write \x1b[31mit", Status: "in_progress"}, {Content: "Ship", Status: "pending"}}}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// The same chunk, as a --json line or a session event carries it.
	line, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		ToolCall struct {
			Arguments tools.TodoList `json:"arguments"`
		} `json:"tool_call"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*want, ev.ToolCall.Arguments); diff != "" {
		t.Errorf("from JSON: (-want +got)\n%s", diff)
	}
	for _, c := range []loop.Chunk{
		{Type: loop.ChunkToolCallStart, ToolCall: c.ToolCall},
		{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{Name: "grep", Arguments: args}},
		{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{Name: "todo_write", Arguments: json.RawMessage(`{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`)}},
		{Type: loop.ChunkToolCallResult},
	} {
		if _, ok := tools.PlanOf(c); ok {
			t.Errorf("a plan in %+v", c)
		}
	}
}
