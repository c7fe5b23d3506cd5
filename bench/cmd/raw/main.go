// Command raw runs the benchmarks' task with the baseline client of package
// [github.com/hrns-dev/hrns/bench/internal/raw].
//
//	raw --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"os"

	"github.com/hrns-dev/hrns/bench/internal/raw"
	"github.com/hrns-dev/hrns/bench/internal/task"
)

func main() {
	os.Exit(task.Main("raw", os.Args[1:], os.Stdout, os.Stderr, func(f *task.Flags) (task.RunFunc, error) {
		c := &raw.Client{BaseURL: f.BaseURL, Model: f.Model, ResultBytes: f.ResultBytes}
		return c.Run, nil
	}))
}
