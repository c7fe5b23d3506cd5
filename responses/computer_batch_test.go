package responses

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// TestComputerBatchedActions: a computer_call of the GA computer tool
// carrying several actions (actions, testdata/computer_actions.sse)
// becomes one call of the computer tool whose arguments are a batch of
// the neutral actions, in order (keys held during a pointer action as its
// modifiers); it goes back as the item it came as, answered by one
// computer_call_output with the screenshot taken after the last action
// (testdata/computer_actions.request.json). gpt-5.4 is offered the GA
// tool, {"type": "computer"}.
func TestComputerBatchedActions(t *testing.T) {
	srv := serveSSE(t, readTestdata(t, "computer_actions.sse"))
	c := &Client{BaseURL: srv.URL, Model: "gpt-5.4", HTTPClient: srv.Client()}
	computer := llm.ToolSpec{Name: "computer", InputSchema: json.RawMessage(`{"type":"object"}`), Computer: &llm.ComputerSpec{Width: 1280, Height: 800}}
	req := &llm.Request{Messages: []llm.Message{llm.UserMessage("Type the name into the form.")}, Tools: []llm.ToolSpec{computer}}
	chunks, err := collect(c.Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	resp := chunks[len(chunks)-1].Response
	if resp == nil || len(resp.Message.Parts) != 1 || resp.Message.Parts[0].ToolCall == nil {
		t.Fatalf("response %+v", resp)
	}
	call := resp.Message.Parts[0].ToolCall
	want := `{"action":"batch","actions":[` +
		`{"action":"left_click","coordinate":[120,80],"text":"SHIFT"},` +
		`{"action":"type","text":"Ada Lovelace"},` +
		`{"action":"key","text":"ENTER"},` +
		`{"action":"scroll","coordinate":[300,200],"scroll_amount":4,"scroll_direction":"down"},` +
		`{"action":"left_click_drag","coordinate":[50,60],"start_coordinate":[10,10],"text":"ALT"},` +
		`{"action":"screenshot"}]}`
	if call.Name != "computer" || string(call.Arguments) != want {
		t.Fatalf("call %s %s\nwant %s", call.Name, call.Arguments, want)
	}
	// The next request: the call as it came, one output with the
	// screenshot.
	req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{
		CallID: call.ID, Name: "computer", Content: []llm.Part{llm.TextPart("Clicked at [120, 80] holding shift. Typed 12 characters. ..."), llm.ImagePart("image/png", []byte("PNG after the last"))},
	}}}})
	body, err := c.marshalRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "computer_actions.request.json", body)
	if strings.Count(string(body), `"computer_call_output"`) != 1 || !strings.Contains(string(body), `"tools":[{"type":"computer"}]`) {
		t.Fatalf("request %s", body)
	}
}

// TestComputerActionsForms: the single action, a list of one, a list too
// long or unreadable.
func TestComputerActionsForms(t *testing.T) {
	for _, c := range []struct{ action, actions, want string }{
		{`{"type":"wait"}`, ``, `{"action":"wait","duration":2}`},
		{`{"type":"wait"}`, `null`, `{"action":"wait","duration":2}`},
		{``, `[{"type":"move","x":1,"y":2,"keys":["CTRL"]}]`, `{"action":"mouse_move","coordinate":[1,2],"text":"CTRL"}`},
		{``, `[{"type":"screenshot"},{"type":"fly"}]`, `{"action":"batch","actions":[{"action":"screenshot"},{"action":"openai_fly"}]}`},
		{``, `[]`, `{"action":"openai_actions_unreadable"}`},
		{``, `{"type":"screenshot"}`, `{"action":"openai_actions_unreadable"}`},
		{``, `[` + strings.Repeat(`{"type":"screenshot"},`, maxComputerActions) + `{"type":"screenshot"}]`, `{"action":"openai_too_many_actions"}`},
	} {
		if got := computerArguments(json.RawMessage(c.action), json.RawMessage(c.actions), nil); got != c.want {
			t.Errorf("%s %.60s:\ngot  %s\nwant %s", c.action, c.actions, got, c.want)
		}
	}
	for _, m := range []string{"gpt-5.4", "gpt-5.4-2026-03-05", "openai/gpt-5.4"} {
		if !ComputerToolModel(m) {
			t.Errorf("%s does not take the GA computer tool", m)
		}
	}
	for _, m := range []string{"gpt-5", "gpt-5.2", "computer-use-preview", "gpt-5.4-mini"} {
		if ComputerToolModel(m) {
			t.Errorf("%s takes the GA computer tool", m)
		}
	}
}
