package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/replay"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/session"
)

// runOptions are the flags of "hrns run".
type runOptions struct {
	config    string
	provider  string
	model     string
	baseURL   string
	workdir   string
	tools     string
	system    string
	agentFile string
	// reasoningEffort is --reasoning-effort.
	reasoningEffort string
	maxTurns        int
	timeout         time.Duration
	json            bool
	yes             bool
	record          string
	replay          string
	// replayLabel, when set, names the replay for people instead of its
	// path.
	replayLabel string
	skills      stringList
	noSkills    bool
	mcp         stringList
	noSandbox   bool
	noNetwork   bool
	// commandNet is --command-network: all, public or none;
	// commandNetAllow is --command-network-allow, parsed into netAllow
	// by Validate.
	commandNet      string
	commandNetAllow string
	netAllow        func(netip.AddrPort) bool
	outSchema       string
	permMode        string
	allow           stringList
	ask             stringList
	deny            stringList
	cont            bool
	resumeID        string // hrns run --resume ID
	prompt          string
	stdinBytes      int // piped to stdin and added to the prompt
	// browser flags (cmd/hrns/internal/cli/browser.go)
	browser        bool
	browserAllow   string
	browserProfile string
	webAllow       string // web_fetch's allow-list
	// desktop flags (cmd/hrns/internal/cli/desktop.go)
	desktop        bool
	desktopSize    string
	desktopApps    stringList
	desktopWM      string
	desktopNetwork bool
	desktopDir     string
	// trustProject uses what the project's config enables beyond the
	// user's tools without asking (projecttrust.go).
	trustProject bool
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func (o *runOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.config, "config", "", "config file (default ~/.config/hrns/config.toml or .yaml)")
	fs.StringVar(&o.provider, "provider", "", "provider: openai, openai-responses, anthropic, gemini, or a name from the config file")
	fs.StringVar(&o.model, "model", "", "model name (default from the provider's *_MODEL variable or the config)")
	fs.StringVar(&o.baseURL, "base-url", "", "API base URL (default from OPENAI_BASE_URL or ANTHROPIC_BASE_URL)")
	fs.StringVar(&o.workdir, "workdir", ".", "root directory of the file and shell tools")
	fs.StringVar(&o.tools, "tools", "", "comma-separated tools (hrns tools lists them; run_code's capabilities are the others selected), \"all\" or \"none\" (default "+strings.Join(defaultTools, ",")+")")
	fs.StringVar(&o.system, "system", "", "system prompt")
	fs.StringVar(&o.reasoningEffort, "reasoning-effort", "", "how much the model thinks before each step: disabled, low, medium, high or xhigh, as each provider takes it (default: the model's)")
	fs.StringVar(&o.agentFile, "agent", "", "agent file: Markdown whose body is the system prompt, with optional front matter (model, tools, max_turns)")
	fs.IntVar(&o.maxTurns, "max-turns", 0, "maximum model requests; the last asks for a final answer (default 50)")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop the run after this long (default none)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line for every event of the run")
	fs.BoolVar(&o.yes, "yes", false, "approve every tool call without asking: --permission-mode bypassPermissions (deny rules and hooks still apply)")
	fs.StringVar(&o.permMode, "permission-mode", "", "how calls no rule decides are treated: default (ask for tools that change things), acceptEdits (file edits allowed), plan (read-only tools only) or bypassPermissions (default from the config, else default)")
	fs.Var(&o.allow, "allow", "a permission rule allowing calls without asking, like run_command(git status:*) or read_file (repeatable)")
	fs.Var(&o.ask, "ask", "a permission rule whose calls are always asked, whatever the mode (but bypassPermissions), like run_command(git push:*) (repeatable)")
	fs.Var(&o.deny, "deny", "a permission rule refusing calls, like run_command(rm:*) or write_file(**/.env) (repeatable)")
	fs.StringVar(&o.record, "record", "", "record the model's responses to this file")
	fs.StringVar(&o.replay, "replay", "", "replay the model's responses from this file instead of calling a model (tools still run)")
	fs.Var(&o.skills, "skills", "a folder of skills to add (repeatable)")
	fs.BoolVar(&o.noSkills, "no-skills", false, "do not discover skills")
	fs.BoolVar(&o.noSandbox, "no-sandbox", false, "run commands without confinement (by default run_command is confined to --workdir with Landlock where the kernel supports it)")
	fs.BoolVar(&o.noNetwork, "deny-network", false, "deny network access to commands run by run_command (--command-network none)")
	fs.StringVar(&o.commandNet, "command-network", "all", "the network of commands run by run_command: all (this machine's, as you have it), public (only the public internet, through a proxy of hrns's that refuses loopback, private, link-local and metadata addresses and this machine's own) or none")
	fs.StringVar(&o.commandNetAllow, "command-network-allow", "", "with --command-network public, addresses commands may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port")
	fs.BoolVar(&o.browser, "browser", false, "give the model a headless Chromium (the browser_* tools; see docs/browser.md)")
	fs.StringVar(&o.browserAllow, "browser-allow", "", "addresses the browser may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port")
	fs.StringVar(&o.browserProfile, "browser-profile", "", "start the browser from a copy of a Chromium user-data directory, given as a zip, tar or tar.gz of its contents (as hrns serve's /api/v2/browser-profiles takes it); the copy is removed when the run ends")
	fs.StringVar(&o.webAllow, "web-allow", "", "addresses web_fetch may reach beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port (127.0.0.1:8080); never a cloud metadata address")
	fs.BoolVar(&o.desktop, "desktop", false, "give the model a private desktop in the sandbox (Xvfb, a window manager, a terminal and the browser) through the computer tool; see docs/desktop.md")
	fs.StringVar(&o.desktopSize, "desktop-size", "", "the desktop's screen, WIDTHxHEIGHT (default 1280x800)")
	fs.Var(&o.desktopApps, "desktop-app", "a command line started on the desktop, in place of the terminal and the browser (repeatable; \"none\" for none)")
	fs.StringVar(&o.desktopWM, "desktop-wm", "", "the desktop's window manager's command line, or \"none\" (default twm, if installed)")
	fs.BoolVar(&o.desktopNetwork, "desktop-network", false, "let the desktop's apps use the network (by default they have none)")
	fs.StringVar(&o.desktopDir, "desktop-dir", "", "keep the desktop's folder (its home, the apps' output, the display's log) here; by default a temporary one, removed at the end")
	fs.StringVar(&o.outSchema, "output-schema", "", "a JSON Schema file: the final answer must be JSON matching it; stdout gets only that JSON (progress goes to stderr), and the run fails if the answer never matches")
	fs.BoolVar(&o.trustProject, "trust-project", false, "use the tools the project's .hrns/config.toml enables beyond yours (web_fetch, run_code...), and the allow rules, hooks and MCP servers of its Claude Code files, without being asked; by default a terminal asks once per project and file content, and a run without one refuses (.hrns) or leaves them out (Claude Code's)")
	fs.BoolVar(&o.cont, "continue", false, "continue the last conversation of this directory (a chat's or a run's)")
	fs.Var(&o.mcp, "mcp", "an MCP server whose tools to add: '[NAME=]COMMAND ARGS', '[NAME=]URL', or the NAME of one in the config (repeatable)")
}

