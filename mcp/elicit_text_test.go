package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// The question an MCP client shows its user is rendered with safetext: a
// carriage return or an escape sequence in the tool's name or arguments
// cannot hide what the user approves.
func TestElicitationMessageIsEscaped(t *testing.T) {
	a := &callApproval{req: &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{}}}
	call := llm.ToolCall{ID: "c", Name: "run_command\u202e", Arguments: []byte("{\"command\":\"id #\r\x1b[2K ls\"}")}
	if d, err := a.Approve(t.Context(), &loop.ApprovalRequest{Call: call}); err != nil || d.Verdict != loop.Defer {
		t.Fatalf("%+v, %v", d, err)
	}
	_, ask := a.outcome()
	if ask == nil {
		t.Fatal("no question")
	}
	if strings.ContainsAny(ask.Message, "\r\x1b\u202e") {
		t.Errorf("the question holds control characters: %q", ask.Message)
	}
	for _, want := range []string{`run_command\u202e`, `id #\r\x1b[2K ls`} {
		if !strings.Contains(ask.Message, want) {
			t.Errorf("the question lacks %q: %q", want, ask.Message)
		}
	}
}
