package otel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	hotel "github.com/hrns-dev/hrns/otel"
)

// telemetry is an SDK that keeps what it records in memory.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	obs    *hotel.Observer
}

func newTelemetry(t *testing.T, opts hotel.Options) *telemetry {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	opts.TracerProvider, opts.MeterProvider = tp, mp
	obs, err := hotel.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return &telemetry{spans: spans, reader: reader, obs: obs}
}

// shown are the attributes the tree prints, when a span has them.
var shown = []attribute.Key{
	"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name", "gen_ai.request.model", "gen_ai.response.model",
	"gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
	"gen_ai.usage.cache_read.input_tokens", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type",
	"error.type", "hrns.run.status", "hrns.run.resumed", "hrns.retries", "hrns.tool.pending", "hrns.agent.depth",
}

// tree renders spans as an indented tree, children in start order, each
// line with its kind, the attributes in shown, its status, events and
// links (named by the span linked to).
func tree(spans tracetest.SpanStubs) string {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	children := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if _, ok := byID[s.Parent.SpanID()]; ok && s.Parent.IsValid() {
			children[s.Parent.SpanID()] = append(children[s.Parent.SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a []tracetest.SpanStub) {
		sort.SliceStable(a, func(i, j int) bool { return a[i].StartTime.Before(a[j].StartTime) })
	}
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "%s%s (%s)", strings.Repeat("  ", depth), s.Name, s.SpanKind)
		attrs := attribute.NewSet(s.Attributes...)
		for _, k := range shown {
			if v, ok := attrs.Value(k); ok {
				fmt.Fprintf(&b, " %s=%s", k, v.String())
			}
		}
		if s.Status.Code == codes.Error {
			fmt.Fprintf(&b, " status=error")
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, " event=%s", e.Name)
		}
		for _, l := range s.Links {
			name := "?"
			if ls, ok := byID[l.SpanContext.SpanID()]; ok {
				name = ls.Name
			}
			same := l.SpanContext.TraceID() == s.SpanContext.TraceID()
			fmt.Fprintf(&b, " link=%q(same trace: %v)", name, same)
		}
		b.WriteString("\n")
		kids := children[s.SpanContext.SpanID()]
		byStart(kids)
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	byStart(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

func usage(in, out int64) llm.Usage { return llm.Usage{InputTokens: in, OutputTokens: out} }

// TestSpanTree runs an agent through a retry, a tool call, a failing tool
// call, a sub-agent that suspends on a client-side tool, and the resume
// that finishes it, and checks the spans: their tree, names and GenAI
// attributes, and that the resumed runs continue the trace.
func TestSpanTree(t *testing.T) {
	tel := newTelemetry(t, hotel.Options{Provider: "openai", AgentName: "support"})
	fail := loop.NewTool("lookup", "Looks an order up.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("database down")
	})
	echo := loop.NewTool("echo", "Echoes text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	})
	model := llmtest.NewModel(
		llmtest.Fail(&llm.APIError{StatusCode: 503, Message: "busy"}),
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "echo", Arguments: llm.Arguments(`{"text":"hi"}`)},
			{ID: "c2", Name: "lookup", Arguments: llm.Arguments(`{}`)},
			{ID: "c3", Name: "helper", Arguments: llm.Arguments(`{"task":"ask the user"}`)},
		}, Usage: llm.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 100}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "k1", Name: "ask", Arguments: llm.Arguments(`{}`)}}, Usage: usage(40, 5)},
		llmtest.Reply{Text: "the user agrees", Usage: usage(50, 6)},
		llmtest.Reply{Text: "done", Usage: usage(200, 7)},
	)
	child := loop.NewAgent(model, loop.MustToolset(loop.NewClientTool("ask", "Asks the user.", json.RawMessage(`{"type":"object"}`))),
		&loop.Options{Model: "small"})
	agent := loop.NewAgent(model, loop.MustToolset(echo, fail, loop.AgentTool("helper", "Helps.", child, nil)), &loop.Options{
		Model:    "big",
		Observer: tel.obs,
		Retry:    loop.RetryPolicy{BaseDelay: time.Millisecond},
	})
	res, err := loop.Drain(agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res == nil || res.Status != loop.StatusSuspended {
		t.Fatalf("run: %v", err)
	}
	first := tel.spans.GetSpans()
	if res.Suspension.TraceParent == "" || res.Suspension.Calls[2].Agent.TraceParent == "" {
		t.Fatalf("no trace parents in the suspension: %q", res.Suspension.TraceParent)
	}
	b, err := json.Marshal(res.Suspension)
	if err != nil {
		t.Fatal(err)
	}
	var s loop.Suspension
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	res, err = loop.Drain(agent.Resume(t.Context(), &s, &loop.ResumeInput{Results: []llm.ToolResult{
		{CallID: "k1", Content: []llm.Part{llm.TextPart("yes")}},
	}}))
	if err != nil || res.Answer != "done" {
		t.Fatalf("resume: %v", err)
	}
	spans := tel.spans.GetSpans()
	want := `invoke_agent support (internal) gen_ai.operation.name=invoke_agent gen_ai.provider.name=openai gen_ai.agent.name=support gen_ai.request.model=big gen_ai.usage.input_tokens=160 gen_ai.usage.output_tokens=35 hrns.run.status=suspended
  chat big (client) gen_ai.operation.name=chat gen_ai.provider.name=openai gen_ai.request.model=big gen_ai.response.model=big gen_ai.response.finish_reasons=["tool_calls"] gen_ai.usage.input_tokens=120 gen_ai.usage.output_tokens=30 gen_ai.usage.cache_read.input_tokens=100 hrns.retries=1 event=hrns.retry
  execute_tool echo (internal) gen_ai.operation.name=execute_tool gen_ai.provider.name=openai gen_ai.tool.name=echo gen_ai.tool.call.id=c1 gen_ai.tool.type=function
  execute_tool lookup (internal) gen_ai.operation.name=execute_tool gen_ai.provider.name=openai gen_ai.tool.name=lookup gen_ai.tool.call.id=c2 gen_ai.tool.type=function error.type=failed status=error
  execute_tool helper (internal) gen_ai.operation.name=execute_tool gen_ai.provider.name=openai gen_ai.tool.name=helper gen_ai.tool.call.id=c3 gen_ai.tool.type=function hrns.tool.pending=agent
    invoke_agent helper (internal) gen_ai.operation.name=invoke_agent gen_ai.provider.name=openai gen_ai.agent.name=helper gen_ai.request.model=small gen_ai.usage.input_tokens=40 gen_ai.usage.output_tokens=5 hrns.run.status=suspended hrns.agent.depth=1
      chat small (client) gen_ai.operation.name=chat gen_ai.provider.name=openai gen_ai.request.model=small gen_ai.response.model=small gen_ai.response.finish_reasons=["tool_calls"] gen_ai.usage.input_tokens=40 gen_ai.usage.output_tokens=5
      execute_tool ask (internal) gen_ai.operation.name=execute_tool gen_ai.provider.name=openai gen_ai.tool.name=ask gen_ai.tool.call.id=k1 gen_ai.tool.type=function hrns.tool.pending=result
  invoke_agent support (internal) gen_ai.operation.name=invoke_agent gen_ai.provider.name=openai gen_ai.agent.name=support gen_ai.request.model=big gen_ai.usage.input_tokens=410 gen_ai.usage.output_tokens=48 hrns.run.status=completed hrns.run.resumed=true link="invoke_agent support"(same trace: true)
    execute_tool helper (internal) gen_ai.operation.name=execute_tool gen_ai.provider.name=openai gen_ai.tool.name=helper gen_ai.tool.call.id=c3 gen_ai.tool.type=function
      invoke_agent helper (internal) gen_ai.operation.name=invoke_agent gen_ai.provider.name=openai gen_ai.agent.name=helper gen_ai.request.model=small gen_ai.usage.input_tokens=90 gen_ai.usage.output_tokens=11 hrns.run.status=completed hrns.run.resumed=true hrns.agent.depth=1 link="invoke_agent helper"(same trace: true)
        chat small (client) gen_ai.operation.name=chat gen_ai.provider.name=openai gen_ai.request.model=small gen_ai.response.model=small gen_ai.response.finish_reasons=["stop"] gen_ai.usage.input_tokens=50 gen_ai.usage.output_tokens=6
    chat big (client) gen_ai.operation.name=chat gen_ai.provider.name=openai gen_ai.request.model=big gen_ai.response.model=big gen_ai.response.finish_reasons=["stop"] gen_ai.usage.input_tokens=200 gen_ai.usage.output_tokens=7
`
	if diff := cmp.Diff(want, tree(spans)); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		traces[s.SpanContext.TraceID()] = true
	}
	if len(traces) != 1 || len(first) != 8 {
		t.Errorf("%d traces, %d spans before the suspension; want 1 trace, 8 spans", len(traces), len(first))
	}
}

