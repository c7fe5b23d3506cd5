package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Hooks: the functions of Options.Hooks, called from the steps of a turn
// (see run.runTurns): run_start and user_prompt before the first turn
// (startHooks), pre_tool in a call's permission (preToolHooks, from
// authorize.go), post_tool on its result (postToolHooks, from exec.go), stop
// on an answer (stopHooks, from answer.go), pre_compact (compact.go), and
// run_end (endHooks, from run.end). Each event's runner is here; callHook
// is the one way a hook is called.

// HookEvent names a point of a run where hooks are called.
type HookEvent string

// Hook events.
const (
	// HookPreTool runs before a tool call, after its arguments are
	// validated: it may allow, deny (with a reason the model reads) or
	// ask (send the call to the approver), and rewrite the arguments.
	// It is the first step of the permission evaluation (see
	// [Permissions]). A hook that fails or times out denies the call.
	HookPreTool HookEvent = "pre_tool"
	// HookPostTool runs after a tool call returned, before the model
	// sees the result: it may replace the result (to redact it). A
	// hook that fails or times out withholds the result: the model is
	// told the call's result was withheld.
	HookPostTool HookEvent = "post_tool"
	// HookUserPrompt runs on the user's messages: each of the user
	// messages that end the messages given to [Agent.RunLoop] (those
	// after the last message of another role), and each user message
	// given to [Agent.Resume]. It may add context (text added
	// to the message) or block it: the run then fails with
	// [ErrPromptBlocked] before the model sees the message.
	HookUserPrompt HookEvent = "user_prompt"
	// HookStop runs when the model gives its final answer: it may let
	// the run end, or block the stop with a reason, which is sent to the
	// model as a user message so that it goes on. Each continuation
	// costs a turn: MaxTurns bounds them. The input's StopHookActive
	// says the run already continued because of a stop hook.
	HookStop HookEvent = "stop"
	// HookSubagentStop is HookStop for the runs of sub-agents (see
	// [AgentTool]) of the agent it is registered on.
	HookSubagentStop HookEvent = "subagent_stop"
	// HookPreCompact runs before the transcript is compacted (see
	// [Compaction]); it is told why. Its decision is ignored.
	HookPreCompact HookEvent = "pre_compact"
	// HookRunStart runs when a run starts or resumes, before the first
	// request; on a fresh run its Context is added to the last user
	// message.
	HookRunStart HookEvent = "run_start"
	// HookRunEnd runs when a run ends, with its status; its decision
	// is ignored.
	HookRunEnd HookEvent = "run_end"
)

// A Hook is a function called at one point of every run of an agent
// (Options.Hooks). Hooks of one event run one at a time, in the order
// given, on the run's goroutine: a slow hook holds the run up to its
// Timeout. A hook's failure (an error, a panic, or no answer by its
// Timeout) is reported by a [ChunkHook] chunk with Err set; it refuses the
// call for [HookPreTool] and withholds the result for [HookPostTool], and
// changes nothing for the other events.
type Hook struct {
	// Name names the hook in reports; empty means the event's name.
	Name  string
	Event HookEvent
	// Match selects the tools of [HookPreTool] and [HookPostTool] hooks
	// by name: a name or a glob (path.Match syntax); empty matches every
	// tool. Other events ignore it.
	Match string
	// Timeout bounds one call of the hook; 0 means 60 seconds.
	Timeout time.Duration
	// Func is the hook. A nil output means no opinion.
	Func func(ctx context.Context, in *HookInput) (*HookOutput, error)

	// reportAs is the event reported for a parent's subagent_stop hook
	// run as a child's stop hook.
	reportAs HookEvent
}

