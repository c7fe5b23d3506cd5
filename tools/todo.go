package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/loop"
)

// The statuses of a [TodoItem].
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
)

// The bounds of a plan.
const (
	// MaxTodos is the most items a plan holds.
	MaxTodos = 50
	// MaxTodoBytes is the longest an item's content may be.
	MaxTodoBytes = 500
)

// A TodoItem is one step of the agent's plan.
type TodoItem struct {
	Content string `json:"content" jsonschema:"what the step does, in a short imperative sentence"`
	Status  string `json:"status" enum:"pending,in_progress,completed" jsonschema:"pending, in_progress (at most one step at a time) or completed"`
}

// A TodoList is the agent's whole plan: the arguments of a todo_write call.
type TodoList struct {
	Todos []TodoItem `json:"todos" jsonschema:"the whole plan, in order; it replaces the previous plan"`
}

// Check reports the first reason l is not a valid plan: more than
// [MaxTodos] items, an item without content or longer than
// [MaxTodoBytes], an unknown status, or more than one item in progress.
func (l *TodoList) Check() error {
	if len(l.Todos) > MaxTodos {
		return fmt.Errorf("the plan has %d items; keep it to at most %d", len(l.Todos), MaxTodos)
	}
	inProgress := 0
	for i, t := range l.Todos {
		n := i + 1
		switch {
		case strings.TrimSpace(t.Content) == "":
			return fmt.Errorf("item %d has no content", n)
		case len(t.Content) > MaxTodoBytes:
			return fmt.Errorf("item %d is %d bytes long; keep each item under %d", n, len(t.Content), MaxTodoBytes)
		case !utf8.ValidString(t.Content):
			return fmt.Errorf("item %d is not valid UTF-8", n)
		}
		switch t.Status {
		case TodoPending, TodoCompleted:
		case TodoInProgress:
			inProgress++
		default:
			return fmt.Errorf("item %d has status %q; use pending, in_progress or completed", n, t.Status)
		}
	}
	if inProgress > 1 {
		return fmt.Errorf("%d items are in_progress; work on one step at a time (mark the others pending or completed)", inProgress)
	}
	return nil
}

// Todo returns the todo_write tool: the agent writes its plan, the whole
// list each time, and marks the steps as it goes. The tool keeps no state:
// the plan is the arguments of the latest successful call, carried in the
// transcript and in the run's chunks (and so in `hrns run --json` lines
// and session events), where [PlanOf] reads it. It is Concurrent and
// needs no approval.
func Todo() *loop.Toolset {
	def := loop.NewTool("todo_write",
		"Records your plan for the task as a checklist the user sees: the whole list each time, in order, "+
			"each step pending, in_progress or completed. Use it for work of several steps: write the plan "+
			"first, mark a step in_progress when you start it (one at a time) and completed as soon as it is "+
			"done, and add or drop steps as you learn more. Not needed for a single quick step.",
		func(ctx context.Context, in TodoList) (string, error) {
			if err := in.Check(); err != nil {
				return "", err
			}
			return planSummary(in.Todos), nil
		})
	def.Concurrent = true
	// It changes nothing the user keeps: plan mode allows it.
	def.Access = loop.AccessRead
	return loop.MustToolset(def)
}

// planSummary is todo_write's result: what the model reads back.
func planSummary(todos []TodoItem) string {
	if len(todos) == 0 {
		return "The plan is cleared."
	}
	n := map[string]int{}
	current := ""
	for _, t := range todos {
		n[t.Status]++
		if t.Status == TodoInProgress {
			current = t.Content
		}
	}
	s := fmt.Sprintf("The plan is recorded: %d steps, %d completed, %d in progress, %d pending.", len(todos), n[TodoCompleted], n[TodoInProgress], n[TodoPending])
	if current != "" {
		s += " Now: " + current
	}
	return s
}

// PlanOf returns the plan a chunk carries: the arguments of a todo_write
// call's tool_call_result chunk (the one sign that the tool accepted
// them). ok is false for any other chunk. A consumer of `hrns run --json`
// lines or of session events can decode the same fields: the chunk's
// tool_call.arguments is the [TodoList].
func PlanOf(c loop.Chunk) (plan *TodoList, ok bool) {
	if c.Type != loop.ChunkToolCallResult || c.ToolCall == nil || c.ToolCall.Name != "todo_write" {
		return nil, false
	}
	plan, err := ParsePlan(c.ToolCall.Arguments)
	if err != nil {
		return nil, false
	}
	return plan, true
}

// ParsePlan decodes and checks the arguments of a todo_write call.
func ParsePlan(arguments []byte) (*TodoList, error) {
	var l TodoList
	if err := json.Unmarshal(arguments, &l); err != nil {
		return nil, fmt.Errorf("todo_write arguments: %w", err)
	}
	if l.Todos == nil {
		return nil, errors.New("todo_write arguments: no todos")
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	return &l, nil
}
