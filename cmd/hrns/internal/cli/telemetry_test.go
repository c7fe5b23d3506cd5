package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

func TestOTLPConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		traces  otlpSignal
		metrics otlpSignal
		err     string
	}{
		{name: "nothing set"},
		{
			name:    "one endpoint for both",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
			traces:  otlpSignal{endpoint: "http://127.0.0.1:4318/v1/traces", headers: map[string]string{}},
			metrics: otlpSignal{endpoint: "http://127.0.0.1:4318/v1/metrics", headers: map[string]string{}},
		},
		{
			name:    "base path kept, trailing slash dropped",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/otlp/"},
			traces:  otlpSignal{endpoint: "https://otel.example/otlp/v1/traces", headers: map[string]string{}},
			metrics: otlpSignal{endpoint: "https://otel.example/otlp/v1/metrics", headers: map[string]string{}},
		},
		{
			name: "signal endpoint used as it is, metrics off",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:9999/custom",
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:4318",
				"OTEL_METRICS_EXPORTER":              "none",
			},
			traces: otlpSignal{endpoint: "http://collector:9999/custom", headers: map[string]string{}},
		},
		{
			name: "headers, signal headers, timeout, compression",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:4318",
				"OTEL_EXPORTER_OTLP_HEADERS":         "authorization=Bearer%20abc, x-team = agents",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-team=traces",
				"OTEL_EXPORTER_OTLP_TIMEOUT":         "2500",
				"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
				"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "100",
			},
			traces:  otlpSignal{endpoint: "http://127.0.0.1:4318/v1/traces", headers: map[string]string{"authorization": "Bearer abc", "x-team": "traces"}, timeout: 2500 * time.Millisecond, compression: "gzip"},
			metrics: otlpSignal{endpoint: "http://127.0.0.1:4318/v1/metrics", headers: map[string]string{"authorization": "Bearer abc", "x-team": "agents"}, timeout: 100 * time.Millisecond, compression: "gzip"},
		},
		{name: "grpc refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": hrns exports OTLP over http/protobuf only`},
		{name: "no scheme", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT: want an http:// or https:// URL"},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin": hrns exports with otlp, or none`},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, err: `OTEL_EXPORTER_OTLP_TIMEOUT="5s": want a positive number of milliseconds`},
		{name: "bad compression", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, err: `OTEL_EXPORTER_OTLP_COMPRESSION="zstd": want gzip or none`},
		{name: "bad header", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_HEADERS": "a=1,secret-without-key"}, err: "OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value"},
		{name: "bad header value", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=sk-secret%zz"}, err: "OTEL_EXPORTER_OTLP_HEADERS: the value of authorization is not a valid URL-encoded header value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			traces, terr := otlpConfig(getenv, "TRACES", "/v1/traces")
			metrics, merr := otlpConfig(getenv, "METRICS", "/v1/metrics")
			if err := errors.Join(terr, merr); tt.err != "" || err != nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) || tt.err == "" {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error quotes a header value: %v", err)
				}
				if _, ok := errors.AsType[*usageError](err); !ok {
					t.Errorf("%v is not a usage error", err)
				}
				return
			}
			opt := cmp.AllowUnexported(otlpSignal{})
			if diff := cmp.Diff(tt.traces, traces, opt); diff != "" {
				t.Errorf("traces (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.metrics, metrics, opt); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// Without an endpoint, or with the SDK disabled, nothing is set up: no
// observer, no exporter, nothing to flush.
func TestTelemetryOffByDefault(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
	} {
		tel, err := setupTelemetry(t.Context(), func(k string) string { return env[k] }, "openai", io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if tel.observer != nil || len(tel.shutdown) != 0 {
			t.Errorf("%v: telemetry set up", env)
		}
	}
}

// collector is an OTLP/HTTP receiver on loopback: it decodes the protobuf
// requests the exporters send.
type collector struct {
	srv     *httptest.Server
	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricspb.ExportMetricsServiceRequest
	headers []http.Header
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = http.MaxBytesReader(w, r.Body, 16<<20)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(io.LimitReader(body, 64<<20))
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var resp proto.Message
		c.mu.Lock()
		defer c.mu.Unlock()
		c.headers = append(c.headers, r.Header.Clone())
		switch r.URL.Path {
		case "/v1/traces":
			req := &coltracepb.ExportTraceServiceRequest{}
			err = proto.Unmarshal(b, req)
			c.traces = append(c.traces, req)
			resp = &coltracepb.ExportTraceServiceResponse{}
		case "/v1/metrics":
			req := &colmetricspb.ExportMetricsServiceRequest{}
			err = proto.Unmarshal(b, req)
			c.metrics = append(c.metrics, req)
			resp = &colmetricspb.ExportMetricsServiceResponse{}
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			t.Errorf("%s: %v", r.URL.Path, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			}
		}
	}
	return ""
}

// TestRunExportsOTLP runs the hrns binary with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a loopback collector: the run's spans and metrics arrive,
// flushed when the command exits, with the configured headers and service
// name.
func TestRunExportsOTLP(t *testing.T) {
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "It says hello."},
	)
	defer model.Close()
	col := newCollector(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644)
	cmd := exec.CommandContext(t.Context(), hrnsBinary(t), "run", "--tools", "read_file", "read hello.txt")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20t0ken",
		"OTEL_SERVICE_NAME=hrns-e2e",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("hrns run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "It says hello.") {
		t.Errorf("stdout = %q", stdout.String())
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, h := range col.headers {
		if h.Get("Authorization") != "Bearer t0ken" {
			t.Errorf("a request came without the configured header: %v", h)
		}
	}
	spans := map[string]*tracepb.Span{}
	for _, req := range col.traces {
		for _, rs := range req.ResourceSpans {
			if got := attrString(rs.Resource.Attributes, "service.name"); got != "hrns-e2e" {
				t.Errorf("service.name = %q", got)
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = s
				}
			}
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range spans {
			if !yield(n) {
				return
			}
		}
	})
	if diff := cmp.Diff([]string{"chat test-model", "execute_tool read_file", "invoke_agent"}, names); diff != "" {
		t.Fatalf("spans (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
	}
	run, chat, tool := spans["invoke_agent"], spans["chat test-model"], spans["execute_tool read_file"]
	if !bytes.Equal(chat.ParentSpanId, run.SpanId) || !bytes.Equal(tool.ParentSpanId, run.SpanId) || !bytes.Equal(chat.TraceId, run.TraceId) {
		t.Error("the chat and tool spans are not children of the run's span")
	}
	for _, c := range []struct {
		span      *tracepb.Span
		key, want string
	}{
		{run, "gen_ai.operation.name", "invoke_agent"},
		{run, "gen_ai.provider.name", "openai"},
		{run, "hrns.run.status", "completed"},
		{chat, "gen_ai.operation.name", "chat"},
		{chat, "gen_ai.request.model", "test-model"},
		{chat, "gen_ai.provider.name", "openai"},
		{tool, "gen_ai.tool.name", "read_file"},
		{tool, "gen_ai.tool.call.id", "c1"},
	} {
		if got := attrString(c.span.Attributes, c.key); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.span.Name, c.key, got, c.want)
		}
	}
	if chat.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("chat span kind %v", chat.Kind)
	}
	metrics := map[string]bool{}
	for _, req := range col.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					metrics[m.Name] = true
				}
			}
		}
	}
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration"} {
		if !metrics[name] {
			t.Errorf("metric %s did not arrive (got %v)", name, metrics)
		}
	}
}