// HookInput is what a hook is told. Fields that do not belong to the
// event are left at their zero values.
type HookInput struct {
	Event HookEvent `json:"hook_event_name"`
	// Agent and Depth name the sub-agent whose run calls the hook (see
	// [AgentTool]); they are empty for the top-level run.
	Agent string `json:"agent,omitempty"`
	Depth int    `json:"depth,omitempty"`

	// Tool, CallID and Arguments describe the call (pre_tool,
	// post_tool). Arguments are validated, with defaults applied.
	Tool      string          `json:"tool_name,omitempty"`
	CallID    string          `json:"tool_use_id,omitempty"`
	Arguments json.RawMessage `json:"tool_input,omitempty"`
	// Result is the call's result as the model would read it, and
	// IsError says it is a failure (post_tool).
	Result  *string `json:"tool_response,omitempty"`
	IsError bool    `json:"is_error,omitempty"`

	// Prompt is the user's message text (user_prompt).
	Prompt string `json:"prompt,omitempty"`
	// Answer is the model's final answer (stop, subagent_stop).
	Answer string `json:"answer,omitempty"`
	// StopHookActive says the run already went on because a stop hook
	// blocked a stop (stop, subagent_stop).
	StopHookActive bool `json:"stop_hook_active,omitempty"`
	// Trigger is why the transcript is compacted (pre_compact): a
	// [CompactionInfo] reason.
	Trigger string `json:"trigger,omitempty"`
	// Status and Error say how the run ended (run_end).
	Status Status `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`

	// Messages is the transcript so far; hooks must not change it.
	Messages []llm.Message `json:"-"`
}

// HookDecision is a hook's answer.
type HookDecision string

// Hook decisions.
const (
	// HookNone: no opinion (the empty string).
	HookNone HookDecision = ""
	// HookAllow lets a call run without the later permission steps.
	HookAllow HookDecision = "allow"
	// HookDeny refuses a call; the model reads Reason.
	HookDeny HookDecision = "deny"
	// HookAsk sends a call to the approver, whatever the mode and the
	// allow rules say (deny rules still refuse it).
	HookAsk HookDecision = "ask"
	// HookBlock blocks a user prompt (the run fails), or a stop (the
	// run goes on with Reason as a user message).
	HookBlock HookDecision = "block"
)

// HookOutput is a hook's answer. A nil output means no opinion.
type HookOutput struct {
	// Decision is allow, deny or ask for pre_tool; block for
	// user_prompt and stop; empty for no opinion.
	Decision HookDecision
	// Reason is read by the model for deny and for a blocked stop, and
	// by the caller for a blocked prompt.
	Reason string
	// Arguments, for pre_tool, replace the call's arguments. They are
	// validated against the tool's schema again; invalid ones refuse the
	// call.
	Arguments json.RawMessage
	// Output, for post_tool, replaces the call's result.
	Output *Output
	// Context, for user_prompt and run_start, is text added to the
	// user's message.
	Context string
	// Message is a note for the person watching the run (a warning, a
	// non-blocking failure): it is reported by a hook chunk whose
	// decision is "message", and the model does not see it.
	Message string
}

// ErrPromptBlocked: a [HookUserPrompt] hook blocked the user's message;
// the error's text holds the hook's reason.
var ErrPromptBlocked = errors.New("prompt blocked by a hook")

// HookReport describes a hook's intervention, on hook chunks.
type HookReport struct {
	Event HookEvent `json:"event"`
	Name  string    `json:"name"`
	// Decision is what the hook decided: a HookDecision, "rewrite"
	// (arguments), "replace" (a result), "context", "message" (a note
	// for the person, in Content), or "error".
	Decision string `json:"decision"`
}

// defaultHookTimeout bounds a hook without its own Timeout.
const defaultHookTimeout = 60 * time.Second

// hookSet holds an agent's hooks by event; nil when there are none, so
// that a run without hooks pays one nil check at each point.
type hookSet struct {
	by map[HookEvent][]*Hook
}

func newHookSet(hooks []Hook) *hookSet {
	if len(hooks) == 0 {
		return nil
	}
	hs := &hookSet{by: make(map[HookEvent][]*Hook)}
	for i := range hooks {
		h := hooks[i]
		if h.Func == nil {
			continue
		}
		if h.Timeout <= 0 {
			h.Timeout = defaultHookTimeout
		}
		if h.Name == "" {
			h.Name = string(h.Event)
		}
		hs.by[h.Event] = append(hs.by[h.Event], &h)
	}
	return hs
}

