package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// defaultTools are offered when neither a flag, an agent file nor the
// config names tools: what working in a code repository needs. web_fetch
// is left out: reaching the network is opted into.
var defaultTools = []string{"read_file", "list_files", "write_file", "edit_file", "run_command"}

// toolNames resolves the tool selection: the flag, else the agent file, else
// the config, else the defaults.
func toolNames(flagValue string, agent, cfg []string) []string {
	var names []string
	switch {
	case flagValue != "":
		names = splitList(flagValue)
	case agent != nil:
		names = agent
	case cfg != nil:
		names = cfg
	default:
		return defaultTools
	}
	switch {
	case len(names) == 1 && names[0] == "all":
		return tools.Names()
	case len(names) == 1 && names[0] == "none":
		return []string{}
	}
	return names
}

// builtinToolset builds every built-in tool, confined to workdir.
func builtinToolset(workdir string) (*loop.Toolset, error) {
	return tools.ByName(tools.Names(), &tools.Config{Dir: workdir})
}

// buildTools builds the run's toolset, and the text it adds to the system
// prompt.
func buildTools(names []string, o *runOptions, cfg *Config, stdio *IO) (*loop.Toolset, string, error) {
	ts, err := tools.ByName(names, &tools.Config{Dir: o.workdir, Shell: shellOptions(o)})
	if err != nil {
		return nil, "", usagef("%v", err)
	}
	system := ""
	if ts.Len() > 0 {
		system = fmt.Sprintf("You work in the directory %s. Paths given to tools are relative to it.", o.absWorkdir())
	}
	skillTools, skillPrompt, err := loadSkills(o, cfg, stdio)
	if err != nil {
		return nil, "", err
	}
	if skillTools != nil {
		if ts, err = loop.Join(ts, skillTools); err != nil {
			return nil, "", err
		}
		system = joinPrompts(system, skillPrompt)
	}
	return ts, system, nil
}

// toolsCommand lists the built-in tools.
func toolsCommand(_ context.Context, args []string, stdio *IO) error {
	fs := flag.NewFlagSet("hrns tools", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	asJSON := fs.Bool("json", false, "print the tool specs as JSON")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	all, err := builtinToolset(".")
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(all.Specs())
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tDEFAULT\tAPPROVAL\tDESCRIPTION")
	for def := range all.All() {
		approval := ""
		if def.RequiresApproval {
			approval = "asks"
		}
		dflt := ""
		if slices.Contains(defaultTools, def.Name) {
			dflt = "yes"
		}
		desc, _, _ := strings.Cut(def.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", def.Name, dflt, approval, clip(desc, 90))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out, "\nSchemas: hrns tools --json. Select with hrns run --tools a,b (or all, none).")
	return nil
}

// shellOptions confines commands to the workdir: no part of the user's home
// is granted (package tools gives each workdir a private home for caches and
// offers the shared module caches read-only; see docs/tools.md).
func shellOptions(o *runOptions) *tools.ShellOptions {
	return &tools.ShellOptions{Unconfined: o.noSandbox, DenyNetwork: o.noNetwork}
}
