package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// defaultTools are offered when neither a flag, an agent file nor the
// config names tools: what working in a code repository needs. web_fetch
// is left out: reaching the network is opted into.
var defaultTools = []string{"read_file", "list_files", "write_file", "edit_file", "grep", "run_command", "todo_write"}

// runCodeName is the code mode tool: a program the model writes, calling
// the other tools selected as its capabilities.
const runCodeName = codemode.DefaultName

// allToolNames are the tools "all" selects: the built-in tools, then
// run_code and task.
func allToolNames() []string { return append(tools.Names(), runCodeName, taskToolName) }

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
		return allToolNames()
	case len(names) == 1 && names[0] == "none":
		return []string{}
	}
	return names
}

// toolEnv is where the tools an agent names work, and who decides what
// run_code does.
type toolEnv struct {
	// Dir is the root of the file tools and grep, and the working
	// directory of run_command.
	Dir   string
	Shell *tools.ShellOptions
	// Programs decides each run_code program once it passed its checks,
	// before it runs (the approval names run_code and carries the
	// program as its "code" argument). Nil leaves the decision to the
	// agent's approver, before the program is checked: run_code then
	// requires approval like any tool that does.
	Programs loop.Approver
	// Capabilities decides the calls a program makes of capabilities
	// that require approval (write_file, run_command...), each with its
	// own rule. Nil refuses them, saying NoCapabilityApproval.
	Capabilities loop.Approver
	// NoCapabilityApproval is the reason given when Capabilities is nil.
	NoCapabilityApproval string
	// ApprovalTimeout bounds each of those decisions; 0 means
	// codemode's default.
	ApprovalTimeout time.Duration
	// More are capabilities granted to run_code besides the built-in
	// tools named (skills, MCP tools); nil adds none.
	More *loop.Toolset
	// Web are web_fetch's options; nil means the defaults.
	Web *tools.WebOptions
}

// namedTools builds the tools names selects, in that order: the built-in
// tools of package tools, working in env.Dir, and run_code, whose
// capabilities are the other tools selected (and env.More), each called
// through [loop.Toolset.Invoke] with its own approval rule. Names are
// trimmed; empty names and repeats are ignored; an unknown name is an
// error that lists the known ones. hrns run, the agents of hrns serve and
// hrns tools resolve tool names with it.
func namedTools(names []string, env *toolEnv) (*loop.Toolset, error) {
	var builtin []string
	code := false
	for _, n := range names {
		switch n = strings.TrimSpace(n); n {
		case runCodeName:
			code = true
		case taskToolName:
			return nil, fmt.Errorf("the %s tool runs sub-agents in hrns run and hrns chat; an agent of hrns serve delegates to its subagents instead (docs/serve.md)", taskToolName)
		case "":
		default:
			builtin = append(builtin, n)
		}
	}
	ts, err := tools.ByName(builtin, &tools.Config{Dir: env.Dir, Shell: env.Shell, Web: env.Web})
	if err != nil {
		if strings.Contains(err.Error(), "unknown tool") {
			return nil, fmt.Errorf("%v, %s", err, runCodeName)
		}
		return nil, err
	}
	if !code {
		return ts, nil
	}
	caps, err := loop.Join(ts, env.More)
	if err != nil {
		return nil, err
	}
	capApprover := env.Capabilities
	if capApprover == nil {
		reason := firstString(env.NoCapabilityApproval, "no one can approve it while a program runs")
		capApprover = loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Reject, Reason: reason}, nil
		})
	}
	runner, err := codemode.New(&codemode.Options{
		Capabilities:    caps,
		RequireApproval: env.Programs != nil,
		Approver:        programsAndCapabilities(env.Programs, capApprover),
		ApprovalTimeout: env.ApprovalTimeout,
	})
	if err != nil {
		return nil, err
	}
	run := runner.Tool()
	// Without an approver of its own, the program is approved as any
	// call: by the agent's approver (a person through the sessions API).
	run.RequiresApproval = env.Programs == nil
	if err := ts.Add(run); err != nil {
		return nil, err
	}
	return ts, nil
}

// programsAndCapabilities sends the approval of run_code's programs to
// programs and every other approval to caps.
func programsAndCapabilities(programs, caps loop.Approver) loop.Approver {
	return loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		if programs != nil && req.Call.Name == runCodeName {
			return programs.Approve(ctx, req)
		}
		return caps.Approve(ctx, req)
	})
}

// builtinToolset builds every tool hrns offers, confined to workdir, for
// hrns tools.
func builtinToolset(workdir string) (*loop.Toolset, error) {
	names, _ := splitTask(allToolNames())
	ts, err := namedTools(names, &toolEnv{Dir: workdir, Programs: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Reject}, nil
	})})
	if err != nil {
		return nil, err
	}
	// Listed, never called here: a run gives it its model.
	if err := ts.Add(taskTool(nil, "", ts, "", 0)); err != nil {
		return nil, err
	}
	return ts, nil
}

// buildTools builds the run's toolset, and the text it adds to the system
// prompt. run_code's programs and the calls they make that require
// approval are decided by approver, as the run's other calls are.
func buildTools(ctx context.Context, names []string, o *runOptions, cfg *Config, stdio *IO, approver loop.Approver) (*loop.Toolset, string, func() error, error) {
	system := ""
	skillTools, skillPrompt, err := loadSkills(o, cfg, stdio)
	if err != nil {
		return nil, "", nil, err
	}
	mcpTools, closeMCP, err := mountMCP(ctx, o.mcp, &cfg.MCP, stdio)
	if err != nil {
		return nil, "", nil, err
	}
	more, err := loop.Join(skillTools, mcpTools)
	if err != nil {
		closeMCP()
		return nil, "", nil, usagef("%v (name the MCP server, or set its prefix, so that its tools do not clash)", err)
	}
	web, err := webFetchOptions(o.webAllow)
	if err != nil {
		closeMCP()
		return nil, "", nil, err
	}
	ts, err := namedTools(names, &toolEnv{
		Web:             web,
		Dir:             o.workdir,
		Shell:           shellOptions(o),
		Programs:        approver,
		Capabilities:    approver,
		ApprovalTimeout: 30 * time.Minute, // a person at a terminal
		More:            more,
	})
	if err != nil {
		closeMCP()
		return nil, "", nil, usagef("%v", err)
	}
	if ts.Len() > 0 {
		system = fmt.Sprintf("You work in the directory %s. Paths given to tools are relative to it.", o.absWorkdir())
	}
	if ts, err = loop.Join(ts, more); err != nil {
		closeMCP()
		return nil, "", nil, usagef("%v (name the MCP server, or set its prefix, so that its tools do not clash)", err)
	}
	if skillTools != nil {
		system = joinPrompts(system, skillPrompt)
	}
	return ts, system, closeMCP, nil
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
		if def.RequiresApproval || def.Name == runCodeName {
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
	return &tools.ShellOptions{
		Unconfined:    o.noSandbox,
		DenyNetwork:   o.noNetwork || o.commandNet == "none",
		PublicNetwork: o.commandNet == "public",
		NetworkAllow:  o.netAllow,
	}
}