// matching returns the hooks of ev that apply to tool (for tool events).
func (hs *hookSet) matching(ev HookEvent, tool string) []*Hook {
	if hs == nil {
		return nil
	}
	all := hs.by[ev]
	if tool == "" {
		return all
	}
	var out []*Hook
	for _, h := range all {
		if h.Match == "" || h.Match == tool {
			out = append(out, h)
		} else if ok, _ := path.Match(h.Match, tool); ok {
			out = append(out, h)
		}
	}
	return out
}

// callHook calls h with in under its timeout. A hook that ignores its
// context is abandoned when the timeout passes; a panic is an error.
func callHook(ctx context.Context, h *Hook, in *HookInput) (*HookOutput, error) {
	hctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	in.Event = h.Event
	if h.reportAs != "" {
		in.Event = h.reportAs
	}
	type answer struct {
		out *HookOutput
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- answer{err: fmt.Errorf("hook panicked: %v", v)}
			}
		}()
		out, err := h.Func(hctx, in)
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		if a.err != nil && errors.Is(a.err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("hook timed out after %v", h.Timeout)
		}
		return a.out, a.err
	case <-hctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("hook timed out after %v", h.Timeout)
	}
}

// hookChunk reports a hook's intervention or failure.
func hookChunk(h *Hook, ev HookEvent, decision, content string, err error) Chunk {
	if h.reportAs != "" {
		ev = h.reportAs
	}
	return Chunk{Type: ChunkHook, Content: content, Err: err, Hook: &HookReport{Event: ev, Name: h.Name, Decision: decision}}
}

// preToolHooks runs the pre_tool hooks of p's tool. It returns the
// combined decision (deny wins, then ask, then allow) with the hook that
// made it and its reason; a denial, a failure or invalid rewritten
// arguments fail p.
func (x *executor) preToolHooks(ctx context.Context, p *execCall, hs []*Hook) (final HookDecision, by, why string) {
	for _, h := range hs {
		in := &HookInput{Tool: p.call.Name, CallID: p.call.ID, Arguments: p.parsed.Arguments, Agent: x.agentName, Depth: x.depth}
		out, err := callHook(ctx, h, in)
		if ctx.Err() != nil {
			return HookDeny, h.Name, ""
		}
		if err != nil {
			msg := fmt.Sprintf("the call to tool %q was not run: the hook %q that checks it failed (%v)", p.call.Name, h.Name, err)
			x.emit(hookChunk(h, HookPreTool, "error", msg, err))
			x.failCall(p, &ToolError{Kind: ToolRefused, Msg: msg, Err: errors.Join(ErrPermission, err),
				Permission: &PermissionDecision{Behavior: Deny, Step: StepHook, Rule: h.Name, Reason: msg}})
			return HookDeny, h.Name, ""
		}
		if out == nil {
			continue
		}
		if out.Message != "" {
			x.emit(hookChunk(h, HookPreTool, "message", out.Message, nil))
		}
		if len(out.Arguments) > 0 {
			args, m, err := p.tool.parseArgs(llm.Arguments(out.Arguments))
			if err != nil {
				msg := fmt.Sprintf("the call to tool %q was not run: the hook %q rewrote its arguments into invalid ones (%v)", p.call.Name, h.Name, err)
				x.emit(hookChunk(h, HookPreTool, "error", msg, err))
				x.failCall(p, &ToolError{Kind: ToolRefused, Msg: msg, Err: errors.Join(ErrPermission, err),
					Permission: &PermissionDecision{Behavior: Deny, Step: StepHook, Rule: h.Name, Reason: msg}})
				return HookDeny, h.Name, ""
			}
			p.parsed.Arguments, p.parsed.Args = args, m
			// What runs, and what a resumption runs, are the new
			// arguments.
			p.state.Call.Arguments = llm.Arguments(args)
			x.emit(hookChunk(h, HookPreTool, "rewrite", string(args), nil))
		}
		switch out.Decision {
		case HookDeny:
			msg := rejection(p.call.Name, firstNonEmpty(out.Reason, "a hook denied it"))
			x.emit(hookChunk(h, HookPreTool, string(HookDeny), msg, nil))
			x.failCall(p, &ToolError{Kind: ToolRefused, Msg: msg, Err: ErrPermission,
				Permission: &PermissionDecision{Behavior: Deny, Step: StepHook, Rule: h.Name, Reason: out.Reason}})
			return HookDeny, h.Name, ""
		case HookAsk:
			if final != HookAsk {
				final, by, why = HookAsk, h.Name, out.Reason
			}
		case HookAllow:
			if final == HookNone {
				final, by, why = HookAllow, h.Name, out.Reason
			}
		case HookNone:
		default:
			msg := fmt.Sprintf("the call to tool %q was not run: the hook %q answered %q, which is not allow, deny or ask", p.call.Name, h.Name, out.Decision)
			x.emit(hookChunk(h, HookPreTool, "error", msg, nil))
			x.failCall(p, &ToolError{Kind: ToolRefused, Msg: msg, Err: ErrPermission,
				Permission: &PermissionDecision{Behavior: Deny, Step: StepHook, Rule: h.Name, Reason: msg}})
			return HookDeny, h.Name, ""
		}
	}
	if final != HookNone {
		x.emit(hookChunk(&Hook{Name: by}, HookPreTool, string(final), why, nil))
	}
	return final, by, why
}

