package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// allowAll is an Allower whose "always" answers cover every call.
type allowAll struct{}

func (allowAll) Allowed(string, json.RawMessage) bool { return true }
func (allowAll) AlwaysAllow(string, string) error     { return nil }

// TestPersonNotAlwaysAllowed: a call only a person may approve (its
// tool's AskPerson) is shown to the person, with the tool's reason, even
// when an "always" answer covers the tool.
func TestPersonNotAlwaysAllowed(t *testing.T) {
	var shown []approvalMsg
	a := &approver{allow: allowAll{}, send: func(_ context.Context, msg any) bool {
		m := msg.(approvalMsg)
		shown = append(shown, m)
		m.reply <- loop.Decision{Verdict: loop.Reject}
		return true
	}}
	call := llm.ToolCall{ID: "c1", Name: "browser_type", Arguments: llm.Arguments(`{"element":"search","ref":"e2","text":"hunter2"}`)}
	d, err := a.Approve(context.Background(), &loop.ApprovalRequest{Call: call})
	if err != nil || d.Verdict != loop.Approve || len(shown) != 0 {
		t.Fatalf("an ordinary call under an always answer: %+v %v, %d shown", d, err, len(shown))
	}
	why := `typing into a password field: the page's field "Password" (an input of type password) on "https://bank.example" gets the text "hunter2"`
	d, err = a.Approve(context.Background(), &loop.ApprovalRequest{Call: call, Person: why})
	if err != nil || d.Verdict != loop.Reject || len(shown) != 1 {
		t.Fatalf("a person's call under an always answer: %+v %v, %d shown", d, err, len(shown))
	}
	p := describe(shown[0].req, t.TempDir(), newStyles(), 200)
	if !strings.Contains(strings.Join(p.lines, "\n"), `password field: the page's field "Password"`) {
		t.Fatalf("the preview does not say why:\n%s", strings.Join(p.lines, "\n"))
	}
}