// Validate checks the options that do not depend on the configuration.
func (o *runOptions) Validate() error {
	if strings.TrimSpace(o.prompt) == "" {
		return usagef("run needs a prompt: hrns run \"what to do\" (or piped: ... | hrns run -)")
	}
	if o.maxTurns < 0 {
		return usagef("--max-turns must be positive")
	}
	if o.record != "" && o.replay != "" {
		return usagef("--record and --replay cannot be used together")
	}
	if o.system != "" && o.agentFile != "" {
		return usagef("--system and --agent cannot be used together")
	}
	if o.outSchema != "" && o.json {
		return usagef("--output-schema and --json cannot be used together: --output-schema prints only the answer")
	}
	if o.yes && o.permMode != "" && o.permMode != string(loop.ModeBypass) {
		return usagef("--yes means --permission-mode bypassPermissions: it cannot be used with --permission-mode %s", o.permMode)
	}
	switch o.commandNet {
	case "all", "public", "none", "":
	default:
		return usagef("--command-network %q: want all, public or none", o.commandNet)
	}
	if o.commandNetAllow != "" && o.commandNet != "public" {
		return usagef("--command-network-allow needs --command-network public")
	}
	allow, err := browser.ParseAllowList(o.commandNetAllow)
	if err != nil {
		return usagef("--command-network-allow: %v", err)
	}
	o.netAllow = allow
	fi, err := os.Stat(o.workdir)
	if err != nil || !fi.IsDir() {
		return usagef("--workdir %s is not a directory", o.workdir)
	}
	return nil
}

