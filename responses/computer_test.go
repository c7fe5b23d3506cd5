package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// TestComputerArguments: each of OpenAI's computer actions becomes the
// neutral action (Anthropic's computer tool's arguments) that does the same.
func TestComputerArguments(t *testing.T) {
	for _, c := range []struct{ action, checks, want string }{
		{`{"type":"screenshot"}`, ``, `{"action":"screenshot"}`},
		{`{"type":"click","button":"left","x":10,"y":20}`, ``, `{"action":"left_click","coordinate":[10,20]}`},
		{`{"type":"click","button":"right","x":1,"y":2}`, ``, `{"action":"right_click","coordinate":[1,2]}`},
		{`{"type":"click","button":"wheel","x":1,"y":2}`, ``, `{"action":"middle_click","coordinate":[1,2]}`},
		{`{"type":"click","button":"back","x":1,"y":2}`, ``, `{"action":"key","text":"alt+Left"}`},
		{`{"type":"click","button":"forward","x":1,"y":2}`, ``, `{"action":"key","text":"alt+Right"}`},
		{`{"type":"double_click","x":5,"y":6}`, ``, `{"action":"double_click","coordinate":[5,6]}`},
		{`{"type":"move","x":5,"y":6}`, ``, `{"action":"mouse_move","coordinate":[5,6]}`},
		{`{"type":"drag","path":[{"x":1,"y":2},{"x":3,"y":4}]}`, ``, `{"action":"left_click_drag","coordinate":[3,4],"start_coordinate":[1,2]}`},
		{`{"type":"drag","path":[{"x":1,"y":2},{"x":2,"y":3},{"x":3,"y":4}]}`, ``, `{"action":"left_click_drag","coordinate":[3,4],"path":[[2,3]],"start_coordinate":[1,2]}`},
		{`{"type":"keypress","keys":["CTRL","L"]}`, ``, `{"action":"key","text":"CTRL+L"}`},
		{`{"type":"keypress","keys":["ENTER"]}`, ``, `{"action":"key","text":"ENTER"}`},
		{`{"type":"type","text":"hello"}`, ``, `{"action":"type","text":"hello"}`},
		{`{"type":"wait"}`, ``, `{"action":"wait","duration":2}`},
		{`{"type":"scroll","x":5,"y":6,"scroll_x":0,"scroll_y":300}`, ``, `{"action":"scroll","coordinate":[5,6],"scroll_amount":3,"scroll_direction":"down"}`},
		{`{"type":"scroll","x":5,"y":6,"scroll_x":0,"scroll_y":-20}`, ``, `{"action":"scroll","coordinate":[5,6],"scroll_amount":1,"scroll_direction":"up"}`},
		{`{"type":"scroll","x":5,"y":6,"scroll_x":-900,"scroll_y":10}`, ``, `{"action":"scroll","coordinate":[5,6],"scroll_amount":9,"scroll_direction":"left"}`},
		{`{"type":"scroll","x":5,"y":6,"scroll_x":99999,"scroll_y":0}`, ``, `{"action":"scroll","coordinate":[5,6],"scroll_amount":30,"scroll_direction":"right"}`},
		{`{"type":"fly"}`, ``, `{"action":"openai_fly"}`},
		{`not json`, ``, `{"action":"openai_action_unreadable"}`},
		{`{"type":"type","text":"x"}`, `[{"id":"cu_sc_1","code":"c","message":"m"}]`, `{"action":"type","safety_checks":[{"id":"cu_sc_1","code":"c","message":"m"}],"text":"x"}`},
	} {
		if got := computerArguments(json.RawMessage(c.action), nil, json.RawMessage(c.checks)); got != c.want {
			t.Errorf("%s %s:\ngot  %s\nwant %s", c.action, c.checks, got, c.want)
		}
	}
}

// TestComputerRoundTrip: a computer call decoded from a stream renders
// back as the item it came as, and its result as a computer_call_output
// that acknowledges its checks only when it has a screenshot.
func TestComputerRoundTrip(t *testing.T) {
	checks := []safetyCheck{{ID: "cu_sc_1"}, {ID: "cu_sc_2"}}
	id := computerCallID("call_7", checks)
	if got, ids := splitComputerCallID(id); got != "call_7" || strings.Join(ids, ",") != "cu_sc_1,cu_sc_2" {
		t.Fatalf("split %q: %q %q", id, got, ids)
	}
	sig, _ := json.Marshal(computerSignature{Type: "computer_call", ID: "cu_7", Action: json.RawMessage(`{"type":"type","text":"x"}`),
		PendingSafetyChecks: json.RawMessage(`[{"id":"cu_sc_1"},{"id":"cu_sc_2"}]`)})
	tc := llm.ToolCall{ID: id, Name: "computer", Arguments: llm.Arguments(`{"action":"type","text":"x"}`), Signature: string(sig)}
	items, err := appendAssistant(nil, []llm.Part{{Kind: llm.PartToolCall, ToolCall: &tc}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(items)
	if want := `[{"type":"computer_call","id":"cu_7","call_id":"call_7","action":{"type":"type","text":"x"},"pending_safety_checks":[{"id":"cu_sc_1"},{"id":"cu_sc_2"}],"status":"completed"}]`; string(b) != want {
		t.Fatalf("call:\n%s\nwant\n%s", b, want)
	}
	for _, c := range []struct {
		content []llm.Part
		isError bool
		want    string
	}{
		{[]llm.Part{llm.TextPart("Typed."), llm.ImagePart("image/png", []byte("PNG"))}, false,
			`[{"type":"computer_call_output","call_id":"call_7","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,UE5H"},"acknowledged_safety_checks":[{"id":"cu_sc_1"},{"id":"cu_sc_2"}]}]`},
		{[]llm.Part{llm.TextPart("refused")}, true,
			`[{"type":"computer_call_output","call_id":"call_7","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,` + dataURL("image/png", blankPNG)[len("data:image/png;base64,"):] + `"}},{"type":"message","role":"user","content":"refused"}]`},
	} {
		items, err := appendToolOutputs(nil, []llm.Part{{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, Content: c.content, IsError: c.isError}}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(items)
		if string(b) != c.want {
			t.Errorf("output:\n%s\nwant\n%s", b, c.want)
		}
	}
	// A computer call without its item cannot be sent back.
	tc.Signature = ""
	tc.ID = "computer_call_8"
	if items, err := appendAssistant(nil, []llm.Part{{Kind: llm.PartToolCall, ToolCall: &tc}}); err != nil || items[0].Type != "function_call" {
		t.Fatalf("%v %+v", err, items)
	}
}

// TestComputerToolRendering: the computer tool is computer_use_preview for
// the computer-use models only.
func TestComputerToolRendering(t *testing.T) {
	specs := []llm.ToolSpec{{Name: "computer", InputSchema: json.RawMessage(`{"type":"object"}`), Computer: &llm.ComputerSpec{Width: 1024, Height: 768}}}
	tools, err := renderTools(specs, true, "computer-use-preview")
	if err != nil || tools[0].Type != "computer_use_preview" || tools[0].DisplayWidth != 1024 || tools[0].Environment != "linux" {
		t.Fatalf("%v %+v", err, tools)
	}
	tools, err = renderTools(specs, true, "gpt-5")
	if err != nil || tools[0].Type != "function" || tools[0].Name != "computer" {
		t.Fatalf("%v %+v", err, tools)
	}
	specs[0].Computer.Width = 0
	if _, err := renderTools(specs, true, "computer-use-preview"); err == nil {
		t.Fatal("a display of no width")
	}
}
