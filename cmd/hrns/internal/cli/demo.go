package cli

import (
	"context"
)

// demoCommand runs hrns offline with the demo's scripted model (provider
// "demo", see demoModel): in the chat on a terminal, else as hrns run with
// the first question a newcomer asks. The model is a script, said so on
// screen; the tools (only the reading ones) run for real in the workdir,
// so its answers are about the directory it runs in.
func demoCommand(ctx context.Context, args []string, stdio *IO) error {
	base := []string{"--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills"}
	if stdio.interactive() && stdio.outTerminal() {
		return chatCommand(ctx, append(append(base, args...), "--demo"), stdio)
	}
	if len(args) == 0 || args[len(args)-1] == "" || args[len(args)-1][0] == '-' {
		args = append(args, "Tell me about this directory")
	}
	return runCommand(ctx, append(base, args...), stdio)
}
