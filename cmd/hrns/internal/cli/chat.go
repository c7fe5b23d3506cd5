package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/tui"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/replay"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

const chatUsage = `Usage: hrns chat [flags]            a new conversation
       hrns chat --continue [flags] the last conversation of this directory
       hrns chat --resume [ID]      a saved conversation (without ID: the list)

The chat takes the flags of hrns run that make sense in it.`

// chatCommand opens the interactive chat (package tui).
func chatCommand(ctx context.Context, args []string, stdio *IO) error {
	return chatWith(ctx, args, stdio, nil)
}

// chatWith is hrns chat with preset setting options no flag sets.
func chatWith(ctx context.Context, args []string, stdio *IO, preset func(*runOptions)) error {
	var o runOptions
	if preset != nil {
		preset(&o)
	}
	var resume, demo bool
	fs := commandFlags("hrns chat", chatUsage, stdio)
	o.flags(fs)
	fs.BoolVar(&demo, "demo", false, "say that this is the offline demo (hrns demo sets it)")
	fs.BoolVar(&resume, "resume", false, "continue a saved conversation: the ID given after the flags, or pick one from the list")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(err)
	}
	resumeID := ""
	switch {
	case resume && len(pos) == 1:
		resumeID = pos[0]
	case len(pos) > 0:
		return usagef("chat takes no prompt (type it in the chat), got %q; for one task, use hrns run", pos)
	}
	switch {
	case o.json, o.outSchema != "", o.timeout != 0:
		return usagef("--json, --output-schema and --timeout are for hrns run")
	case o.cont && resume:
		return usagef("--continue and --resume cannot be used together")
	}
	o.prompt = "chat" // Validate wants one; the chat has its own
	if err := o.Validate(); err != nil {
		return err
	}
	if !stdio.interactive() || !stdio.outTerminal() {
		return usagef("hrns chat needs a terminal on stdin and stdout; for scripts, use hrns run \"PROMPT\"")
	}
	s, err := buildSession(ctx, &o, stdio)
	if err != nil {
		return err
	}
	defer s.close()
	if demo {
		s.notices = append(s.notices, "This is the offline demo: the model is a small script, not a language model, and it understands a few requests (say \"tell me about this directory\", \"read go.mod\", \"find TODO\", \"list docs\", \"help\"); the tools really read this directory.")
	}

	cfg := &tui.Config{
		Model: s.model, ModelName: s.modelName, Tools: s.tools, System: s.system,
		Options: loop.Options{MaxTurns: s.maxTurns, Reasoning: s.reasoning, Permissions: s.perms, Hooks: s.hooks},
		Workdir: o.absWorkdir(),
		Prices:  s.prices,
		Compaction: func(model string) *loop.Compaction {
			return s.cfg.compaction(model)
		},
		Notices: s.notices,
		Input:   stdio.In, Output: stdio.Out,
		ListModels: modelLister(s.client), KnownModels: knownModels(s.client, s.prices),
		Endpoint: endpointOf(s.client), ModelFixed: o.model != "",
		WithLiveOutput: func(ctx context.Context, f func(string, []byte)) context.Context {
			return tools.WithLiveOutput(ctx, f)
		},
	}
	if o.yes {
		cfg.Allow = allowAll{p: s.perms}
		cfg.Notices = append(cfg.Notices, "(--yes: every call is allowed without asking, but for deny rules and hooks)")
	} else {
		cfg.Allow = policyAllower{p: s.perms, remember: rememberFunc(o.workdir, stdio)}
	}
	st, err := openConversations(stdio.getenv)
	if err != nil {
		cfg.Notices = append(cfg.Notices, "(conversations are not saved: "+safetext.Escape(err.Error())+")")
	} else {
		defer st.Close()
		cfg.Store = st
		switch {
		case o.cont:
			if cfg.Resume, err = st.Last(o.absWorkdir()); err != nil {
				return usagef("--continue: %v", err)
			}
		case resumeID != "":
			if cfg.Resume, err = st.Get(resumeID); err != nil {
				return usagef("--resume: %v", err)
			}
		case resume:
			cfg.PickResume = true
		}
	}
	return tui.Run(ctx, cfg)
}

// policyAllower is the chat's [tui.Allower]: its "always" answers are
// allow rules added to the run's permission policy, the same rules as
// --allow and the config's (a tool, or a command prefix of run_command).
// The policy decides before the chat is asked, so nothing it would allow
// reaches Allowed.
type policyAllower struct {
	p *loop.Permissions
	// remember keeps a rule for the project (the chat's A and P answers).
	remember func(loop.Rule) error
}

