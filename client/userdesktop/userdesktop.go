// Package userdesktop runs a session's computer actions on the user's own
// display: the client half of a desktop environment with host
// "user_device" in hrns serve.
//
// The session's agent has the computer tool; its calls wait in
// awaiting_tool_results like those of the tools the caller declares. [Run]
// follows the session, shows each pending computer action to the person
// (rendered so that it cannot be disguised: control characters, escape
// sequences, bidi and invisible characters as visible escapes), runs the
// actions they approve on the display this process reaches ([desktop.Open]:
// input through XTEST, screenshots read from the display), and posts each
// result with the screenshot inlined as base64, which the model then sees.
//
//	c := client.New(url, key, nil)
//	h, _ := c.StartSession(ctx, &client.SessionRequest{
//		Agent:    client.AgentRef{Inline: &client.Agent{Name: "helper", Environments: []client.Environment{{ID: "desktop"}}}},
//		Messages: client.Text("Open the calculator and add 2 and 2."),
//	})
//	res, err := userdesktop.Run(ctx, h, &userdesktop.Options{Approve: askOnTheTerminal})
//
// It is its own package, not part of package client, so that the SDK does
// not link the desktop package (and the sandbox it starts desktops in)
// into every program that talks to the API.
package userdesktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/internal/safetext"
)

// Bounds of one action.
const (
	// MaxArgs is the most bytes of an action's arguments: anything longer
	// is refused without being shown.
	MaxArgs = 64 << 10
	// MaxResultText is the most characters of a result's text.
	MaxResultText = 4000
)

// Options configure [Run]. A nil *Options refuses every action.
type Options struct {
	// Display and XAuthority name the X display to act on, as $DISPLAY
	// and $XAUTHORITY do; "" means the process's own.
	Display, XAuthority string
	// Approve is asked before each action, with what it is about to do;
	// the action runs only if it answers true. An error ends Run. nil
	// refuses every action that ApproveAll does not let run.
	Approve func(ctx context.Context, a *Proposal) (bool, error)
	// ApproveAll lets actions run without asking, except those that
	// carry a provider's safety checks (OpenAI's pending safety checks):
	// those go to Approve whatever this says, and are refused without it.
	ApproveAll bool
	// Report, when set, is told what became of each action: "ran",
	// "failed: ...", "refused: ..." or "not run: ...".
	Report func(a *Proposal, outcome string)
	// ActionTimeout bounds one action with its screenshot (typing and
	// waits get their own bounds within it); 0 means 90 seconds.
	ActionTimeout time.Duration
	// MaxImageBytes bounds a screenshot: a larger one is sent as a JPEG
	// of lower quality; 0 means 3 MiB, whose base64 fits in a request of
	// the server's default limit (5 MB).
	MaxImageBytes int
	// Wait is how long each long-poll of the session waits; 0 means 20
	// seconds.
	Wait time.Duration
	// Mark, when set, wraps each escape in the proposal's text, for
	// instance in a terminal's reverse video, so that it stands out from
	// the same characters typed literally (see safetext.Options.Mark).
	Mark func(escape string) string
}

// A Proposal is an action about to run, as the person is shown it. Its
// text fields are rendered with hrns's rules for untrusted text: nothing
// in them is interpreted by a terminal, and no character hides another.
type Proposal struct {
	// Session and CallID say where the action comes from (escaped).
	Session, CallID string
	// Action is the action as the model wrote it (its coordinates in the
	// model's view of the screen).
	Action *desktop.Action
	// Summary says what the action does, on one line.
	Summary string
	// Text is the text a type action types, line by line, every line
	// escaped (for a batch, each of its actions, numbered, with the
	// text it types); nil for other actions.
	Text []string
	// Escaped counts the characters of Summary and Text shown as
	// escapes: more than zero deserves a second look.
	Escaped int
	// SafetyChecks are the provider's warnings on the action, one a line,
	// escaped: a person must acknowledge them.
	SafetyChecks []string
}

// String renders the proposal for a terminal, on several lines.
func (p *Proposal) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The agent of session %s asks to use your desktop (call %s):\n  %s\n", p.Session, p.CallID, p.Summary)
	for _, l := range p.Text {
		fmt.Fprintf(&b, "  │ %s\n", l)
	}
	if p.Escaped > 0 {
		fmt.Fprintf(&b, "  (%d characters are shown as escapes: they are not what they look like)\n", p.Escaped)
	}
	for _, c := range p.SafetyChecks {
		fmt.Fprintf(&b, "  Safety check: %s\n", c)
	}
	return b.String()
}

