package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

func TestComputerTool(t *testing.T) {
	for _, c := range []struct{ model, typ, beta string }{
		{"claude-sonnet-4-5-20250929", "computer_20250124", "computer-use-2025-01-24"},
		{"claude-opus-4-1", "computer_20250124", "computer-use-2025-01-24"},
		{"claude-3-7-sonnet-latest", "computer_20250124", "computer-use-2025-01-24"},
		{"claude-opus-4-5-20251101", "computer_20251124", "computer-use-2025-11-24"},
		{"claude-3-5-sonnet-20241022", "computer_20241022", "computer-use-2024-10-22"},
		{"claude-3-haiku-20240307", "", ""},
		{"claude-3-opus-latest", "", ""},
	} {
		typ, beta := ComputerTool(c.model)
		if typ != c.typ || beta != c.beta {
			t.Errorf("ComputerTool(%q) = %q, %q; want %q, %q", c.model, typ, beta, c.typ, c.beta)
		}
	}
}

// TestComputerToolRendering: the computer tool is Anthropic's own for the
// models that take it, a function tool for the others and for a tool of
// another name; the beta flag joins the caller's.
func TestComputerToolRendering(t *testing.T) {
	spec := llm.ToolSpec{Name: "computer", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Computer: &llm.ComputerSpec{Width: 1024, Height: 768}}
	tools, beta, err := renderTools([]llm.ToolSpec{spec}, "claude-sonnet-4-5")
	b, _ := json.Marshal(tools)
	if err != nil || beta != "computer-use-2025-01-24" || string(b) != `[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]` {
		t.Fatalf("%v %q %s", err, beta, b)
	}
	tools, beta, _ = renderTools([]llm.ToolSpec{spec}, "claude-3-haiku-20240307")
	if beta != "" || tools[0].Type != "" || tools[0].Description != "d" {
		t.Fatalf("%q %+v", beta, tools[0])
	}
	other := spec
	other.Name = "desk"
	if tools, beta, _ = renderTools([]llm.ToolSpec{other}, "claude-sonnet-4-5"); beta != "" || tools[0].Type != "" {
		t.Fatalf("%q %+v", beta, tools[0])
	}

	c := &Client{Headers: http.Header{"Anthropic-Beta": {"prompt-caching-2024-07-31"}}}
	h := http.Header{}
	api := c.api("computer-use-2025-01-24")
	api.Header(h)
	for k, v := range api.Extra {
		h[k] = v
	}
	if got := strings.Join(h.Values("Anthropic-Beta"), ","); got != "prompt-caching-2024-07-31,computer-use-2025-01-24" {
		t.Fatalf("anthropic-beta %q", got)
	}
	if c.Headers.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" || len(c.Headers.Values("Anthropic-Beta")) != 1 {
		t.Fatal("the client's headers changed")
	}
}
