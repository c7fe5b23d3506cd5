package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// collector records the requests posted to it, decompressed.
type collector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	hdrs   []http.Header
	status []int // answers to give, in turn; then 200
	after  string
	// answer, when set, is the body of a 200, of type answerType.
	answer, answerType string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.hdrs = append(c.hdrs, r.Header.Clone())
		status := http.StatusOK
		if len(c.status) > 0 {
			status, c.status = c.status[0], c.status[1:]
			w.Header().Set("Retry-After", c.after)
		}
		answer, answerType := c.answer, c.answerType
		c.mu.Unlock()
		if status == http.StatusOK && answer != "" {
			w.Header().Set("Content-Type", answerType)
		}
		w.WriteHeader(status)
		if status == http.StatusOK {
			io.WriteString(w, answer)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) take() ([][]byte, []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, h := c.bodies, c.hdrs
	c.bodies, c.hdrs = nil, nil
	return b, h
}

var (
	tid1  = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid1  = trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
	sid2  = trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	t0    = time.Unix(1_700_000_000, 123456789)
	attrs = []attribute.KeyValue{
		attribute.String("s", "text"), attribute.String("empty", ""),
		attribute.Bool("t", true), attribute.Bool("f", false),
		attribute.Int64("i", -42), attribute.Int64("zero", 0),
		attribute.Float64("x", 2.5), attribute.Float64("fzero", 0),
		attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.Int64Slice("is", []int64{1, -2, 0}), attribute.Float64Slice("fs", []float64{0.5, -1}),
		attribute.StringSlice("none", nil),
	}
)

// spans covers what a span can carry: every kind and status, events,
// links, dropped counts, a trace state, remote and local parents, scopes
// with and without attributes and the empty scope, two resources.
func spans(t *testing.T) []sdktrace.ReadOnlySpan {
	ts, err := trace.ParseTraceState("vendor=value,other=x")
	if err != nil {
		t.Fatal(err)
	}
	sc := func(sid trace.SpanID, remote bool, flags trace.TraceFlags) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid1, SpanID: sid, TraceFlags: flags, TraceState: ts, Remote: remote})
	}
	r1 := resource.NewWithAttributes("https://schema/1", attribute.String("service.name", "hrns"), attribute.Int("n", 3))
	r2 := resource.NewSchemaless(attribute.String("service.name", "other"))
	scopeA := instrumentation.Scope{Name: "a", Version: "1.0", SchemaURL: "https://schema/a", Attributes: attribute.NewSet(attribute.String("k", "v"))}
	scopeB := instrumentation.Scope{Name: "b"}
	var out []sdktrace.ReadOnlySpan
	kinds := []trace.SpanKind{trace.SpanKindUnspecified, trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer}
	statuses := []sdktrace.Status{{}, {Code: codes.Ok}, {Code: codes.Error, Description: "it failed"}}
	for i := range 12 {
		s := tracetest.SpanStub{
			Name:                 []string{"invoke_agent", "chat model", ""}[i%3],
			SpanContext:          sc(trace.SpanID{byte(i + 10), 1, 2, 3, 4, 5, 6, 7}, false, trace.TraceFlags(i%2)),
			SpanKind:             kinds[i%len(kinds)],
			StartTime:            t0.Add(time.Duration(i) * time.Millisecond),
			EndTime:              t0.Add(time.Duration(i+5) * time.Millisecond),
			Status:               statuses[i%len(statuses)],
			Resource:             []*resource.Resource{r1, r2}[i%2],
			InstrumentationScope: []instrumentation.Scope{scopeA, scopeB, {}}[i%3],
		}
		switch i % 4 {
		case 0:
			s.Parent = sc(sid1, true, 1)
		case 1:
			s.Parent = sc(sid2, false, 0)
		}
		if i%2 == 0 {
			s.Attributes = attrs
			s.DroppedAttributes = i
			s.DroppedEvents, s.DroppedLinks = 1, 2
			s.Events = []sdktrace.Event{
				{Name: "e1", Time: t0, Attributes: attrs[:3], DroppedAttributeCount: 1},
				{Name: "", Time: time.Time{}},
			}
			s.Links = []sdktrace.Link{
				{SpanContext: sc(sid1, true, 1), Attributes: attrs[4:6], DroppedAttributeCount: 3},
				{SpanContext: sc(sid2, false, 0)},
			}
		}
		out = append(out, s.Snapshot())
	}
	return out
}