// postToolHooks runs the post_tool hooks of p's tool on its output and
// returns the output the model gets.
func (x *executor) postToolHooks(ctx context.Context, p *execCall, hs []*Hook, out *Output) *Output {
	for _, h := range hs {
		text := (&llm.ToolResult{Content: out.Content}).Text()
		in := &HookInput{Tool: p.call.Name, CallID: p.call.ID, Arguments: p.parsed.Arguments, Result: &text, IsError: out.IsError, Agent: x.agentName, Depth: x.depth}
		got, err := callHook(ctx, h, in)
		if err != nil {
			msg := fmt.Sprintf("the result of tool %q was withheld: the hook %q that checks it failed (%v)", p.call.Name, h.Name, err)
			x.emit(hookChunk(h, HookPostTool, "error", msg, err))
			return ErrorOutput(msg)
		}
		if got != nil && got.Message != "" {
			x.emit(hookChunk(h, HookPostTool, "message", got.Message, nil))
		}
		if got != nil && got.Output != nil {
			out = got.Output
			x.emit(hookChunk(h, HookPostTool, "replace", "", nil))
		}
	}
	return out
}

// runEventHooks runs the hooks of an event whose only effects are reports
// and the returned outputs (one per hook that answered).
func (r *run) runEventHooks(ctx context.Context, ev HookEvent, in *HookInput) []*HookOutput {
	var outs []*HookOutput
	for _, h := range r.hooks.matching(ev, "") {
		hin := *in
		hin.Agent, hin.Depth, hin.Messages = r.exec.agentName, r.exec.depth, r.transcript
		out, err := callHook(ctx, h, &hin)
		if err != nil {
			if ctx.Err() == nil {
				r.emit(hookChunk(h, ev, "error", fmt.Sprintf("hook %q failed: %v", h.Name, err), err))
			}
			continue
		}
		if out != nil {
			outs = append(outs, out)
			if out.Message != "" {
				r.emit(hookChunk(h, ev, "message", out.Message, nil))
			}
			if out.Decision != HookNone {
				r.emit(hookChunk(h, ev, string(out.Decision), out.Reason, nil))
			} else if out.Context != "" {
				r.emit(hookChunk(h, ev, "context", out.Context, nil))
			}
		}
	}
	return outs
}

