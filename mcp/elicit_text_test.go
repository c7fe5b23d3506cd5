package mcp

import (
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// The question an MCP client shows its user is rendered with safetext: a
// carriage return or an escape sequence in the tool's name or arguments
// cannot hide what the user approves.
func TestElicitationMessageIsEscaped(t *testing.T) {
	call := llm.ToolCall{ID: "c", Name: "run_command\u202e", Arguments: []byte("{\"command\":\"id #\r\x1b[2K ls\u202e\"}")}
	ask, err := approvalQuestion(call)
	if err != nil {
		t.Fatal(err)
	}
	title := ask.RequestedSchema.(map[string]any)["properties"].(map[string]any)["approve"].(map[string]any)["title"].(string)
	for _, text := range []string{ask.Message, title} {
		if strings.ContainsAny(text, "\r\x1b\u202e") {
			t.Errorf("the question holds control characters: %q", text)
		}
	}
	for _, want := range []string{`run_command\u202e`, `id #\r\x1b[2K ls\u202e`} {
		if !strings.Contains(ask.Message, want) {
			t.Errorf("the question lacks %q: %q", want, ask.Message)
		}
	}
	// Arguments too long to show whole are not asked about.
	long := llm.ToolCall{Name: "write_file", Arguments: []byte(`{"content":"` + strings.Repeat("a", maxQuestionArgs) + `"}`)}
	if _, err := approvalQuestion(long); err == nil || !strings.Contains(err.Error(), "too long to show") {
		t.Errorf("a question cut the arguments: %v", err)
	}
}