// sortResourceSpans orders a request's resources by their text: the SDK's
// exporter groups them in a map.
func sortResourceSpans(r *coltracepb.ExportTraceServiceRequest) {
	slices.SortFunc(r.ResourceSpans, func(a, b *tracepb.ResourceSpans) int {
		return strings.Compare(prototext.Format(a.Resource), prototext.Format(b.Resource))
	})
}

// TestTracesAsTheSDKExporter exports the same spans with otlptracehttp and
// with this package: the requests decode to the same message, with the
// same headers.
func TestTracesAsTheSDKExporter(t *testing.T) {
	for _, gz := range []bool{false, true} {
		col := newCollector(t)
		ctx := t.Context()
		hdrs := map[string]string{"Authorization": "Bearer t0ken", "X-Other": "1"}
		comp := otlptracehttp.NoCompression
		if gz {
			comp = otlptracehttp.GzipCompression
		}
		sdk, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(col.srv.URL+"/v1/traces"), otlptracehttp.WithHeaders(hdrs), otlptracehttp.WithCompression(comp))
		if err != nil {
			t.Fatal(err)
		}
		ours, err := NewTraceExporter(Config{Endpoint: col.srv.URL + "/v1/traces", Headers: hdrs, Gzip: gz})
		if err != nil {
			t.Fatal(err)
		}
		ss := spans(t)
		if err := sdk.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if err := ours.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if err := ours.ExportSpans(ctx, nil); err != nil { // nothing to send: no request, as the SDK's
			t.Fatal(err)
		}
		bodies, h := col.take()
		if len(bodies) != 2 {
			t.Fatalf("%d requests, want 2", len(bodies))
		}
		var want, got coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(bodies[0], &want); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(bodies[1], &got); err != nil {
			t.Fatalf("our request does not decode: %v", err)
		}
		sortResourceSpans(&want)
		sortResourceSpans(&got)
		if len(want.ResourceSpans) != 2 {
			t.Fatalf("the SDK's request has %d resources", len(want.ResourceSpans))
		}
		if !proto.Equal(&want, &got) {
			t.Errorf("gzip %v: the requests differ\nSDK:\n%s\nours:\n%s", gz, prototext.Format(&want), prototext.Format(&got))
		}
		if b, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(&got); !bytes.Equal(b, bodies[1]) {
			t.Errorf("gzip %v: our encoding is not the canonical one (%d bytes against %d)", gz, len(bodies[1]), len(b))
		}
		for _, k := range []string{"User-Agent", "Content-Type", "Content-Encoding", "Authorization", "X-Other"} {
			if h[0].Get(k) != h[1].Get(k) {
				t.Errorf("gzip %v: header %s: %q, the SDK's %q", gz, k, h[1].Get(k), h[0].Get(k))
			}
		}
		sdk.Shutdown(ctx)
		ours.Shutdown(ctx)
		if err := ours.ExportSpans(ctx, ss); err == nil {
			t.Error("an export after Shutdown succeeded")
		}
		if b, _ := col.take(); len(b) != 0 {
			t.Errorf("%d requests after Shutdown", len(b))
		}
	}
}