// startHooks runs the run_start hooks, and the user_prompt hooks on the
// user messages that end the transcript; fresh says the run is not a
// resumption. It reports whether the run goes on.
func (r *run) startHooks(ctx context.Context, fresh bool) bool {
	if r.hooks == nil {
		return true
	}
	r.runEndCtx = ctx
	var added []string
	for _, o := range r.runEventHooks(ctx, HookRunStart, &HookInput{}) {
		if o.Context != "" {
			added = append(added, o.Context)
		}
	}
	if !fresh || len(r.transcript) == 0 || r.transcript[len(r.transcript)-1].Role != llm.RoleUser {
		return true
	}
	// Every new user message, however many came at once: a batch
	// ["do the forbidden thing", "thanks"] is judged whole.
	first := len(r.transcript) - 1
	for first > 0 && r.transcript[first-1].Role == llm.RoleUser {
		first--
	}
	for i := first; i < len(r.transcript); i++ {
		if !r.promptHooks(ctx, &r.transcript[i]) {
			return false
		}
	}
	addContext(&r.transcript[len(r.transcript)-1], added)
	return true
}

// promptHooks runs the user_prompt hooks on m, adding their context to it;
// a block fails the run and reports false.
func (r *run) promptHooks(ctx context.Context, m *llm.Message) bool {
	if r.hooks == nil || m.Role != llm.RoleUser {
		return true
	}
	var added []string
	for _, o := range r.runEventHooks(ctx, HookUserPrompt, &HookInput{Prompt: m.Text()}) {
		if o.Decision == HookBlock {
			r.fail(fmt.Errorf("%w: %s", ErrPromptBlocked, firstNonEmpty(o.Reason, "no reason given")))
			return false
		}
		if o.Context != "" {
			added = append(added, o.Context)
		}
	}
	addContext(m, added)
	return true
}

func addContext(m *llm.Message, texts []string) {
	if len(texts) == 0 {
		return
	}
	m.Parts = slices.Clone(m.Parts)
	for _, t := range texts {
		m.Parts = append(m.Parts, llm.TextPart(t))
	}
}

// stopHooks runs the stop hooks when the model answered; it reports
// whether one blocked the stop, in which case its reason was added to the
// transcript and the run goes on. An answer given on the last turn a
// budget allows (the final answer) cannot be blocked: the budgets bound
// how long hooks can keep a run going.
func (r *run) stopHooks(ctx context.Context, final bool) bool {
	if r.hooks == nil {
		return false
	}
	for _, o := range r.runEventHooks(ctx, HookStop, &HookInput{Answer: r.result.Answer, StopHookActive: r.stopHookActive}) {
		if o.Decision != HookBlock || final {
			continue
		}
		r.stopHookActive = true
		r.result.Answer = ""
		r.transcript = append(r.transcript, llm.UserMessage(firstNonEmpty(strings.TrimSpace(o.Reason), "Continue working on the task.")))
		return true
	}
	return false
}

// endHooks runs the run_end hooks; they run even when the run's context is
// cancelled, each within its timeout.
func (r *run) endHooks() {
	if r.hooks == nil || r.runEndCtx == nil {
		return
	}
	in := &HookInput{Status: r.result.Status, Answer: r.result.Answer}
	if r.result.Err != nil {
		in.Error = r.result.Err.Error()
	}
	r.runEventHooks(context.WithoutCancel(r.runEndCtx), HookRunEnd, in)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// inheritHooks returns the hooks a child agent runs with: its own, or else the
// parent's tool and compaction hooks; plus the parent's subagent_stop hooks
// as its stop hooks.
func inheritHooks(own []Hook, parent *hookSet) []Hook {
	if parent == nil {
		return own
	}
	out := slices.Clone(own)
	if len(own) == 0 {
		for _, ev := range []HookEvent{HookPreTool, HookPostTool, HookPreCompact} {
			for _, h := range parent.by[ev] {
				out = append(out, *h)
			}
		}
	}
	for _, h := range parent.by[HookSubagentStop] {
		c := *h
		c.Event, c.reportAs = HookStop, HookSubagentStop
		out = append(out, c)
	}
	return out
}
