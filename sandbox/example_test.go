//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"

	"github.com/hrns-dev/hrns/sandbox"
)

func ExampleRun() {
	dir, err := os.MkdirTemp("", "sandbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	res, err := sandbox.Run(context.Background(), &sandbox.Spec{
		Shell:  "echo hello from $WHO; echo $HOME; exit 3",
		Dir:    dir,
		Env:    []string{"WHO=the sandbox"}, // HOME is not inherited
		Limits: sandbox.DefaultLimits,
	})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Output)
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// hello from the sandbox
	//
	// exit code 3
}
