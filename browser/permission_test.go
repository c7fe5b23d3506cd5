package browser_test

import (
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/loop"
)

// TestToolsUnderThePolicy: the browser's tools are decided by the
// permission policy like the other tools: looking runs in plan mode,
// acting on a page does not, and URL rules match browser_navigate's url.
// No Chromium starts: the policy decides before a tool runs.
func TestToolsUnderThePolicy(t *testing.T) {
	ts := browser.New(nil).Tools()
	plan := &loop.Permissions{Mode: loop.ModePlan}
	deny, err := loop.ParseRule("browser_navigate(domain:evil.example)")
	if err != nil {
		t.Fatal(err)
	}
	denyEvil := &loop.Permissions{Deny: []loop.Rule{deny}}
	for _, tt := range []struct {
		p       *loop.Permissions
		tool    string
		args    string
		refused bool
	}{
		{plan, "browser_snapshot", `{}`, false},
		{plan, "browser_navigate", `{"url":"https://go.dev"}`, false},
		{plan, "browser_take_screenshot", `{}`, false},
		{plan, "browser_click", `{"element":"Buy","ref":"e3"}`, true},
		{plan, "browser_type", `{"element":"q","ref":"e1","text":"x"}`, true},
		{denyEvil, "browser_navigate", `{"url":"https://www.evil.example/x"}`, true},
		{denyEvil, "browser_navigate", `{"url":"https://go.dev"}`, false},
	} {
		def, ok := ts.Lookup(tt.tool)
		if !ok {
			t.Fatalf("no tool %s", tt.tool)
		}
		d := tt.p.Check(&def, json.RawMessage(tt.args))
		if refused := d.Behavior == loop.Deny; refused != tt.refused {
			t.Errorf("%s %s under %+v: %+v, want refused %v", tt.tool, tt.args, tt.p.Mode, d, tt.refused)
		}
	}
}