// replayName names the replayed responses for people.
func (o *runOptions) replayName() string {
	if o.replayLabel != "" {
		return o.replayLabel
	}
	return safetext.Escape(o.replay)
}

func runCommand(ctx context.Context, args []string, stdio *IO) error {
	return runWith(ctx, args, stdio, nil)
}

// runWith is hrns run with preset setting options no flag sets.
func runWith(ctx context.Context, args []string, stdio *IO, preset func(*runOptions)) error {
	var o runOptions
	if preset != nil {
		preset(&o)
	}
	fs := flag.NewFlagSet("hrns run", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	o.flags(fs)
	fs.StringVar(&o.resumeID, "resume", "", "continue the saved conversation of this ID (a chat's or a run's: --json's end line gives it as session_id)")
	fs.Usage = func() { printUsage(fs, stdio.Err, `Usage: hrns run [flags] "PROMPT"`) }
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(err)
	}
	o.prompt = strings.Join(pos, " ")
	if err := o.readStdin(stdio); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.cont && o.resumeID != "" {
		return usagef("--continue and --resume cannot be used together")
	}
	o.describeStdin(stdio)
	cfg, err := loadConfig(o.config, stdio.getenv)
	if err != nil {
		return &usageError{err.Error()}
	}
	if err := cfg.mergeProject(o.workdir); err != nil {
		return &usageError{err.Error()}
	}
	if err := cfg.trustProject(&o, stdio); err != nil {
		return err
	}
	agentDef, err := o.loadAgent()
	if err != nil {
		return err
	}
	mode := o.permMode
	if o.yes {
		mode = string(loop.ModeBypass)
	}
	perms, err := cfg.Permissions.policy(mode, o.allow, o.deny, o.ask)
	if err != nil {
		return usagef("%v", err)
	}
	if err := addRemembered(perms, o.workdir, stdio); err != nil {
		return err
	}
	outSchema, err := o.loadOutputSchema()
	if err != nil {
		return err
	}

	model, modelName, err := buildModel(&o, cfg, agentDef, stdio.getenv)
	if err != nil {
		return err
	}
	model0 := model // the provider's client, before it is wrapped
	prices := pricing.Default().With(cfg.Prices)
	tel, err := setupTelemetry(ctx, stdio.getenv, providerName(model), stdio.Err)
	if err != nil {
		return err
	}
	defer tel.close(ctx, stdio.Err)
	model = diagnose(model) // after providerName, which reads the provider's type
	if o.replay != "" && !o.json {
		fmt.Fprintf(stdio.Err, "(replay: the model's answers come from %s; the tools run for real)\n", o.replayName())
	}
	if o.record != "" {
		rec, err := replay.Create(o.record, model, modelName)
		if err != nil {
			return usagef("--record: %v", err)
		}
		defer rec.Close()
		model = rec
	}

	approver := newTermApprover(stdio, perms)
	approver.remember = rememberFunc(o.workdir, stdio)
	names := toolNames(o.tools, agentDef.Tools, cfg.Tools)
	names, wantTask := splitTask(names)
	names, browserSet, closeBrowser, err := browserTools(names, &o)
	if err != nil {
		return err
	}
	defer closeBrowser()
	desktopSet, closeDesktop, err := desktopTools(ctx, &o, func(s string) {
		if !o.json {
			fmt.Fprintf(stdio.Err, "(%s)\n", s)
		}
	})
	if err != nil {
		return err
	}
	defer closeDesktop()
	tools, system, closeMCP, err := buildTools(ctx, names, &o, cfg, stdio, approver)
	if err != nil {
		return err
	}
	defer closeMCP()
	if tools, err = loop.Join(tools, browserSet, desktopSet); err != nil {
		return usagef("%v", err)
	}
	ins, err := loadInstructions(o.workdir, stdio.getenv)
	if err != nil {
		return usagef("%v", err)
	}
	if line := instructionsLoaded(ins); line != "" && !o.json {
		fmt.Fprintf(stdio.Err, "(%s)\n", line)
	}
	system = systemPrompt(&o, agentDef, system, ins)

	maxTurns := firstNonZero(o.maxTurns, agentDef.MaxTurns, cfg.MaxTurns)
	if tools, err = addTaskTool(tools, wantTask, model, modelName, system, maxTurns); err != nil {
		return err
	}
	hooks := shellHooks(cfg.Hooks, &hookEnv{
		workdir: o.absWorkdir(), sessionID: newSessionID(), mode: perms.Mode,
		unconfined: o.noSandbox,
	})
	reasoning, err := session.ReasoningFor(model, modelName, firstString(o.reasoningEffort, agentDef.ReasoningEffort))
	if err != nil {
		return usagef("--reasoning-effort: %v", err)
	}
	agent := loop.NewAgent(model, tools, &loop.Options{
		Model:           modelName,
		Reasoning:       reasoning,
		MaxTurns:        maxTurns,
		Approver:        approver,
		ApprovalTimeout: 30 * time.Minute, // a person at a terminal
		OutputSchema:    outSchema,
		Observer:        tel.observer,
		Permissions:     perms,
		Hooks:           hooks,
		Compaction:      cfg.compaction(modelName),
	})

	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var msgs []llm.Message
	if system != "" {
		msgs = append(msgs, llm.SystemMessage(system))
	}
	conv, earlier, err := startConversation(&o, modelName, stdio)
	if err != nil {
		return err
	}
	msgs = append(append(msgs, earlier...), llm.UserMessage(o.prompt))

	var out renderer
	switch {
	case o.json:
		jr := newJSONRenderer(stdio.Out)
		jr.sessionID = conv.savedID
		jr.cost = func(u llm.Usage) (float64, bool) {
			p, ok := prices.Lookup(modelName)
			if !ok {
				return 0, false
			}
			return p.Cost(pricing.Usage(u)).Total, true
		}
		out = jr
	case outSchema != nil:
		// stdout is for the validated answer alone; what the run says
		// on the way (including rejected answers) goes to stderr.
		out = newTextRenderer(stdio.Err, stdio.Err, false)
	default:
		out = newTextRenderer(stdio.Out, stdio.Err, stdio.outTerminal())
	}
	if tr, ok := out.(*textRenderer); ok {
		tr.configure(modelName, cfg, stdio)
		// Nothing draws over a question (approve.go).
		approver.hold = tr.hold
	}
	var res *loop.Result
	for chunk := range agent.RunLoop(ctx, msgs) {
		if chunk.Type == loop.ChunkEnd {
			res = chunk.Result
			// Saved before the end line, which names it.
			conv.finish(res, modelName, endpointOf(model0), stdio)
		}
		out.chunk(chunk)
	}
	if res == nil {
		conv.finish(nil, modelName, "", stdio) // closes the store
	}
	if err := out.close(); err != nil {
		return err
	}
	if res.Err != nil {
		if o.timeout > 0 && errors.Is(res.Err, context.DeadlineExceeded) {
			return fmt.Errorf("the run was stopped: --timeout %v was reached", o.timeout)
		}
		return runError(res.Err, modelName)
	}
	if outSchema != nil {
		fmt.Fprintln(stdio.Out, res.Answer)
	}
	return nil
}

