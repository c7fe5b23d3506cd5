package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// ToolName is the name of the computer tool: the name Anthropic's native
// computer tool must have, used everywhere so that transcripts carry over
// between providers.
const ToolName = "computer"

// Tool returns the computer tool: one tool whose action argument chooses
// what to do ([Actions]), with the arguments of Anthropic's computer tool.
// Providers that have a native computer tool render it as that (see
// [llm.ToolSpec.Computer]); the others as a plain function tool with
// [Desktop]'s schema. Every call but cursor_position answers with a
// screenshot of the model's view.
func (d *Desktop) Tool() *loop.ToolDef {
	w, h := d.View()
	return computerTool(w, h, &d.o, func(context.Context) (*Desktop, error) { return d, nil })
}

// computerTool is the computer tool on a view of w×h, whose calls act on
// the desktop get returns.
func computerTool(w, h int, o *Options, get func(context.Context) (*Desktop, error)) *loop.ToolDef {
	return &loop.ToolDef{
		Name: ToolName,
		Description: fmt.Sprintf("Use a computer's desktop with the mouse and keyboard, seeing it through screenshots. "+
			"The screen is %dx%d pixels; coordinates are [x, y] pixels of the screenshot, from [0, 0] at the top left. "+
			"Take a screenshot first to see what is there; every action returns a fresh one. "+
			"Click on a field before typing into it; check in the screenshot that an action did what you meant.", w, h),
		InputSchema: json.RawMessage(schema),
		Computer:    &loop.Computer{Width: w, Height: h},
		// The desktop is one: its actions run in turn. Typing and a
		// hold get more time, by Do's own bounds; this is the outer
		// bound of one call (a batch's actions each, their text and
		// waits in all, and a lazy desktop's start).
		Timeout:   MaxBatch*(o.ActionTimeout+batchGap) + o.ScreenshotTimeout + MaxWait*time.Second + MaxText*40*time.Millisecond + 70*time.Second,
		AskPerson: askPerson,
		Handler: func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
			d, err := get(ctx)
			if err != nil {
				return nil, err
			}
			a, err := ParseAction(call.Arguments, w, h)
			if err != nil {
				// The screen as it is, with the error: a provider's
				// computer call answers with a screenshot.
				out := loop.ErrorOutput(err.Error())
				if img, mime, serr := d.Screenshot(ctx); serr == nil {
					out.Content = append(out.Content, llm.ImagePart(mime, img))
				}
				return out, nil
			}
			res, err := d.Do(ctx, a)
			if err != nil {
				return nil, err
			}
			return res.Output(), nil
		},
	}
}

// A Lazy is a sandboxed desktop ([Start]) that starts on the first call of
// its tool, as a browser starts on its first page: a session that never
// uses it costs nothing. Its view is known before it starts.
type Lazy struct {
	o      SandboxOptions
	vw, vh int
	mu     sync.Mutex
	d      *Desktop
	closed bool
}

// NewLazy returns a desktop that [Start]s with o on its tool's first call.
func NewLazy(o *SandboxOptions) *Lazy {
	l := &Lazy{}
	if o != nil {
		l.o = *o
	}
	if l.o.Width <= 0 || l.o.Height <= 0 {
		l.o.Width, l.o.Height = 1280, 800
	}
	l.o.Options = l.o.Options.withDefaults()
	l.vw, l.vh = fit(l.o.Width, l.o.Height, l.o.MaxWidth, l.o.MaxHeight)
	return l
}

// Tool returns the computer tool of the desktop; its first call starts it.
func (l *Lazy) Tool() *loop.ToolDef {
	return computerTool(l.vw, l.vh, &l.o.Options, l.desktop)
}

// Tools returns a toolset holding [Lazy.Tool].
func (l *Lazy) Tools() *loop.Toolset {
	ts := &loop.Toolset{}
	if err := ts.Add(l.Tool()); err != nil {
		panic(err)
	}
	return ts
}

// Started returns the desktop once it has started, else nil.
func (l *Lazy) Started() *Desktop {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.d
}

func (l *Lazy) desktop(ctx context.Context) (*Desktop, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("the desktop has ended")
	}
	if l.d == nil {
		d, err := Start(ctx, &l.o)
		if err != nil {
			return nil, err
		}
		l.d = d
	}
	return l.d, nil
}

// Close ends the desktop, if it started; its tool then fails.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.d == nil {
		return nil
	}
	return l.d.Close()
}

// askPerson says why a call must be approved by a person: the provider's
// safety checks on it, quoted as they came (the approver renders them
// safely), or "" when it has none.
func askPerson(args json.RawMessage) string {
	var a struct {
		SafetyChecks []SafetyCheck `json:"safety_checks"`
	}
	if json.Unmarshal(args, &a) != nil || len(a.SafetyChecks) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("the model's provider asks a person to acknowledge its safety checks on this computer action:")
	for _, c := range a.SafetyChecks {
		fmt.Fprintf(&b, " [%s] %s;", c.Code, c.Message)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Tools returns a toolset holding [Desktop.Tool].
func (d *Desktop) Tools() *loop.Toolset {
	ts := &loop.Toolset{}
	if err := ts.Add(d.Tool()); err != nil {
		panic(err)
	}
	return ts
}

// Output renders a result for the model: its text, and the screenshot as
// an image part.
func (r *Result) Output() *loop.Output {
	out := &loop.Output{Content: []llm.Part{llm.TextPart(r.Text)}, IsError: r.Failed}
	if r.Image != nil {
		out.Content = append(out.Content, llm.ImagePart(r.MIMEType, r.Image))
	}
	return out
}