// metrics covers every kind of metric data: gauges, sums (delta and
// cumulative), histograms with and without min and max, exponential
// histograms, summaries, exemplars.
func metrics() *metricdata.ResourceMetrics {
	set := attribute.NewSet(attrs[:6]...)
	ex := []metricdata.Exemplar[int64]{{FilteredAttributes: attrs[:2], Time: t0, Value: 7, SpanID: sid1[:], TraceID: tid1[:]}, {Value: 0}}
	exf := []metricdata.Exemplar[float64]{{Time: t0, Value: -1.5}}
	return &metricdata.ResourceMetrics{
		Resource: resource.NewWithAttributes("https://schema/r", attribute.String("service.name", "hrns")),
		ScopeMetrics: []metricdata.ScopeMetrics{
			{Scope: instrumentation.Scope{Name: "github.com/hrns-dev/hrns/otel", Version: "1", SchemaURL: "https://schema/s"}, Metrics: []metricdata.Metrics{
				{Name: "g.int", Description: "d", Unit: "1", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Attributes: set, StartTime: t0, Time: t0.Add(time.Second), Value: -3, Exemplars: ex}, {Value: 0}}}},
				{Name: "g.float", Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{{Time: t0, Value: 0.25, Exemplars: exf}, {Value: 0}}}},
				{Name: "s.int", Unit: "{token}", Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{{Attributes: set, StartTime: t0, Time: t0, Value: 1 << 40}}}},
				{Name: "s.float", Data: metricdata.Sum[float64]{Temporality: metricdata.DeltaTemporality, DataPoints: []metricdata.DataPoint[float64]{{Value: -2}}}},
				{Name: "h.float", Unit: "s", Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
					{Attributes: set, StartTime: t0, Time: t0, Count: 3, Bounds: []float64{0, 0.5, 1}, BucketCounts: []uint64{0, 1, 2, 0}, Min: metricdata.NewExtrema(0.25), Max: metricdata.NewExtrema(0.75), Sum: 1.5, Exemplars: exf},
					{Count: 0},
				}}},
				{Name: "h.int", Data: metricdata.Histogram[int64]{Temporality: metricdata.DeltaTemporality, DataPoints: []metricdata.HistogramDataPoint[int64]{{Count: 1, Sum: 5, Min: metricdata.NewExtrema[int64](5), Bounds: []float64{10}, BucketCounts: []uint64{1, 0}}}}},
				{Name: "e.float", Data: metricdata.ExponentialHistogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.ExponentialHistogramDataPoint[float64]{
					{Attributes: set, StartTime: t0, Time: t0, Count: 9, Sum: 4.5, Scale: -2, ZeroCount: 1, ZeroThreshold: 1e-9, Min: metricdata.NewExtrema(-1.0), Max: metricdata.NewExtrema(3.0),
						PositiveBucket: metricdata.ExponentialBucket{Offset: -3, Counts: []uint64{1, 0, 300}}, NegativeBucket: metricdata.ExponentialBucket{Offset: 2, Counts: []uint64{4}}, Exemplars: exf},
					{Scale: 3},
				}}},
				{Name: "e.int", Data: metricdata.ExponentialHistogram[int64]{Temporality: metricdata.DeltaTemporality, DataPoints: []metricdata.ExponentialHistogramDataPoint[int64]{{Count: 1, Sum: 2}}}},
				{Name: "summary", Data: metricdata.Summary{DataPoints: []metricdata.SummaryDataPoint{{Attributes: set, StartTime: t0, Time: t0, Count: 4, Sum: 10, QuantileValues: []metricdata.QuantileValue{{Quantile: 0, Value: 1}, {Quantile: 0.5, Value: 2.5}}}, {}}}},
			}},
			{Scope: instrumentation.Scope{}, Metrics: []metricdata.Metrics{{Name: "empty.gauge", Data: metricdata.Gauge[int64]{}}}},
		},
	}
}

