// Command hrns gives an LLM tools and runs it until the job is done.
//
//	hrns run "Add a test for the parser"   # one task, streamed to stdout
//	hrns tools                             # the built-in tools and their schemas
//	hrns skills                            # the skills hrns can see
//
// Run "hrns help" for the flags, and see the README for configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/cli"
)

func main() {
	// First: the keys out of the process's environment (and out of
	// /proc/self/environ), inherited descriptors closed on exec.
	getenv := cli.TakeEnvironment()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], &cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: getenv})
	stop()
	os.Exit(code)
}