// points renders the metrics as sorted lines: name, attributes, count,
// and the sum where it is not a duration.
func points(t *testing.T, reader *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	attrs := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		return strings.Join(kv, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != hotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s[%s] {%s} count=%d sum=%d", m.Name, m.Unit, attrs(p.Attributes), p.Count, p.Sum))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s[%s] {%s} count=%d", m.Name, m.Unit, attrs(p.Attributes), p.Count))
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s[%s] {%s} sum=%d", m.Name, m.Unit, attrs(p.Attributes), p.Value))
				}
			default:
				t.Errorf("metric %s of type %T", m.Name, m.Data)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestMetrics(t *testing.T) {
	tel := newTelemetry(t, hotel.Options{Provider: "anthropic"})
	fail := loop.NewTool("lookup", "Looks an order up.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("database down")
	})
	model := llmtest.NewModel(
		llmtest.Fail(&llm.APIError{StatusCode: 429, Message: "slow down"}),
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: llm.Arguments(`{}`)}}, Usage: usage(100, 20)},
		llmtest.Reply{Text: "sorry", Usage: usage(150, 5)},
	)
	agent := loop.NewAgent(model, loop.MustToolset(fail), &loop.Options{Model: "claude", Observer: tel.obs, Retry: loop.RetryPolicy{BaseDelay: time.Millisecond}})
	if _, err := loop.Drain(agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")})); err != nil {
		t.Fatal(err)
	}
	// A run that fails: its request and its run carry error.type.
	bad := loop.NewAgent(llmtest.NewModel(llmtest.Fail(&llm.APIError{StatusCode: 400, Message: "no"})), nil, &loop.Options{Model: "claude", Observer: tel.obs})
	if _, err := loop.Drain(bad.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")})); err == nil {
		t.Fatal("the bad run did not fail")
	}
	want := []string{
		"gen_ai.client.operation.duration[s] {error.type=bad_request,gen_ai.operation.name=chat,gen_ai.provider.name=anthropic,gen_ai.request.model=claude} count=1",
		"gen_ai.client.operation.duration[s] {gen_ai.operation.name=chat,gen_ai.provider.name=anthropic,gen_ai.request.model=claude,gen_ai.response.model=claude} count=2",
		"gen_ai.client.token.usage[{token}] {gen_ai.operation.name=chat,gen_ai.provider.name=anthropic,gen_ai.request.model=claude,gen_ai.response.model=claude,gen_ai.token.type=input} count=2 sum=250",
		"gen_ai.client.token.usage[{token}] {gen_ai.operation.name=chat,gen_ai.provider.name=anthropic,gen_ai.request.model=claude,gen_ai.response.model=claude,gen_ai.token.type=output} count=2 sum=25",
		"gen_ai.execute_tool.duration[s] {error.type=failed,gen_ai.operation.name=execute_tool,gen_ai.provider.name=anthropic,gen_ai.tool.name=lookup} count=1",
		"gen_ai.invoke_agent.duration[s] {error.type=bad_request,gen_ai.operation.name=invoke_agent,gen_ai.provider.name=anthropic} count=1",
		"gen_ai.invoke_agent.duration[s] {gen_ai.operation.name=invoke_agent,gen_ai.provider.name=anthropic} count=1",
		"hrns.model.retries[{retry}] {error.type=rate_limited,gen_ai.operation.name=chat,gen_ai.provider.name=anthropic} sum=1",
	}
	if diff := cmp.Diff(want, points(t, tel.reader)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// A suspension's trace parent comes from storage: one that is not a valid
// traceparent starts a new trace, without a link, and does not fail.
func TestResumeWithInvalidTraceParent(t *testing.T) {
	for _, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", strings.Repeat("0", 10000)} {
		tel := newTelemetry(t, hotel.Options{})
		model := llmtest.NewModel(llmtest.Text("ok"))
		agent := loop.NewAgent(model, loop.MustToolset(loop.NewClientTool("ask", "Asks.", json.RawMessage(`{"type":"object"}`))), &loop.Options{Observer: tel.obs})
		s := &loop.Suspension{
			Messages:    []llm.Message{llm.UserMessage("go"), {Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "a", Name: "ask", Arguments: llm.Arguments(`{}`)}}}}},
			Calls:       []loop.SuspendedCall{{Call: llm.ToolCall{ID: "a", Name: "ask"}, Waiting: loop.PendingResult}},
			Turn:        1,
			TraceParent: tp,
		}
		res, err := loop.Drain(agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "a", Content: []llm.Part{llm.TextPart("x")}}}}))
		if err != nil || res.Answer != "ok" {
			t.Fatalf("%q: %v", tp, err)
		}
		got := tree(tel.spans.GetSpans())
		want := "invoke_agent (internal) gen_ai.operation.name=invoke_agent gen_ai.usage.input_tokens=10 gen_ai.usage.output_tokens=1 hrns.run.status=completed hrns.run.resumed=true\n" +
			`  chat (client) gen_ai.operation.name=chat gen_ai.response.finish_reasons=["stop"] gen_ai.usage.input_tokens=10 gen_ai.usage.output_tokens=1` + "\n"
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%.20q: spans (-want +got):\n%s", tp, diff)
		}
	}
}

