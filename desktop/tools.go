package desktop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
		// bound of one call.
		Timeout:   d.o.ActionTimeout + d.o.ScreenshotTimeout + MaxWait*time.Second + MaxText*40*time.Millisecond + 10*time.Second,
		AskPerson: askPerson,
		Handler: func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
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