// Run follows the session h until it ends, running its computer actions on
// the display meanwhile, in the order the agent made them, each approved
// as Options say, and returns how the session ended. Calls of other tools
// are left to whoever runs them. An action that is refused, or is not an
// action the desktop runs (an unknown action, coordinates beyond the
// screen, text too long, arguments too large), is answered with an
// error_event the agent reads; one that fails or times out is answered with
// what happened and the screenshot of the screen as it was left.
//
// Run follows h alone, not its child sessions: hrns serve refuses the
// user's desktop to a subagent (docs/desktop.md says why), so no child
// of h waits for this display.
func Run(ctx context.Context, h *client.Handle, o *Options) (*client.Result, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.ActionTimeout <= 0 {
		opts.ActionTimeout = 90 * time.Second
	}
	if opts.MaxImageBytes <= 0 {
		opts.MaxImageBytes = 3 << 20
	}
	if opts.Wait <= 0 {
		opts.Wait = 20 * time.Second
	}
	if opts.Display == "" {
		opts.Display = os.Getenv("DISPLAY")
	}
	if opts.XAuthority == "" {
		opts.XAuthority = os.Getenv("XAUTHORITY")
	}
	d, err := desktop.Open(ctx, opts.Display, opts.XAuthority, &desktop.Options{MaxImageBytes: opts.MaxImageBytes})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	r := &runner{h: h, d: d, o: &opts}
	return r.follow(ctx)
}

type runner struct {
	h *client.Handle
	d *desktop.Desktop
	o *Options
}

// follow is [client.Handle.WaitForCompletion] for the computer calls
// alone, run one after another.
func (r *runner) follow(ctx context.Context) (*client.Result, error) {
	posted := map[string]client.ToolResult{} // results posted, by call id, while their calls wait
	var cursor int64
	var pending []client.ToolRequest
	for {
		c, err := r.h.Changes(ctx, &client.ChangesOptions{FromIndex: cursor, Wait: r.o.Wait})
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		for _, e := range c.NewEvents {
			if e.Type == api.EventActiveState {
				var as api.ActiveState
				if json.Unmarshal(e.Data, &as) == nil {
					pending = as.PendingToolCalls
				}
			}
		}
		cursor += int64(len(c.NewEvents))
		if c.Status.Terminal() {
			return &client.Result{SessionID: r.h.ID(), Status: c.Status, Answer: answerText(c.Answer), AnswerJSON: c.Answer, Error: deref(c.Error), ErrorCode: deref(c.ErrorCode), Steps: c.Metrics.Steps}, nil
		}
		if c.Status != api.StatusAwaitingToolResults || len(pending) == 0 {
			continue
		}
		still := map[string]client.ToolResult{}
		for _, p := range pending {
			if p.ToolName != desktop.ToolName {
				continue
			}
			res, ok := posted[p.ID]
			if !ok {
				if res, err = r.one(ctx, p); err != nil {
					return nil, err
				}
			}
			still[p.ID] = res
			// Each result as soon as it is there: the screenshot is of
			// the screen now, and a later failure loses nothing.
			switch err := r.h.PostToolResults(ctx, res); {
			case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrInvalid):
				// The session ended, or the call no longer waits
				// (answered elsewhere, or abandoned): the log says.
			case err != nil:
				return nil, err
			}
		}
		posted = still
		pending = nil
	}
}

// one decides and runs one computer call.
func (r *runner) one(ctx context.Context, call client.ToolRequest) (client.ToolResult, error) {
	fail := func(p *Proposal, origin, msg string) client.ToolResult {
		if r.o.Report != nil {
			r.o.Report(p, msg)
		}
		return client.ToolResult{Kind: api.KindError, ToolReq: call, Error: msg, Origin: origin}
	}
	p := &Proposal{Session: safetext.EscapeMarked(r.h.ID(), r.o.Mark), CallID: safetext.EscapeMarked(call.ID, r.o.Mark)}
	if len(call.Args) > MaxArgs {
		p.Summary = fmt.Sprintf("(arguments of %d bytes, not shown)", len(call.Args))
		return fail(p, "custom_tools", fmt.Sprintf("not run: the action's arguments are %d bytes, more than %d", len(call.Args), MaxArgs)), nil
	}
	vw, vh := r.d.View()
	args := call.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	a, err := desktop.ParseAction(args, vw, vh)
	if err != nil {
		p.Summary = "(not an action: " + safetext.Escape(truncate(err.Error(), 300)) + ")"
		return fail(p, "custom_tools", fmt.Sprintf("not run: %v (the screen is seen as %dx%d)", err, vw, vh)), nil
	}
	describe(p, a, r.o.Mark)
	ask := !r.o.ApproveAll || len(a.SafetyChecks) > 0
	if ask {
		if r.o.Approve == nil {
			return fail(p, "approval", "refused: no person approves the actions on this desktop"), nil
		}
		ok, err := r.o.Approve(ctx, p)
		if err != nil {
			return client.ToolResult{}, err
		}
		if !ok {
			return fail(p, "approval", "refused: the person did not allow this action on their desktop"), nil
		}
	}
	actx, cancel := context.WithTimeout(ctx, r.o.ActionTimeout)
	res, err := r.d.Do(actx, a)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return client.ToolResult{}, ctx.Err()
		}
		return fail(p, "custom_tools", "failed: "+err.Error()), nil
	}
	out := res.Output()
	text := truncate(res.Text, MaxResultText)
	if r.o.Report != nil {
		if res.Failed {
			r.o.Report(p, "failed: "+safetext.Escape(text))
		} else {
			r.o.Report(p, "ran")
		}
	}
	return client.ToolResult{Kind: api.KindToolResult, ToolReq: call, Result: client.ResultWithImage(text, out.Content)}, nil
}