// Without a configured SDK, the observer records nothing and costs the
// run nothing it can see.
func TestGlobalNoopProviders(t *testing.T) {
	obs, err := hotel.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(llmtest.Call("c1", "ask", `{}`))
	agent := loop.NewAgent(model, loop.MustToolset(loop.NewClientTool("ask", "Asks.", json.RawMessage(`{"type":"object"}`))), &loop.Options{Observer: obs})
	res, _ := loop.Drain(agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended || res.Suspension.TraceParent != "" {
		t.Fatalf("status %s, trace parent %q", res.Status, res.Suspension.TraceParent)
	}
}

// A run its consumer stops is "stopped", not failed; its request, given
// up, says canceled without an error status.
func TestStoppedRun(t *testing.T) {
	tel := newTelemetry(t, hotel.Options{})
	agent := loop.NewAgent(llmtest.NewModel(llmtest.Text("a long answer")), nil, &loop.Options{Observer: tel.obs})
	for c := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
		if c.Type == loop.ChunkMessage {
			break
		}
	}
	want := "invoke_agent (internal) gen_ai.operation.name=invoke_agent gen_ai.usage.input_tokens=0 gen_ai.usage.output_tokens=0 hrns.run.status=stopped\n" +
		"  chat (client) gen_ai.operation.name=chat error.type=canceled\n"
	if diff := cmp.Diff(want, tree(tel.spans.GetSpans())); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}
