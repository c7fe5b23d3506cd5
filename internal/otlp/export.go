// Package otlp exports OpenTelemetry spans and metrics over OTLP/HTTP
// with protobuf, as go.opentelemetry.io/otel's otlptracehttp and
// otlpmetrichttp do, without linking gRPC, grpc-gateway or the protobuf
// runtime: hrns encodes the requests itself (encode.go). Those packages
// cost every start of the hrns command about 15 % of its instructions and
// a tenth of its binary, telemetry configured or not
// (docs/performance.md, target 4).
//
// What is kept from the SDK's exporters: the requests' content (the same
// messages, field for field), the User-Agent, the headers, gzip, the
// timeout of each request (10 s by default), retries on 429, 502, 503 and
// 504 and on temporary network errors (exponential back-off from 5 s up to
// 30 s, with Retry-After honoured, for at most a minute), the proxy from
// the environment and OTEL_EXPORTER_OTLP_CERTIFICATE,
// _CLIENT_CERTIFICATE and _CLIENT_KEY (and their per-signal forms), and
// a collector's partial success (a 2xx whose protobuf answer says it
// rejected spans or data points, or has a message): the export returns it
// as an error, "OTLP partial success: <message> (<n> spans rejected)",
// which the SDK's processors hand to the error handler (hrns prints it).
// What differs: a partial success's message is cut at 4 KiB and made
// valid UTF-8 (the SDK's is whole, and an answer whose message is not
// UTF-8 fails to decode there); an answer in JSON is not read (hrns
// posts protobuf, and a collector answers in the request's type).
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultTimeout bounds one export request unless Config.Timeout is set.
const DefaultTimeout = 10 * time.Second

// maxErrorBody bounds how much of a failed request's answer an error
// quotes; maxDrain the most of a successful answer read (its partial
// success; a longer answer is an error, as the SDK's default).
const (
	maxErrorBody = 4 << 10
	maxDrain     = 4 << 20
)

// Config configures one exporter.
type Config struct {
	Endpoint string            // the full URL requests are posted to
	Headers  map[string]string // added to every request
	Timeout  time.Duration     // per request; 0: DefaultTimeout
	Gzip     bool              // compress request bodies
	// TLS is the client TLS configuration for an https endpoint; nil: the
	// system's roots. TLSConfig builds it from the standard variables.
	TLS *tls.Config
}

// TLSConfig reads the certificate variables of one signal ("TRACES" or
// "METRICS"), the signal's own before the general ones, through getenv:
// OTEL_EXPORTER_OTLP_CERTIFICATE (the roots to trust, PEM) and
// OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE with _CLIENT_KEY (a client
// certificate). It returns nil when none is set.
func TLSConfig(getenv func(string) string, signal string) (*tls.Config, error) {
	get := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_" + name)); v != "" {
			return v, "OTEL_EXPORTER_OTLP_" + signal + "_" + name
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	ca, caName := get("CERTIFICATE")
	cert, certName := get("CLIENT_CERTIFICATE")
	key, keyName := get("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate in %s", caName, ca)
		}
		c.RootCAs = pool
	}
	if cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, fmt.Errorf("%s and %s go together", certName, keyName)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certName, keyName, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// client posts requests to one endpoint.
type client struct {
	cfg       Config
	where     string // the endpoint as errors name it (see redact)
	rejected  string // what a partial success rejects: "spans" or "metric data points"
	userAgent string
	http      *http.Client
	stop      chan struct{}
	once      sync.Once
	closed    chan struct{} // closed by shutdown: exports are refused
}

// The SDK exporters' User-Agents (TestTracesAsTheSDKExporter and
// TestMetricsAsTheSDKExporter compare them).
const (
	traceUserAgent  = "OTel OTLP Exporter Go/1.47.0"
	metricUserAgent = "OTel Go OTLP over HTTP/protobuf metrics exporter/1.43.0"
)

func newClient(cfg Config, userAgent, rejected string) (*client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp: endpoint %q: want an http or https URL", cfg.Endpoint)
	}
	if u.Scheme == "http" && cfg.TLS != nil {
		return nil, errors.New("insecure HTTP endpoint cannot use TLS client configuration")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       cfg.TLS,
	}
	return &client{cfg: cfg, where: redact(u), rejected: rejected, userAgent: userAgent, http: &http.Client{Transport: tr, Timeout: cfg.Timeout}, stop: make(chan struct{}), closed: make(chan struct{})}, nil
}

// redact is the endpoint u as errors, which hrns prints, name it: a
// password in it is masked and its query left out (a collector's token
// may be given either way; the SDK's errors printed both).
func redact(u *url.URL) string {
	r := *u
	r.RawQuery, r.ForceQuery, r.Fragment, r.RawFragment = "", false, "", ""
	return r.Redacted()
}

// retryable is a failure worth another attempt, after at least throttle.
type retryable struct {
	err      error
	throttle time.Duration
}

func (e retryable) Error() string { return e.err.Error() }
func (e retryable) Unwrap() error { return e.err }

// Retries: as the SDK's exporters' defaults (variables for the tests).
var (
	retryInitial    = 5 * time.Second
	retryMax        = 30 * time.Second
	retryMaxElapsed = time.Minute
)