// loadOutputSchema reads --output-schema: a JSON Schema file. The loop
// checks it again before the first request; checking it here makes a bad
// file a usage error, found before any model is called.
func (o *runOptions) loadOutputSchema() (*loop.OutputSchema, error) {
	if o.outSchema == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.outSchema)
	if err != nil {
		return nil, usagef("--output-schema: %v", err)
	}
	// The file's name names the answer for the model ("city.json":
	// city), as far as a name allows.
	name := strings.TrimSuffix(filepath.Base(o.outSchema), filepath.Ext(o.outSchema))
	name = strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return -1
	}, name)
	s := &loop.OutputSchema{Name: name[:min(len(name), 64)], Schema: data}
	if err := s.Check(); err != nil {
		return nil, usagef("--output-schema %s: %v", o.outSchema, err)
	}
	return s, nil
}

// runError adds what to do next to the errors a person can fix.
func runError(err error, model string) error {
	switch {
	case errors.Is(err, llm.ErrAuth):
		return fmt.Errorf("%w\nThe API key was refused: check OPENAI_API_KEY (or ANTHROPIC_API_KEY, or the provider's api_key_env in the config)", err)
	case errors.Is(err, llm.ErrBadRequest) && strings.Contains(strings.ToLower(err.Error()), "model"):
		return fmt.Errorf("%w\nIs %q a model this endpoint serves? Pick one with --model", err, model)
	case errors.Is(err, llm.ErrContextLength):
		return fmt.Errorf("%w\nThe conversation does not fit %q's context window. hrns compacts it before the window it knows for the model is reached, and once after such a refusal, unless [compaction] enabled = false: give the model's window with [context_windows] in the config, lower [compaction] target, or start a new conversation", err, model)
	case errors.Is(err, replay.ErrExhausted):
		return fmt.Errorf("%w: the recording ended before the run did", err)
	}
	return err
}

