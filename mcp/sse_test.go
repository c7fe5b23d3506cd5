package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
)

// TestMountSSE: Spec.SSE reaches a server of the older HTTP+SSE
// transport (the SDK's SSE handler), with the spec's headers.
func TestMountSSE(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "old", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "sse:" + a.Text}}}, nil, nil
	})
	var (
		mu   sync.Mutex
		auth []string
	)
	h := sdk.NewSSEHandler(func(r *http.Request) *sdk.Server {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		return srv
	}, nil)
	hs := httptest.NewServer(h)
	defer hs.Close()
	m, err := mcp.Mount(t.Context(), &mcp.Spec{Name: "old", URL: hs.URL, SSE: true, Headers: map[string]string{"Authorization": "Bearer t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	def, ok := m.Toolset().Lookup("old__echo")
	if !ok {
		t.Fatalf("tools %v", m.Toolset().Names())
	}
	out, err := def.Handler(t.Context(), &loop.Call{ID: "c", Name: "old__echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil || len(out.Content) != 1 || out.Content[0].Text != "sse:hi" {
		t.Fatalf("call: %+v, %v", out, err)
	}
	mu.Lock()
	if len(auth) == 0 || auth[0] != "Bearer t" {
		t.Errorf("the server got Authorization %q", strings.Join(auth, ","))
	}
	mu.Unlock()
	if _, err := mcp.Mount(t.Context(), &mcp.Spec{Name: "bad", Command: "x", SSE: true}); err == nil {
		t.Error("SSE without a URL was accepted")
	}
}
