package cmdline_test

import (
	"encoding/json"
	"fmt"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

// The simple commands a line runs, and why it could run something else.
func ExampleParse() {
	pc, err := cmdline.Parse(`git status && sh -c "rm -rf x"`)
	if err != nil {
		panic(err)
	}
	fmt.Println(pc.Commands)
	fmt.Println(pc.Opaque)
	// Output:
	// [[git status] [sh -c rm -rf x] [rm -rf x]]
	// a command that runs a script
}

// A tool whose "command" argument is a shell command line: permission rules
// match it by command prefix, every command of the line being checked.
func ExampleSubject() {
	run := &loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute,
		Subject: cmdline.Subject("command")}
	perms := &loop.Permissions{
		Allow: []loop.Rule{{Tool: "run_command", Pattern: "go test:*"}},
		Deny:  []loop.Rule{{Tool: "run_command", Pattern: "rm:*"}},
	}
	for _, line := range []string{"go test ./...", "go test ./... && rm -rf /", "make"} {
		args, _ := json.Marshal(map[string]string{"command": line})
		fmt.Printf("%-28q %s\n", line, perms.Check(run, args).Behavior)
	}
	// Output:
	// "go test ./..."              allow
	// "go test ./... && rm -rf /"  deny
	// "make"                       ask
}