func (policyAllower) Allowed(string, json.RawMessage) bool { return false }

func (a policyAllower) AlwaysAllow(tool, prefix string) error {
	a.p.AddAllow(chatRule(tool, prefix))
	return nil
}

// Remember implements [tui.Rememberer].
func (a policyAllower) Remember(tool, prefix string) error {
	if a.remember == nil {
		return errors.New("there is nowhere to keep it (neither XDG_CONFIG_HOME nor HOME is set)")
	}
	return a.remember(chatRule(tool, prefix))
}

// chatRule is the allow rule of a chat's "always" answer.
func chatRule(tool, prefix string) loop.Rule {
	r := loop.Rule{Tool: tool}
	if prefix != "" {
		r.Pattern = prefix + ":*"
	}
	return r
}

// allowAll is the chat's [tui.Allower] with --yes: every call is allowed
// while the mode is bypassPermissions; once Shift+Tab left it, the calls
// the policy sends to the approver are asked, and "always" answers are
// its allow rules.
type allowAll struct{ p *loop.Permissions }

func (a allowAll) Allowed(string, json.RawMessage) bool {
	return a.p.CurrentMode() == loop.ModeBypass
}

func (a allowAll) AlwaysAllow(tool, prefix string) error {
	a.p.AddAllow(chatRule(tool, prefix))
	return nil
}

// chatSetup is what a chat is made of: the model, the tools and
// the system prompt, built from the flags, the config and the agent file.
type chatSetup struct {
	model     llm.Model
	client    llm.Model // the provider's client, unwrapped
	modelName string
	tools     *loop.Toolset
	system    string
	maxTurns  int
	reasoning *llm.ReasoningConfig
	perms     *loop.Permissions
	hooks     []loop.Hook
	prices    pricing.Table
	cfg       *Config
	notices   []string
	closers   []func() error
}

func (s *chatSetup) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// buildSession builds the model, tools and system prompt of a chat the way
// runCommand builds those of a run.
func buildSession(ctx context.Context, o *runOptions, stdio *IO) (*chatSetup, error) {
	cfg, err := loadConfig(o.config, stdio.getenv)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	if err := cfg.mergeProject(o.workdir); err != nil {
		return nil, &usageError{err.Error()}
	}
	if err := cfg.trustProject(o, stdio); err != nil {
		return nil, err
	}
	agentDef, err := o.loadAgent()
	if err != nil {
		return nil, err
	}
	s := &chatSetup{}
	s.model, s.modelName, err = buildModel(o, cfg, agentDef, stdio.getenv)
	if err != nil {
		return nil, err
	}
	s.client = s.model
	s.model = diagnose(s.model)
	if o.replay != "" {
		s.notices = append(s.notices, "(replay: the model's answers come from "+o.replayName()+"; the tools run for real)")
	}
	if o.record != "" {
		rec, err := replay.Create(o.record, s.model, s.modelName)
		if err != nil {
			return nil, usagef("--record: %v", err)
		}
		s.closers = append(s.closers, rec.Close)
		s.model = rec
	}
	mode := o.permMode
	if o.yes {
		mode = string(loop.ModeBypass)
	}
	if s.perms, err = cfg.Permissions.policy(mode, o.allow, o.deny, o.ask); err != nil {
		return nil, usagef("%v", err)
	}
	if err := addRemembered(s.perms, o.workdir, stdio); err != nil {
		return nil, err
	}
	s.hooks = shellHooks(cfg.Hooks, &hookEnv{
		workdir: o.absWorkdir(), sessionID: newSessionID(), mode: s.perms.Mode, perms: s.perms,
		unconfined: o.noSandbox,
	})
	names, wantTask := splitTask(toolNames(o.tools, agentDef.Tools, cfg.Tools))
	// The browser (--browser, browser_* names) and the desktop
	// (--desktop), as in hrns run.
	names, browserSet, closeBrowser, err := browserTools(names, o)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() error { closeBrowser(); return nil })
	desktopSet, closeDesktop, err := desktopTools(ctx, o, func(line string) {
		s.notices = append(s.notices, "("+line+")")
	})
	if err != nil {
		s.close()
		return nil, err
	}
	s.closers = append(s.closers, func() error { closeDesktop(); return nil })
	// run_code's programs are approved by the chat's approver, as any
	// call; capability calls needing approval are refused inside them.
	tools, system, closeMCP, err := buildTools(ctx, names, o, cfg, stdio, nil)
	if err != nil {
		s.close()
		return nil, err
	}
	s.closers = append(s.closers, closeMCP)
	if s.tools, err = loop.Join(tools, browserSet, desktopSet); err != nil {
		s.close()
		return nil, usagef("%v", err)
	}
	ins, err := loadInstructions(o.workdir, stdio.getenv)
	if err != nil {
		s.close()
		return nil, usagef("%v", err)
	}
	if line := instructionsLoaded(ins); line != "" {
		s.notices = append(s.notices, "("+line+")")
	}
	if cfg.project != "" {
		s.notices = append(s.notices, "(project config: "+safetext.Escape(cfg.project)+")")
	}
	s.system = systemPrompt(o, agentDef, system, ins)
	s.maxTurns = firstNonZero(o.maxTurns, agentDef.MaxTurns, cfg.MaxTurns)
	if s.tools, err = addTaskTool(s.tools, wantTask, s.model, s.modelName, s.system, s.maxTurns); err != nil {
		s.close()
		return nil, err
	}
	if s.reasoning, err = session.ReasoningFor(s.model, s.modelName, firstString(o.reasoningEffort, agentDef.ReasoningEffort)); err != nil {
		s.close()
		return nil, usagef("--reasoning-effort: %v", err)
	}
	s.prices = pricing.Default().With(demoPrices).With(cfg.Prices)
	s.cfg = cfg
	return s, nil
}