// agentFile is an agent defined in a Markdown file.
type agentFile struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Model       string    `yaml:"model"`
	Provider    string    `yaml:"provider"`
	Tools       toolsList `yaml:"tools"`
	MaxTurns    int       `yaml:"max_turns"`
	// ReasoningEffort is the sessions API's reasoning_effort: disabled,
	// low, medium, high or xhigh.
	ReasoningEffort string `yaml:"reasoning_effort"`
	System          string `yaml:"-"`
}

// toolsList reads a YAML list of tool names, or one comma-separated string.
type toolsList []string

func (l *toolsList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = splitList(n.Value)
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

func (o *runOptions) loadAgent() (*agentFile, error) {
	a := &agentFile{}
	if o.agentFile == "" {
		return a, nil
	}
	data, err := os.ReadFile(o.agentFile)
	if err != nil {
		return nil, usagef("--agent: %v", err)
	}
	body := data
	if rest, ok := bytes.CutPrefix(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("---\n")); ok {
		front, after, found := bytes.Cut(rest, []byte("\n---\n"))
		if !found {
			front, found = bytes.CutSuffix(rest, []byte("\n---"))
			after = nil
		}
		if !found {
			return nil, usagef("--agent %s: front matter opened with --- is never closed", o.agentFile)
		}
		dec := yaml.NewDecoder(bytes.NewReader(front))
		dec.KnownFields(true)
		if err := dec.Decode(a); err != nil && !errors.Is(err, io.EOF) {
			return nil, usagef("--agent %s: front matter: %v", o.agentFile, yamlKeyError(err, agentFileKeys))
		}
		body = after
	}
	a.System = strings.TrimSpace(string(body))
	return a, nil
}

// buildModel picks the provider and model from flags, environment, agent
// file and config, in that order of precedence.
func buildModel(o *runOptions, cfg *Config, a *agentFile, getenv func(string) string) (llm.Model, string, error) {
	if o.replay != "" {
		p, err := replay.Open(o.replay)
		if err != nil {
			return nil, "", usagef("--replay: %v", err)
		}
		return p, firstString(o.model, p.Model), nil
	}
	name := firstString(o.provider, a.Provider, getenv("HRNS_PROVIDER"), cfg.Provider)
	if _, configured := cfg.Providers[name]; name == "demo" && !configured {
		// The offline demo's scripted model (hrns demo): no key, no
		// network, answers written from what the reading tools return.
		return &demoModel{}, demoModelName, nil
	}
	if name == "" {
		name = keyedProvider(cfg, getenv)
	}
	p, named := cfg.Providers[name]
	if !named {
		switch name {
		case "openai", "openai-responses", "anthropic", "gemini":
			p = Provider{Kind: name}
		default:
			return nil, "", usagef("unknown provider %q: use openai, openai-responses, anthropic, gemini, demo (the offline scripted model), or a provider of the config file%s", name, cfg.where())
		}
	}
	kind := firstString(p.Kind, "openai")
	prefix := strings.ToUpper(kind) // OPENAI_, ANTHROPIC_ or GEMINI_, for the built-in providers
	if kind == "openai-responses" {
		prefix = "OPENAI" // the same account, key and server as openai
	}
	// The environment wins over the config file for the built-in
	// providers, configured there or not (docs/cli.md); a provider of
	// another name has only what the file gives it.
	builtin := name == "openai" || name == "openai-responses" || name == "anthropic"
	envFor := func(k string) string {
		if named && !builtin {
			return ""
		}
		return getenv(prefix + "_" + k)
	}
	key := firstString(envIf(getenv, p.APIKeyEnv), envFor("API_KEY"), p.APIKey)
	if kind == "gemini" && !named && key == "" {
		key = getenv("GOOGLE_API_KEY") // Google's SDKs read either
	}
	baseURL := firstString(o.baseURL, envFor("BASE_URL"), p.BaseURL)
	model := firstString(o.model, a.Model, envFor("MODEL"), getenv("HRNS_MODEL"), p.Model, cfg.Model)
	headers := http.Header{}
	for k, v := range p.Headers {
		headers.Set(k, v)
	}
	if model == "" && key != "" && baseURL == "" && (builtin || !named) {
		// The provider's own endpoint, with a key: its default model.
		model = defaultModels[kind]
	}
	if model == "" {
		if key == "" && baseURL == "" && !named {
			return nil, "", usagef("no model configured and no key: set OPENAI_API_KEY (hrns then uses %s), ANTHROPIC_API_KEY (%s) or GEMINI_API_KEY (%s); "+
				"for another server, pass --base-url URL and --model NAME.\nWithout a key, try the offline demo: hrns demo",
				defaultModels["openai"], defaultModels["anthropic"], defaultModels["gemini"])
		}
		return nil, "", usagef("no model configured: pass --model NAME, set %s_MODEL, or set model in ~/.config/hrns/config.toml", prefix)
	}
	switch kind {
	case "anthropic":
		if key == "" && baseURL == "" {
			return nil, "", usagef("no Anthropic API key: set ANTHROPIC_API_KEY (or api_key_env in the config)")
		}
		return &anthropic.Client{BaseURL: baseURL, APIKey: key, Model: model, Headers: headers, HTTPClient: providerHTTP()}, model, nil
	case "gemini":
		if key == "" && baseURL == "" {
			return nil, "", usagef("no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY, or api_key_env in the config)")
		}
		return &gemini.Client{BaseURL: baseURL, APIKey: key, Model: model, Headers: headers, HTTPClient: providerHTTP()}, model, nil
	case "openai-responses":
		if key == "" && baseURL == "" {
			return nil, "", usagef("no OpenAI API key: set OPENAI_API_KEY, or point --base-url (or OPENAI_BASE_URL) at a server that speaks the Responses API")
		}
		return &responses.Client{BaseURL: baseURL, APIKey: key, Model: model, Headers: headers, HTTPClient: providerHTTP()}, model, nil
	default:
		if key == "" && baseURL == "" {
			return nil, "", usagef("no OpenAI API key: set OPENAI_API_KEY, or point --base-url (or OPENAI_BASE_URL) at an OpenAI-compatible server such as Ollama (http://localhost:11434/v1)")
		}
		return &openai.Client{BaseURL: baseURL, APIKey: key, Model: model, Headers: headers, HTTPClient: providerHTTP()}, model, nil
	}
}

// defaultModels are the models used on a provider's own endpoint when a
// key is set and no model is named (docs/cli.md, "Choosing a model"):
// current models good at tool use (OpenAI's and Anthropic's priced in
// the built-in table).
var defaultModels = map[string]string{
	"openai":           "gpt-4.1",
	"openai-responses": "gpt-4.1",
	"anthropic":        "claude-sonnet-4-5",
	"gemini":           "gemini-2.5-flash",
}

// keyedProvider is the provider when none is named: openai, unless the
// config sets up none and only Anthropic's or Gemini's key (or base URL)
// is in the environment.
func keyedProvider(cfg *Config, getenv func(string) string) string {
	if len(cfg.Providers) > 0 || cfg.Model != "" || getenv("OPENAI_API_KEY") != "" || getenv("OPENAI_BASE_URL") != "" {
		return "openai"
	}
	switch {
	case getenv("ANTHROPIC_API_KEY") != "" || getenv("ANTHROPIC_BASE_URL") != "":
		return "anthropic"
	case getenv("GEMINI_API_KEY") != "" || getenv("GOOGLE_API_KEY") != "" || getenv("GEMINI_BASE_URL") != "":
		return "gemini"
	}
	return "openai"
}

func (c *Config) where() string {
	if c.path == "" {
		return ""
	}
	return " (" + c.path + ")"
}

func envIf(getenv func(string) string, name string) string {
	if name == "" {
		return ""
	}
	return getenv(name)
}

func firstString(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstNonZero(n ...int) int {
	for _, v := range n {
		if v != 0 {
			return v
		}
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func joinPrompts(a, b string) string {
	if b == "" {
		return a
	}
	return a + "\n\n" + b
}

// absWorkdir returns the absolute working directory.
func (o *runOptions) absWorkdir() string {
	abs, err := filepath.Abs(o.workdir)
	if err != nil {
		return o.workdir
	}
	return abs
}