// post sends body, retrying what is retryable.
func (c *client) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if c.cfg.Gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		if _, err := w.Write(body); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		body = z.Bytes()
	}
	start := time.Now()
	interval := retryInitial
	for {
		err := c.postOnce(ctx, body)
		if err == nil {
			return nil
		}
		var r retryable
		if !errors.As(err, &r) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		elapsed := time.Since(start)
		if elapsed > retryMaxElapsed {
			return fmt.Errorf("max retry time elapsed: %w", err)
		}
		// interval ± 50 %, as the SDK's back-off.
		backoff := time.Duration(float64(interval) * (0.5 + rand.Float64()))
		interval = min(interval*3/2, retryMax)
		if elapsed+r.throttle > retryMaxElapsed {
			return fmt.Errorf("max retry time would elapse: %w", err)
		}
		t := time.NewTimer(max(r.throttle, backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

func (c *client) postOnce(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", c.userAgent)
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = c.where // net/http's has the query
		}
		if ue != nil && ue.Temporary() {
			return retryable{err: err}
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return c.success(resp)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := printable(strings.TrimSpace(string(b)))
	if msg == "" {
		msg = "(empty)"
	}
	bodyErr := fmt.Errorf("body: %s", msg)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		var throttle time.Duration
		if s, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil && s > 0 {
			throttle = time.Duration(min(s, int64(retryMaxElapsed/time.Second))) * time.Second
		}
		return retryable{err: fmt.Errorf("failed to send to %s: %s (%w)", c.where, resp.Status, bodyErr), throttle: throttle}
	}
	return fmt.Errorf("failed to send to %s: %s (%w)", c.where, resp.Status, bodyErr)
}

// A PartialSuccess is a collector's answer that it took the export but
// rejected some of it, as the SDK's exporters report it.
type PartialSuccess struct {
	ErrorMessage  string
	RejectedItems int64
	RejectedKind  string // "spans" or "metric data points"
}

func (ps *PartialSuccess) Error() string {
	msg := ps.ErrorMessage
	if msg == "" {
		msg = "empty message"
	}
	return fmt.Sprintf("OTLP partial success: %s (%d %s rejected)", msg, ps.RejectedItems, ps.RejectedKind)
}

// success reads a 2xx answer: at most maxDrain bytes, as the SDK's
// exporters (a longer one is an error), and the partial success of a
// protobuf one.
func (c *client) success(resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain+1))
	if err != nil {
		return err
	}
	if len(b) > maxDrain {
		return fmt.Errorf("response body too large: exceeded %d bytes", maxDrain)
	}
	if len(b) == 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		return nil
	}
	n, msg, err := partialSuccess(b)
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", c.where, err)
	}
	if n == 0 && msg == "" {
		return nil
	}
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody] + "…"
	}
	return &PartialSuccess{ErrorMessage: printable(msg), RejectedItems: n, RejectedKind: c.rejected}
}

// printable is a collector's text as an error quotes it, which hrns
// prints to a terminal: valid UTF-8, control characters (escape
// sequences, newlines) written as Go escapes ("\x1b", "\n"), so that a
// collector's answer cannot move the cursor, retitle the terminal or
// forge lines of hrns's output.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\ufffd")
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *client) shutdown(ctx context.Context) error {
	c.once.Do(func() {
		close(c.closed)
		close(c.stop)
		c.http.CloseIdleConnections()
	})
	return ctx.Err()
}

func (c *client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// TraceExporter is an sdktrace.SpanExporter.
type TraceExporter struct{ c *client }

var _ sdktrace.SpanExporter = (*TraceExporter)(nil)

// NewTraceExporter returns an exporter of spans to cfg.Endpoint.
func NewTraceExporter(cfg Config) (*TraceExporter, error) {
	c, err := newClient(cfg, traceUserAgent, "spans")
	if err != nil {
		return nil, err
	}
	return &TraceExporter{c}, nil
}

// ExportSpans posts spans in one request.
func (e *TraceExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	body := appendTraceRequest(nil, spans)
	if len(body) == 0 {
		return nil
	}
	if e.c.isClosed() {
		return fmt.Errorf("traces export: %w", errShutdown)
	}
	if err := e.c.post(ctx, body); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown stops the exporter, cancelling an export in flight.
func (e *TraceExporter) Shutdown(ctx context.Context) error { return e.c.shutdown(ctx) }

// MetricExporter is an sdkmetric.Exporter, with the SDK's default
// temporality (cumulative) and aggregations.
type MetricExporter struct{ c *client }

var _ sdkmetric.Exporter = (*MetricExporter)(nil)

// NewMetricExporter returns an exporter of metrics to cfg.Endpoint.
func NewMetricExporter(cfg Config) (*MetricExporter, error) {
	c, err := newClient(cfg, metricUserAgent, "metric data points")
	if err != nil {
		return nil, err
	}
	return &MetricExporter{c}, nil
}

// Temporality is the SDK's default.
func (e *MetricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

// Aggregation is the SDK's default.
func (e *MetricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

var errShutdown = errors.New("exporter is shutdown")

// Export posts rm in one request: what can be encoded of it, when a
// metric cannot.
func (e *MetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if e.c.isClosed() {
		return errShutdown
	}
	body, err := appendMetricsRequest(nil, rm)
	if upErr := e.c.post(ctx, body); upErr != nil {
		if err == nil {
			return fmt.Errorf("failed to upload metrics: %w", upErr)
		}
		return fmt.Errorf("failed to upload incomplete metrics (%w): %w", err, upErr)
	}
	return err
}

// ForceFlush has nothing to flush: every Export is sent at once.
func (e *MetricExporter) ForceFlush(ctx context.Context) error { return ctx.Err() }

// Shutdown stops the exporter; later exports fail.
func (e *MetricExporter) Shutdown(ctx context.Context) error { return e.c.shutdown(ctx) }
