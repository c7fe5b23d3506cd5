package session_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/otel"
	"github.com/hrns-dev/hrns/session"
)

// replicaTracing is the tracing of one replica: its own SDK and exporter,
// as another process would have.
func replicaTracing(t *testing.T) (*otel.Observer, *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	obs, err := otel.New(&otel.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return obs, spans
}

// A session that waits for a client-side tool keeps its run's trace
// context in the store: the replica that resumes it continues the trace.
func TestTraceContinuesOnAnotherReplica(t *testing.T) {
	st := openStore(t)
	model := llmtest.NewModel(
		llmtest.Call("call_1", "get_order_status", `{"order_id":"4242"}`),
		llmtest.Text("Order 4242 shipped."),
	)
	obsA, spansA := replicaTracing(t)
	a := startManager(t, st, model, &session.Options{Observer: obsA})
	v := create(t, a, `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Order status.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check order 4242."}`)
	(&follower{t: t, m: a, id: v.ID}).status(session.StatusAwaitingToolResults)
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	var first trace.SpanContext
	for _, s := range spansA.GetSpans() {
		if s.Name == "invoke_agent" {
			first = s.SpanContext
		}
	}
	if !first.IsValid() {
		t.Fatalf("replica A recorded no run span: %v", spansA.GetSpans())
	}

	obsB, spansB := replicaTracing(t)
	b := startManager(t, st, model, &session.Options{Observer: obsB})
	req := session.ToolRequest{ToolName: "get_order_status", Args: json.RawMessage(`{"order_id":"4242"}`), ID: "call_1"}
	if err := b.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: req, Result: json.RawMessage(`"shipped"`)}}); err != nil {
		t.Fatal(err)
	}
	(&follower{t: t, m: b, id: v.ID}).status(session.StatusCompleted)
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	var resumed *tracetest.SpanStub
	for _, s := range spansB.GetSpans() {
		if s.Name == "invoke_agent" {
			resumed = &s
		}
	}
	if resumed == nil {
		t.Fatalf("replica B recorded no run span: %v", spansB.GetSpans())
	}
	if resumed.SpanContext.TraceID() != first.TraceID() || resumed.Parent.SpanID() != first.SpanID() {
		t.Errorf("the resumed run is in trace %s under %s, want trace %s under %s",
			resumed.SpanContext.TraceID(), resumed.Parent.SpanID(), first.TraceID(), first.SpanID())
	}
	if len(resumed.Links) != 1 || resumed.Links[0].SpanContext.SpanID() != first.SpanID() {
		t.Errorf("links = %+v, want one to the suspended run", resumed.Links)
	}
	var sawChat bool
	for _, s := range spansB.GetSpans() {
		if s.Name == "chat" && s.Parent.SpanID() == resumed.SpanContext.SpanID() {
			sawChat = true
		}
	}
	if !sawChat {
		t.Error("replica B's model request is not in the resumed run's span")
	}
}

// A run that stops to let the caller's input in (here a pause) is traced
// as stopped, not as failed: no span of it has an error status.
func TestYieldIsNoError(t *testing.T) {
	release := make(chan struct{})
	slow := loop.NewTool("slow", "waits", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	model := llmtest.NewModel(llmtest.Call("c1", "slow", `{}`), llmtest.Text("answer"))
	obs, spans := replicaTracing(t)
	m := startManager(t, openStore(t), model, &session.Options{
		Agents:   map[string]*session.AgentConfig{"worker": {Description: "works", Toolsets: []string{"slow"}}},
		Toolsets: map[string]*loop.Toolset{"slow": loop.MustToolset(slow)},
		Observer: obs,
	})
	v := create(t, m, `{"agent":"worker","messages":"start"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.until(func(c *session.Changes) bool { return slices.Contains(kinds(c.NewEvents), "AgentEvent/policy_event") })
	if err := m.Pause(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	f.status(session.StatusPaused)
	m.Stop(t.Context())
	var got []string
	for _, s := range spans.GetSpans() {
		status := ""
		for _, kv := range s.Attributes {
			if kv.Key == "hrns.run.status" || kv.Key == "error.type" {
				status += " " + string(kv.Key) + "=" + kv.Value.AsString()
			}
		}
		got = append(got, s.Name+status+" "+s.Status.Code.String())
	}
	// The run yields before its second model request: no request is
	// started and cancelled.
	want := []string{
		"chat Unset",
		"execute_tool slow Unset",
		"invoke_agent hrns.run.status=yielded Unset",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}
