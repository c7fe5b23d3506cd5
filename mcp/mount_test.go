package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
)

// httpServer serves tools over Streamable HTTP and records the
// Authorization headers it receives.
type httpServer struct {
	*mcp.Server
	URL string

	mu    sync.Mutex
	auths []string
}

func newHTTPServer(t *testing.T, tools *loop.Toolset) *httpServer {
	t.Helper()
	s := &httpServer{Server: mcp.NewServer(tools, nil)}
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func TestMountHTTP(t *testing.T) {
	var writes atomic.Int64
	srv := newHTTPServer(t, testTools(&writes))
	m := mount(t, &mcp.Spec{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	ts := m.Toolset()

	want := []string{"remote__echo", "remote__fail", "remote__image", "remote__panics", "remote__pick", "remote__slow", "remote__write"}
	if diff := cmp.Diff(want, ts.Names()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	out, err := call(t, ts, "remote__image", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := &loop.Output{Content: []llm.Part{llm.TextPart("a dot:"), llm.ImagePart("image/png", []byte("PNGDATA"))}}
	if diff := cmp.Diff(wantOut, out); diff != "" {
		t.Errorf("image (-want +got):\n%s", diff)
	}
	out, err = call(t, ts, "remote__fail", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&loop.Output{Content: []llm.Part{llm.TextPart(`tool "fail" failed: boom`)}, IsError: true}, out); diff != "" {
		t.Errorf("fail (-want +got):\n%s", diff)
	}

	srv.mu.Lock()
	for _, a := range srv.auths {
		if a != "Bearer s3cret" {
			t.Errorf("a request had Authorization %q", a)
		}
	}
	srv.mu.Unlock()
}

func TestMountListChanged(t *testing.T) {
	var writes atomic.Int64
	srv := newHTTPServer(t, testTools(&writes))
	m := mount(t, &mcp.Spec{Name: "h", URL: srv.URL})
	old := m.Toolset()
	changed := m.Changed()

	extra := loop.NewTool("extra", "Added later", func(context.Context, struct{}) (string, error) { return "new", nil })
	srv.SetTools(loop.MustToolset(extra))
	select {
	case <-changed:
	case <-t.Context().Done():
		t.Fatal("the toolset did not change")
	}
	if diff := cmp.Diff([]string{"h__extra"}, m.Toolset().Names()); diff != "" {
		t.Errorf("tools after the change (-want +got):\n%s", diff)
	}
	if out, err := call(t, m.Toolset(), "h__extra", `{}`); err != nil || out.IsError {
		t.Errorf("calling the new tool: %v %+v", err, out)
	}
	// The old toolset still calls the server, which no longer has the
	// tool: a protocol error the model reads.
	_, err := call(t, old, "h__echo", `{"text":"x"}`)
	if err == nil || !strings.Contains(err.Error(), `mcp server "h": unknown tool "echo"`) {
		t.Errorf("calling a removed tool: %v", err)
	}
	// Refresh without a change leaves the toolset and its channel.
	now, ch := m.Toolset(), m.Changed()
	if err := m.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.Toolset() != now || m.Changed() != ch {
		t.Error("Refresh replaced an unchanged toolset")
	}
}

func TestMountLostConnection(t *testing.T) {
	var writes atomic.Int64
	tools := testTools(&writes)
	srv := mcp.NewServer(tools, nil)
	hs := httptest.NewServer(srv.Handler())
	m := mount(t, &mcp.Spec{Name: "h", URL: hs.URL})
	hs.CloseClientConnections() // the server goes away
	hs.Close()

	// A call may still pick a connection of the pool that the server
	// closed (its close and the pool's notice of it race; the pool may
	// hold more than one); once those are spent, a call finds nothing
	// listening. Each is an error naming the server.
	refused := false
	for i := 0; i < 8 && !refused; i++ {
		_, err := call(t, m.Toolset(), "h__echo", `{"text":"x"}`)
		refused = err != nil && strings.Contains(err.Error(), "connection refused")
		stale := err != nil && (strings.Contains(err.Error(), "server closed idle connection") || strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF"))
		if err == nil || !strings.Contains(err.Error(), `mcp server "h"`) || !refused && !stale {
			t.Errorf("call %d to a server that is gone: %v", i, err)
		}
	}
	if !refused {
		t.Error("no call of 8 found the server gone (connection refused)")
	}
}

func TestMountOptions(t *testing.T) {
	var writes atomic.Int64
	srv := newHTTPServer(t, testTools(&writes))
	tests := []struct {
		name          string
		spec          mcp.Spec
		want          []string
		wantApprovals []bool
	}{
		// The server announces echo read-only (Concurrent, no approval), so
		// the default policy does not ask before it.
		{"prefix", mcp.Spec{Prefix: "x_", Tools: []string{"echo", "write"}}, []string{"x_echo", "x_write"}, []bool{false, true}},
		{"no prefix", mcp.Spec{NoPrefix: true, Tools: []string{"echo", "write", "nope"}}, []string{"echo", "write"}, []bool{false, true}},
		{"ask never", mcp.Spec{Approval: mcp.AskNever, Tools: []string{"echo", "write"}}, []string{"h__echo", "h__write"}, []bool{false, false}},
		{"ask always", mcp.Spec{Approval: mcp.AskAlways, Tools: []string{"echo"}}, []string{"h__echo"}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Name, spec.URL = "h", srv.URL
			ts := mount(t, &spec).Toolset()
			if diff := cmp.Diff(tt.want, ts.Names()); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			var approvals []bool
			for def := range ts.All() {
				approvals = append(approvals, def.RequiresApproval)
			}
			if diff := cmp.Diff(tt.wantApprovals, approvals); diff != "" {
				t.Errorf("RequiresApproval (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMountInvalidSpec(t *testing.T) {
	tests := []struct {
		name string
		spec *mcp.Spec
	}{
		{"nil", nil},
		{"no name", &mcp.Spec{Command: "x"}},
		{"bad name", &mcp.Spec{Name: "a b", Command: "x"}},
		{"long name", &mcp.Spec{Name: strings.Repeat("a", 33), Command: "x"}},
		{"nothing to run", &mcp.Spec{Name: "a"}},
		{"both", &mcp.Spec{Name: "a", Command: "x", URL: "http://localhost"}},
		{"bad URL", &mcp.Spec{Name: "a", URL: "ftp://localhost"}},
		{"bad approval", &mcp.Spec{Name: "a", Command: "x", Approval: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := mcp.Mount(t.Context(), tt.spec); !errors.Is(err, mcp.ErrInvalidSpec) {
				t.Errorf("err = %v, want ErrInvalidSpec", err)
			}
		})
	}
}

func TestMountMissingCommand(t *testing.T) {
	_, err := mcp.Mount(t.Context(), &mcp.Spec{Name: "gone", Command: "hrns-no-such-mcp-server"})
	if err == nil || !strings.Contains(err.Error(), `mcp server "gone": starting hrns-no-such-mcp-server`) {
		t.Errorf("err = %v", err)
	}
}

// TestLoopRun runs an agent whose tools include a mounted server's, with a
// scripted model, end to end.
func TestLoopRun(t *testing.T) {
	m := mount(t, nodeServer(t, "everything", "server-everything"))
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "c1", Name: "everything__echo", Arguments: []byte(`{"message":"from the model"}`)},
			llm.ToolCall{ID: "c2", Name: "everything__get-tiny-image", Arguments: []byte(`{}`)},
		),
		llmtest.Text("Done."),
	)
	var asked []string
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		asked = append(asked, req.Call.Name)
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	agent := loop.NewAgent(model, m.Toolset(), &loop.Options{Approver: approver})
	var res *loop.Result
	for chunk := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("Echo something and show the logo.")}) {
		if chunk.Type == loop.ChunkEnd {
			res = chunk.Result
		}
	}
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Answer != "Done." {
		t.Errorf("final text %q", res.Answer)
	}
	if len(asked) > 0 {
		t.Errorf("approvals asked for read-only tools: %v", asked)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var specs []string
	for _, s := range reqs[0].Tools {
		specs = append(specs, s.Name)
	}
	if !cmp.Equal(specs, m.Toolset().Names()) {
		t.Errorf("the model was offered %v", specs)
	}
	msgs := reqs[1].Messages
	results := msgs[len(msgs)-1]
	var got []string
	for _, p := range results.Parts {
		r := p.ToolResult
		var kinds []string
		for _, c := range r.Content {
			kinds = append(kinds, string(c.Kind))
		}
		got = append(got, r.CallID+" "+r.Text()+" "+strings.Join(kinds, ","))
	}
	want := []string{
		"c1 Echo: from the model text",
		"c2 Here's the image you requested:The image above is the MCP logo. text,image,text",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool results sent to the model (-want +got):\n%s", diff)
	}
}