// An unreachable collector does not fail the run, nor hold its exit for
// long: the flush is bounded, and the failure is reported on stderr.
func TestRunWithUnreachableCollector(t *testing.T) {
	model := openaitest.NewServer(openaitest.Reply{Text: "hi"})
	defer model.Close()
	env := map[string]string{
		"HOME": t.TempDir(), "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + freeAddr(t), "OTEL_EXPORTER_OTLP_TIMEOUT": "200",
	}
	code := Run(context.Background(), []string{"run", "--tools", "none", "say hi"}, &IO{
		In: strings.NewReader(""), Out: io.Discard, Err: io.Discard,
		Getenv: func(k string) string { return env[k] },
	})
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
}

// stop stops the cluster's replicas with SIGTERM and waits for them: what
// they recorded is flushed by then.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	for i, r := range c.replicas {
		if r.dead {
			continue
		}
		r.cmd.Process.Signal(syscall.SIGTERM)
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("replica %d after SIGTERM: %v\n%s", i, err, r.logs.String())
		}
		r.dead = true
	}
}

// TestServeReplicasContinueTrace: a session that waits for a client-side
// tool on one hrns serve process is resumed by another (the first has
// stopped), over PostgreSQL; the second process's run continues the trace
// the first one started, as the spans both exported to the collector show.
func TestServeReplicasContinueTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two hrns serve processes")
	}
	dsn := postgrestest.DSN(t)
	model := openaitest.NewServer()
	defer model.Close()
	for range 10 {
		model.Push(openaitest.Reply{Func: replicaModel})
	}
	col := newCollector(t)
	env := func(name string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL, "OTEL_METRICS_EXPORTER=none", "OTEL_SERVICE_NAME=" + name}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	a := startClusterEnv(t, 1, 2, dsn, model, env("replica-a"))
	h, err := a.client(0).StartSession(ctx, inlineAgent("Check order 7."), orderTool)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ctx, h, session.StatusAwaitingToolResults)
	a.stop(t)

	b := startClusterEnv(t, 1, 2, dsn, model, env("replica-b"))
	hb := b.client(0).Session(h.ID())
	res := client.ToolResult{Kind: session.KindToolResult, ToolReq: client.ToolRequest{ToolName: "get_order_status", ID: "call_7"}, Result: json.RawMessage(`"status-7"`)}
	if err := hb.PostToolResults(ctx, res); err != nil {
		t.Fatal(err)
	}
	done, err := hb.WaitForCompletion(ctx, orderTool)
	if err != nil || done.Answer != "order 7: status-7" {
		t.Fatalf("the session ended with %+v: %v", done, err)
	}
	b.stop(t)

	col.mu.Lock()
	defer col.mu.Unlock()
	runs := map[string]*tracepb.Span{} // by service
	for _, req := range col.traces {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if strings.HasPrefix(s.Name, "invoke_agent") {
						runs[attrString(rs.Resource.Attributes, "service.name")] = s
					}
				}
			}
		}
	}
	first, resumed := runs["replica-a"], runs["replica-b"]
	if first == nil || resumed == nil {
		t.Fatalf("run spans by service: %v", runs)
	}
	if got := attrString(first.Attributes, "hrns.run.status"); got != "suspended" {
		t.Errorf("replica A's run status %q, want suspended", got)
	}
	if !bytes.Equal(resumed.TraceId, first.TraceId) || !bytes.Equal(resumed.ParentSpanId, first.SpanId) {
		t.Errorf("replica B's run is in trace %x under %x; want trace %x under %x", resumed.TraceId, resumed.ParentSpanId, first.TraceId, first.SpanId)
	}
	if len(resumed.Links) != 1 || !bytes.Equal(resumed.Links[0].SpanId, first.SpanId) {
		t.Errorf("replica B's run links %v, want replica A's run", resumed.Links)
	}
}

// FuzzParseOTLPHeaders: any value of an OTEL_*HEADERS variable is parsed
// or refused, never panics, and what it gives is a valid header.
func FuzzParseOTLPHeaders(f *testing.F) {
	for _, s := range []string{"a=b", "authorization=Bearer%20x, x-team = a", "a=1,,b=%zz", "=x", "a", "k=v=w", "k=%0d%0a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := map[string]string{}
		err := parseOTLPHeaders("OTEL_EXPORTER_OTLP_HEADERS", v, h)
		if err != nil {
			if _, ok := errors.AsType[*usageError](err); !ok {
				t.Fatalf("%v is not a usage error", err)
			}
			return
		}
		for k, val := range h {
			if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(val) {
				t.Fatalf("header %q: %q from %q", k, val, v)
			}
		}
	})
}