// TestMetricsAsTheSDKExporter exports the same metrics with otlpmetrichttp
// and with this package: the requests decode to the same message. A
// metric of unknown data is left out by both, with an error.
func TestMetricsAsTheSDKExporter(t *testing.T) {
	col := newCollector(t)
	ctx := t.Context()
	sdk, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(col.srv.URL+"/v1/metrics"), otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := NewMetricExporter(Config{Endpoint: col.srv.URL + "/v1/metrics", Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []bool{false, true} {
		rm := metrics()
		if bad {
			sm := &rm.ScopeMetrics[0]
			sm.Metrics = slices.Insert(sm.Metrics, 2, metricdata.Metrics{Name: "bad", Data: nil},
				metricdata.Metrics{Name: "bad.temporality", Data: metricdata.Sum[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}})
		}
		errSDK := sdk.Export(ctx, rm)
		errOurs := ours.Export(ctx, rm)
		if (errSDK != nil) != bad || (errOurs != nil) != bad {
			t.Errorf("bad %v: errors %v and ours %v", bad, errSDK, errOurs)
		}
		bodies, h := col.take()
		if len(bodies) != 2 {
			t.Fatalf("%d requests, want 2", len(bodies))
		}
		var want, got colmetricspb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(bodies[0], &want); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(bodies[1], &got); err != nil {
			t.Fatalf("our request does not decode: %v", err)
		}
		if !proto.Equal(&want, &got) {
			t.Errorf("bad %v: the requests differ\nSDK:\n%s\nours:\n%s", bad, prototext.Format(&want), prototext.Format(&got))
		}
		if b, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(&got); !bytes.Equal(b, bodies[1]) {
			t.Errorf("our encoding is not the canonical one (%d bytes against %d)", len(bodies[1]), len(b))
		}
		for _, k := range []string{"User-Agent", "Content-Type", "Content-Encoding"} {
			if h[0].Get(k) != h[1].Get(k) {
				t.Errorf("header %s: %q, the SDK's %q", k, h[1].Get(k), h[0].Get(k))
			}
		}
	}
	if err := ours.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ours.Export(ctx, metrics()); err == nil {
		t.Error("an export after Shutdown succeeded")
	}
	sdk.Shutdown(ctx)
}

// TestRetry: 503 is retried (after Retry-After, 1 s), 400 is not.
func TestRetry(t *testing.T) {
	defer func(d time.Duration) { retryInitial = d }(retryInitial)
	retryInitial = 10 * time.Millisecond
	col := newCollector(t)
	col.status, col.after = []int{http.StatusServiceUnavailable, http.StatusBadRequest}, "1"
	exp, err := NewTraceExporter(Config{Endpoint: col.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	err = exp.ExportSpans(t.Context(), spans(t))
	if err == nil || !strings.Contains(err.Error(), "400 Bad Request") {
		t.Errorf("error %v, want the 400", err)
	}
	if b, _ := col.take(); len(b) != 2 {
		t.Errorf("%d requests, want 2", len(b))
	}
}

// TestShutdownCancels: Shutdown ends an export that waits to retry.
func TestShutdownCancels(t *testing.T) {
	col := newCollector(t)
	col.status, col.after = []int{http.StatusTooManyRequests}, "30"
	exp, err := NewTraceExporter(Config{Endpoint: col.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- exp.ExportSpans(context.Background(), spans(t)) }()
	for {
		if col.mu.Lock(); len(col.bodies) > 0 {
			col.mu.Unlock()
			break
		}
		col.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	exp.Shutdown(context.Background())
	if err := <-done; err == nil {
		t.Error("the export succeeded")
	}
}

// TestCertificate: OTEL_EXPORTER_OTLP_CERTIFICATE (or the signal's own)
// names the roots a collector's certificate is checked against, as with
// the SDK's exporters; without it the system's roots are used, and a
// client certificate needs its key.
func TestCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ca := t.TempDir() + "/ca.pem"
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	export := func(env map[string]string) error {
		tc, err := TLSConfig(func(k string) string { return env[k] }, "TRACES")
		if err != nil {
			return err
		}
		exp, err := NewTraceExporter(Config{Endpoint: srv.URL + "/v1/traces", TLS: tc})
		if err != nil {
			return err
		}
		defer exp.Shutdown(context.Background())
		return exp.ExportSpans(t.Context(), spans(t))
	}
	if err := export(nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the roots: %v", err)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"} {
		if err := export(map[string]string{k: ca}); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": ca}); err == nil {
		t.Error("the metrics' roots were used for traces")
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": ca}); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("a client certificate without its key: %v", err)
	}
	if _, err := NewTraceExporter(Config{Endpoint: "http://127.0.0.1:1", TLS: &tls.Config{}}); err == nil {
		t.Error("TLS configuration accepted for an http:// endpoint")
	}
}

// TestErrorsHideSecrets: an endpoint with a password or a token in its
// query (both are sent, the password as basic authentication) is named
// without them in an export's errors, which hrns prints: a collector's
// refusal and a connection that fails. The headers never appear.
func TestErrorsHideSecrets(t *testing.T) {
	col := newCollector(t)
	col.status = []int{http.StatusUnauthorized}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{col.srv.URL, closed.URL} {
		u := strings.Replace(base, "http://", "http://user:pAsSwOrD@", 1) + "/v1/traces?api_key=qUeRyToKeN"
		exp, err := NewTraceExporter(Config{Endpoint: u, Headers: map[string]string{"Authorization": "Bearer hEaDeRtOkEn"}})
		if err != nil {
			t.Fatal(err)
		}
		err = exp.ExportSpans(t.Context(), spans(t))
		exp.Shutdown(t.Context())
		if err == nil {
			t.Fatalf("%s: the export succeeded", base)
		}
		for _, secret := range []string{"pAsSwOrD", "qUeRyToKeN", "hEaDeRtOkEn"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error names %s: %v", secret, err)
			}
		}
		if !strings.Contains(err.Error(), "/v1/traces") {
			t.Errorf("the error does not name the endpoint: %v", err)
		}
	}
	if _, h := col.take(); len(h) != 1 || h[0].Get("Authorization") != "Bearer hEaDeRtOkEn" {
		t.Errorf("the collector's requests: %v", h)
	}
}

// TestPartialSuccessAsTheSDK: a collector that answers 200 with a
// partial success (spans or data points rejected, or a message) makes
// the export fail with the error the SDK's exporters give; an empty
// partial success, an empty answer or one that is not protobuf is
// success; a malformed protobuf answer or one over 4 MiB is an error,
// with the SDK's too. Before, every 2xx was success.
func TestPartialSuccessAsTheSDK(t *testing.T) {
	trace := func(n int64, msg string) string {
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: n, ErrorMessage: msg}})
		return string(b)
	}
	metric := func(n int64, msg string) string {
		b, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceResponse{PartialSuccess: &colmetricspb.ExportMetricsPartialSuccess{RejectedDataPoints: n, ErrorMessage: msg}})
		return string(b)
	}
	const pb = "application/x-protobuf"
	for _, tc := range []struct {
		name, traceAnswer, metricAnswer, typ string
		wantErr                              string // "" for none, "*" for any
	}{
		{"rejected with a message", trace(3, "too old"), metric(3, "too old"), pb, "OTLP partial success: too old (3 "},
		{"rejected without a message", trace(7, ""), metric(7, ""), pb, "OTLP partial success: empty message (7 "},
		{"a message alone", trace(0, "slow down"), metric(0, "slow down"), pb, "OTLP partial success: slow down (0 "},
		{"negative", trace(-1, "x"), metric(-1, "x"), pb, "(-1 "},
		{"empty partial success", trace(0, ""), metric(0, ""), pb, ""},
		{"unknown fields around it", "\x10\x05" + trace(2, "m") + "\x1a\x00", "\x10\x05" + metric(2, "m") + "\x1a\x00", pb, "OTLP partial success: m (2 "},
		{"given twice: merged", trace(2, "a") + trace(0, "b"), metric(2, "a") + metric(0, "b"), pb, "OTLP partial success: b (2 "},
		{"not protobuf", "ok", "ok", "text/plain", ""},
		{"malformed", "\x0a\x05\x08", "\x0a\x05\x08", pb, "*"},
		{"too large", strings.Repeat("\x10\x01", 2<<20+1), strings.Repeat("\x10\x01", 2<<20+1), pb, "response body too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := newCollector(t)
			ctx := t.Context()
			col.answer, col.answerType = tc.traceAnswer, tc.typ
			sdkT, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(col.srv.URL+"/v1/traces"))
			if err != nil {
				t.Fatal(err)
			}
			defer sdkT.Shutdown(ctx)
			oursT, err := NewTraceExporter(Config{Endpoint: col.srv.URL + "/v1/traces"})
			if err != nil {
				t.Fatal(err)
			}
			defer oursT.Shutdown(ctx)
			check := func(kind string, sdkErr, ourErr error) {
				t.Helper()
				switch {
				case tc.wantErr == "":
					if sdkErr != nil || ourErr != nil {
						t.Errorf("%s: errors %v (the SDK's %v), want none", kind, ourErr, sdkErr)
					}
				case tc.wantErr == "*":
					if sdkErr == nil || ourErr == nil {
						t.Errorf("%s: errors %v (the SDK's %v), want both", kind, ourErr, sdkErr)
					}
				case strings.HasPrefix(tc.wantErr, "OTLP"):
					if sdkErr == nil || ourErr == nil || ourErr.Error() != sdkErr.Error() || !strings.Contains(ourErr.Error(), tc.wantErr) {
						t.Errorf("%s: error %q, the SDK's %q; want both the same, with %q", kind, ourErr, sdkErr, tc.wantErr)
					}
				default:
					if sdkErr == nil || ourErr == nil || !strings.Contains(ourErr.Error(), tc.wantErr) || !strings.Contains(sdkErr.Error(), tc.wantErr) {
						t.Errorf("%s: error %q, the SDK's %q; want both with %q", kind, ourErr, sdkErr, tc.wantErr)
					}
				}
			}
			ss := spans(t)
			check("spans", sdkT.ExportSpans(ctx, ss), oursT.ExportSpans(ctx, ss))

			col.mu.Lock()
			col.answer = tc.metricAnswer
			col.mu.Unlock()
			sdkM, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(col.srv.URL+"/v1/metrics"))
			if err != nil {
				t.Fatal(err)
			}
			defer sdkM.Shutdown(ctx)
			oursM, err := NewMetricExporter(Config{Endpoint: col.srv.URL + "/v1/metrics"})
			if err != nil {
				t.Fatal(err)
			}
			defer oursM.Shutdown(ctx)
			rm := &metricdata.ResourceMetrics{Resource: resource.Empty(), ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{
				{Name: "g", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}}}}}}
			check("metrics", sdkM.Export(ctx, rm), oursM.Export(ctx, rm))
		})
	}
}

