package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/hrns-dev/hrns/examples"
)

// demoCommand plays the embedded tour (examples/tour.jsonl): in the chat on
// a terminal, else as hrns run. The model's answers are recorded; the tools
// (only the reading ones) run for real in the workdir.
func demoCommand(ctx context.Context, args []string, stdio *IO) error {
	f, err := os.CreateTemp("", "hrns-tour-*.jsonl")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(examples.Tour)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	base := []string{"--replay", f.Name(), "--tools", "list_files,read_file", "--no-skills"}
	// The tour's temporary file is no one's business.
	label := func(o *runOptions) { o.replayLabel = "the recorded tour built into hrns" }
	if stdio.interactive() && stdio.outTerminal() {
		return chatWith(ctx, append(append(base, args...), "--demo"), stdio, label)
	}
	return runWith(ctx, append(append(base, args...), "Tell me about this repository"), stdio, label)
}