// describe fills in what the person is shown of a, its escapes wrapped by
// mark (nil: unmarked).
func describe(p *Proposal, a *desktop.Action, mark func(string) string) {
	at := func(c []float64) string {
		if c == nil {
			return "where the pointer is"
		}
		return fmt.Sprintf("at [%g, %g]", c[0], c[1])
	}
	esc := func(s string) string {
		blk := safetext.Render(s, &safetext.Options{Width: 1 << 20, Mark: mark})
		p.Escaped += blk.Escaped
		var parts []string
		for _, l := range blk.Lines {
			parts = append(parts, l.Text)
		}
		return strings.Join(parts, `\n`)
	}
	held := ""
	if a.Text != "" && a.Action != desktop.ActType && a.Action != desktop.ActKey && a.Action != desktop.ActHoldKey {
		held = " holding " + esc(a.Text)
	}
	switch a.Action {
	case desktop.ActScreenshot:
		p.Summary = "take a screenshot"
	case desktop.ActCursorPosition:
		p.Summary = "read where the pointer is"
	case desktop.ActMouseMove:
		p.Summary = "move the pointer " + at(a.Coordinate) + held
	case desktop.ActLeftClick, desktop.ActRightClick, desktop.ActMiddleClick, desktop.ActDoubleClick, desktop.ActTripleClick:
		p.Summary = strings.ReplaceAll(a.Action, "_", " ") + " " + at(a.Coordinate) + held
	case desktop.ActLeftMouseDown, desktop.ActLeftMouseUp:
		p.Summary = strings.ReplaceAll(a.Action, "_", " ") + held
	case desktop.ActLeftClickDrag:
		p.Summary = fmt.Sprintf("drag with the left button from %s to %s", at(a.StartCoordinate), at(a.Coordinate))
		if len(a.Path) > 0 {
			p.Summary += fmt.Sprintf(" through %d points", len(a.Path))
		}
		p.Summary += held
	case desktop.ActScroll:
		p.Summary = fmt.Sprintf("scroll %s by %d %s%s", a.ScrollDirection, a.ScrollAmount, at(a.Coordinate), held)
	case desktop.ActType:
		p.Summary = fmt.Sprintf("type %d characters:", utf8.RuneCountInString(a.Text))
		blk := safetext.Render(a.Text, &safetext.Options{Mark: mark})
		p.Escaped += blk.Escaped
		for _, l := range blk.Lines {
			p.Text = append(p.Text, l.Text)
		}
	case desktop.ActKey:
		p.Summary = "press the keys " + esc(a.Text)
	case desktop.ActHoldKey:
		p.Summary = fmt.Sprintf("hold the keys %s for %gs", esc(a.Text), a.Duration)
	case desktop.ActWait:
		p.Summary = fmt.Sprintf("wait %gs", a.Duration)
	case desktop.ActBatch:
		// A provider's call of several actions (OpenAI's batched
		// computer calls): each shown, in the order they run.
		p.Summary = fmt.Sprintf("%d actions, in turn:", len(a.Actions))
		for i := range a.Actions {
			var sub Proposal
			describe(&sub, &a.Actions[i], mark)
			p.Escaped += sub.Escaped
			p.Text = append(p.Text, fmt.Sprintf("%d. %s", i+1, sub.Summary))
			for _, l := range sub.Text {
				p.Text = append(p.Text, "   "+l)
			}
		}
	default:
		p.Summary = esc(a.Action)
	}
	for _, c := range a.SafetyChecks {
		p.SafetyChecks = append(p.SafetyChecks, fmt.Sprintf("[%s] %s", safetext.EscapeMarked(c.Code, mark), safetext.EscapeMarked(c.Message, mark)))
	}
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func answerText(a json.RawMessage) string {
	if len(a) == 0 || string(a) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(a, &s) == nil {
		return s
	}
	return string(a)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