// TestPartialSuccessMessageBounded: a partial success's message is cut
// at 4 KiB and made valid UTF-8 (it is printed).
func TestPartialSuccessMessageBounded(t *testing.T) {
	col := newCollector(t)
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1}})
	msg := "\xff" + strings.Repeat("m", 1<<20)
	b = append(b, 0x0a, 0) // one more partial_success, merged: its message
	b = binary.AppendUvarint(append(b[:len(b)-2], 0x0a), uint64(len(msg)+1+binary.PutUvarint(make([]byte, 10), uint64(len(msg)))))
	b = binary.AppendUvarint(append(b, 0x12), uint64(len(msg)))
	b = append(b, msg...)
	col.answer, col.answerType = string(b), "application/x-protobuf"
	exp, err := NewTraceExporter(Config{Endpoint: col.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(t.Context())
	err = exp.ExportSpans(t.Context(), spans(t))
	var ps *PartialSuccess
	if !errors.As(err, &ps) || ps.RejectedItems != 1 || len(ps.ErrorMessage) > 4<<10+8 || !utf8.ValidString(ps.ErrorMessage) || !strings.HasPrefix(ps.ErrorMessage, "\ufffdmmm") {
		t.Fatalf("error %.200v, want a partial success of 1 span with the message's first 4 KiB, valid UTF-8", err)
	}
}

// FuzzPartialSuccess: wherever protobuf decodes an answer with a valid
// message, partialSuccess reads the same values; it never panics.
func FuzzPartialSuccess(f *testing.F) {
	for _, m := range []*coltracepb.ExportTraceServiceResponse{
		{}, {PartialSuccess: &coltracepb.ExportTracePartialSuccess{}},
		{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: -5, ErrorMessage: "x"}},
	} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte("\x0b\x08\x01\x0c\x0a\x02\x08\x04"))
	f.Add([]byte("\x0a\x04\x13\x14\x08\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, msg, err := partialSuccess(b)
		var m coltracepb.ExportTraceServiceResponse
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		if err != nil {
			t.Fatalf("%q: %v, protobuf decodes it (%v)", b, err, &m)
		}
		if n != m.GetPartialSuccess().GetRejectedSpans() || msg != m.GetPartialSuccess().GetErrorMessage() {
			t.Fatalf("%q: %d %q, protobuf %d %q", b, n, msg, m.GetPartialSuccess().GetRejectedSpans(), m.GetPartialSuccess().GetErrorMessage())
		}
	})
}

