package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// taskToolName is the sub-agent tool of hrns run and the chat (Claude
// Code's Task, in hrns's snake_case).
const taskToolName = "task"

// Bounds of a task's sub-agent.
const (
	taskMaxTurns = 50 // model requests of one sub-agent run, unless the run's own bound is lower
	taskMaxDepth = 1  // a sub-agent has no task tool: no deeper nesting
)

// taskSchema is the input of the task tool.
var taskSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"description":{"type":"string","description":"A few words saying what the sub-agent does (shown to the person)."},` +
	`"task":{"type":"string","description":"The task for the sub-agent, with everything it needs to know: it sees nothing else of this conversation, and its final answer is all you get back."},` +
	`"tools":{"type":"array","items":{"type":"string"},"description":"The tools it may use, among yours; default all of them but task. Give it only reading tools (read_file, list_files, grep) for research."}` +
	`},"required":["task"],"additionalProperties":false}`)

const taskDescription = "Runs a sub-agent on a task, with its own context (it sees only the task you write) and the tools you give it " +
	"(a subset of yours; by default all but task), and returns its final answer. Use it for self-contained work whose " +
	"steps you do not need to see: searching a large codebase, investigating a question, a change in one place. " +
	"Its calls follow the same permissions and approvals as yours. Several task calls in one message run at the same time."

// splitTask takes "task" out of a tool selection: the caller adds it once
// the other tools and the model exist.
func splitTask(names []string) ([]string, bool) {
	i := slices.IndexFunc(names, func(n string) bool { return strings.TrimSpace(n) == taskToolName })
	if i < 0 {
		return names, false
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.TrimSpace(n) == taskToolName }), true
}

// taskTool returns the task tool: each call runs a sub-agent, a
// [loop.AgentTool] on model, with system as its system prompt and the
// tools of parent the call names (all but task by default). The
// sub-agent's calls are held to the run's policy, hooks and approver,
// which it inherits; its chunks reach the run's consumer tagged
// agent "task", depth 1.
func taskTool(model llm.Model, modelName string, parent *loop.Toolset, system string, maxTurns int) *loop.ToolDef {
	if maxTurns <= 0 || maxTurns > taskMaxTurns {
		maxTurns = taskMaxTurns
	}
	sys := joinPrompts(system, "You are a sub-agent: another agent gave you the task below and sees only your final answer. "+
		"Do the task with your tools, then answer with everything the caller needs (findings, paths, what you changed), briefly.")
	return &loop.ToolDef{
		Name:        taskToolName,
		Description: taskDescription,
		InputSchema: taskSchema,
		Concurrent:  true,
		Timeout:     time.Hour, // a sub-agent's whole run; the run's own budgets bound it too
		// Its sub-agent's calls are held to the policy themselves.
		Access: loop.AccessRead,
		Handler: func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
			var in struct {
				Description string   `json:"description"`
				Task        string   `json:"task"`
				Tools       []string `json:"tools"`
			}
			if err := json.Unmarshal(call.Arguments, &in); err != nil {
				return nil, err
			}
			if strings.TrimSpace(in.Task) == "" {
				return loop.ErrorOutput("the task is empty: write what the sub-agent must do, with everything it needs to know"), nil
			}
			ts, err := taskTools(parent, in.Tools)
			if err != nil {
				return loop.ErrorOutput(err.Error()), nil
			}
			child := loop.NewAgent(model, ts, &loop.Options{Model: modelName, MaxTurns: maxTurns})
			at := loop.AgentTool(taskToolName, taskDescription, child, &loop.AgentToolOptions{SystemPrompt: sys, MaxDepth: taskMaxDepth})
			args, _ := json.Marshal(map[string]string{"task": in.Task})
			return at.Handler(ctx, &loop.Call{ID: call.ID, Name: call.Name, Arguments: args})
		},
	}
}

// taskTools returns the tools of parent a sub-agent gets: those named
// (each must be one of parent's, and not task), or all of them.
func taskTools(parent *loop.Toolset, names []string) (*loop.Toolset, error) {
	if len(names) == 0 {
		names = parent.Names()
	}
	var defs []*loop.ToolDef
	seen := map[string]bool{}
	for _, n := range names {
		if n == taskToolName {
			return nil, fmt.Errorf("a sub-agent cannot have the task tool: it runs no sub-agents of its own")
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		def, ok := parent.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("a sub-agent can only have your tools, and %q is not one of them: choose among %s", n, strings.Join(parent.Names(), ", "))
		}
		defs = append(defs, &def)
	}
	return loop.NewToolset(defs...)
}

// addTaskTool adds the task tool to ts when want is set; the sub-agent's
// tools are ts's.
func addTaskTool(ts *loop.Toolset, want bool, model llm.Model, modelName, system string, maxTurns int) (*loop.Toolset, error) {
	if !want {
		return ts, nil
	}
	if ts == nil {
		ts = loop.MustToolset()
	}
	sub, err := loop.Join(ts) // a copy: the sub-agents' tools stay without task
	if err != nil {
		return nil, err
	}
	out, err := loop.Join(ts)
	if err != nil {
		return nil, err
	}
	if err := out.Add(taskTool(model, modelName, sub, system, maxTurns)); err != nil {
		return nil, usagef("%v", err)
	}
	return out, nil
}