// openConversations opens the store of saved conversations.
func openConversations(getenv func(string) string) (*tui.Store, error) {
	path := tui.DefaultStorePath(getenv)
	if path == "" {
		return nil, errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return tui.OpenStore(path)
}

// runConversation is the saved conversation of hrns run: the one it
// continues (--continue), or a new one.
type runConversation struct {
	store *tui.Store // nil until the run is saved, unless it continues
	conv  *tui.Conversation
	saved bool
	id    string // of the saved conversation
}

// savedID returns the ID of the conversation once it is saved, else "".
func (rc *runConversation) savedID() string {
	if rc == nil || !rc.saved {
		return ""
	}
	return rc.id
}

// startConversation prepares the conversation of a run. With --continue
// or --resume it opens the store and returns the earlier messages to send
// before the prompt; a store that cannot be opened is an error only then.
// Without, the store is opened when the run is saved, so that a run's
// first request waits for no database.
func startConversation(o *runOptions, modelName string, stdio *IO) (*runConversation, []llm.Message, error) {
	if !o.cont && o.resumeID == "" {
		return &runConversation{conv: tui.NewConversation(o.absWorkdir(), modelName)}, nil, nil
	}
	flag := "--continue"
	if o.resumeID != "" {
		flag = "--resume"
	}
	st, err := openConversations(stdio.getenv)
	if err != nil {
		return nil, nil, usagef("%s: %v", flag, err)
	}
	rc := &runConversation{store: st}
	if o.resumeID != "" {
		rc.conv, err = st.Get(o.resumeID)
	} else {
		rc.conv, err = st.Last(o.absWorkdir())
	}
	if err != nil {
		st.Close()
		return nil, nil, usagef("%s: %v", flag, err)
	}
	return rc, tui.Resumable(rc.conv.Messages), nil
}

// finish saves the run's transcript and closes the store. It runs before
// the run's end is shown, its answer already printed: a store that cannot
// be opened is said on stderr (the run then has no saved ID), but when
// there is no place for one (neither XDG_STATE_HOME nor HOME is set): that
// run is not saved, silently, as before.
func (rc *runConversation) finish(res *loop.Result, modelName, endpoint string, stdio *IO) {
	if rc == nil || rc.conv == nil {
		return
	}
	defer func() { rc.conv = nil }() // once
	if rc.store == nil {
		if res == nil || res.Messages == nil {
			return
		}
		if tui.DefaultStorePath(stdio.getenv) == "" {
			return
		}
		st, err := openConversations(stdio.getenv)
		if err != nil {
			fmt.Fprintf(stdio.Err, "hrns: the run was not saved: %v\n", err)
			return
		}
		rc.store = st
	}
	defer rc.store.Close()
	if res == nil || res.Messages == nil {
		return
	}
	rc.conv.Messages = tui.WithoutSystem(res.Messages)
	if rc.conv.Usage == nil {
		rc.conv.Usage = map[string]llm.Usage{}
	}
	u := rc.conv.Usage[modelName]
	u.Add(res.Usage)
	rc.conv.Usage[modelName] = u
	rc.conv.Model = modelName
	rc.conv.Endpoint = endpoint
	rc.conv.Updated = time.Now()
	if err := rc.store.Save(rc.conv); err != nil {
		fmt.Fprintf(stdio.Err, "hrns: %v\n", err)
		return
	}
	rc.saved = true
	rc.id = rc.conv.ID
}