// TestCollectorTextPrintable: what a collector writes in a refusal or a
// partial success's message reaches the error (which hrns prints)
// without control characters: an escape sequence or a newline is
// written as its Go escape, text that is not UTF-8 as U+FFFD.
func TestCollectorTextPrintable(t *testing.T) {
	const hostile = "\x1b]0;owned\x07\x1b[2Jred\nhrns: fake line\r\xff ok"
	const want = `\x1b]0;owned\a\x1b[2Jred\nhrns: fake line\r` + "\ufffd ok"
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1}})
	b = protowireString(b, hostile)
	for _, refuse := range []bool{true, false} {
		col := newCollector(t)
		col.answer, col.answerType = string(b), "application/x-protobuf"
		url := col.srv.URL
		if refuse {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, hostile)
			}))
			defer srv.Close()
			url = srv.URL
		}
		exp, err := NewTraceExporter(Config{Endpoint: url})
		if err != nil {
			t.Fatal(err)
		}
		err = exp.ExportSpans(t.Context(), spans(t))
		exp.Shutdown(t.Context())
		if err == nil || strings.ContainsFunc(err.Error(), unicode.IsControl) || !strings.Contains(err.Error(), want) {
			t.Errorf("refused %v: error %q, want it with %q and no control character", refuse, err, want)
		}
	}
}

// protowireString appends to an ExportTraceServiceResponse b one more
// partial_success with the error message msg (merged into the first).
func protowireString(b []byte, msg string) []byte {
	inner := binary.AppendUvarint([]byte{0x12}, uint64(len(msg)))
	inner = append(inner, msg...)
	b = binary.AppendUvarint(append(b, 0x0a), uint64(len(inner)))
	return append(b, inner...)
}
