package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/internal/otlp"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	hotel "github.com/hrns-dev/hrns/otel"
	"github.com/hrns-dev/hrns/responses"
)

// telemetryFlushTimeout bounds the export of what is left when the
// command ends.
const telemetryFlushTimeout = 5 * time.Second

// A telemetry is the OpenTelemetry setup of a command: the observer its
// runs report to, nil when nothing is exported, and what flushes it.
type telemetry struct {
	observer loop.Observer
	shutdown []func(context.Context) error
}

// otlpSignal is the configuration of one OTLP exporter.
type otlpSignal struct {
	endpoint    string // the full URL, path included; empty: not exported
	headers     map[string]string
	timeout     time.Duration // 0: the exporter's default
	compression string        // "", "gzip" or "none"
}

// setupTelemetry sets up OTLP exporters over HTTP (protobuf, by
// internal/otlp, which links neither gRPC nor the protobuf runtime) as the
// standard OTEL_* variables of getenv say: none unless an endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT, or _TRACES_ENDPOINT, _METRICS_ENDPOINT),
// and none when OTEL_SDK_DISABLED is true. Without exporters it starts
// nothing and returns a telemetry without an observer. provider names the
// model's provider in gen_ai.provider.name; errw receives export errors.
func setupTelemetry(ctx context.Context, getenv func(string) string, provider string, errw io.Writer) (*telemetry, error) {
	t := &telemetry{}
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); strings.EqualFold(v, "true") {
		return t, nil
	}
	traces, err := otlpConfig(getenv, "TRACES", "/v1/traces")
	if err != nil {
		return nil, err
	}
	metrics, err := otlpConfig(getenv, "METRICS", "/v1/metrics")
	if err != nil {
		return nil, err
	}
	if traces.endpoint == "" && metrics.endpoint == "" {
		return t, nil
	}
	interval := 60 * time.Second
	if v := strings.TrimSpace(getenv("OTEL_METRIC_EXPORT_INTERVAL")); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, usagef("OTEL_METRIC_EXPORT_INTERVAL=%q: want a positive number of milliseconds", v)
		}
		interval = time.Duration(ms) * time.Millisecond
	}
	res, err := telemetryResource(getenv)
	if err != nil {
		return nil, err
	}
	opts := &hotel.Options{Provider: provider}
	if traces.endpoint != "" {
		cfg, err := traces.exporterConfig(getenv, "TRACES")
		if err != nil {
			return nil, err
		}
		exp, err := otlp.NewTraceExporter(cfg)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.shutdown = append(t.shutdown, tp.Shutdown)
		opts.TracerProvider = tp
	} else {
		opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	if metrics.endpoint != "" {
		cfg, err := metrics.exporterConfig(getenv, "METRICS")
		if err != nil {
			t.close(ctx, errw)
			return nil, err
		}
		exp, err := otlp.NewMetricExporter(cfg)
		if err != nil {
			t.close(ctx, errw)
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))), sdkmetric.WithResource(res))
		t.shutdown = append(t.shutdown, mp.Shutdown)
		opts.MeterProvider = mp
	} else {
		opts.MeterProvider = sdkmetric.NewMeterProvider()
	}
	// Export failures are reported, not fatal: the run goes on.
	otelapi.SetErrorHandler(otelapi.ErrorHandlerFunc(func(err error) {
		fmt.Fprintf(errw, "hrns: telemetry: %v\n", err)
	}))
	obs, err := hotel.New(opts)
	if err != nil {
		t.close(ctx, errw)
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	t.observer = obs
	return t, nil
}

// close flushes and stops the exporters, waiting at most
// telemetryFlushTimeout; a failure is reported on errw.
func (t *telemetry) close(ctx context.Context, errw io.Writer) {
	if t == nil || len(t.shutdown) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
	defer cancel()
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	t.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(errw, "hrns: telemetry: %v\n", err)
	}
}

// exporterConfig is the exporter's configuration of the signal, with
// the TLS client configuration of its OTEL_EXPORTER_OTLP_*CERTIFICATE and
// _CLIENT_KEY variables.
func (c otlpSignal) exporterConfig(getenv func(string) string, signal string) (otlp.Config, error) {
	tc, err := otlp.TLSConfig(getenv, signal)
	if err != nil {
		return otlp.Config{}, usagef("%v", err)
	}
	return otlp.Config{Endpoint: c.endpoint, Headers: c.headers, Timeout: c.timeout, Gzip: c.compression == "gzip", TLS: tc}, nil
}

// otlpConfig reads the configuration of one signal ("TRACES" or
// "METRICS"): the signal's own variable, else the general one.
func otlpConfig(getenv func(string) string, signal, path string) (otlpSignal, error) {
	var c otlpSignal
	get := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_" + name)); v != "" {
			return v, "OTEL_EXPORTER_OTLP_" + signal + "_" + name
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	switch v := strings.TrimSpace(getenv("OTEL_" + signal + "_EXPORTER")); v {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, usagef("OTEL_%s_EXPORTER=%q: hrns exports with otlp, or none", signal, v)
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT")); v != "" {
		if _, err := otlpURL("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT", v); err != nil {
			return c, err
		}
		c.endpoint = v // a signal's endpoint is used as it is
	} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		u, err := otlpURL("OTEL_EXPORTER_OTLP_ENDPOINT", v)
		if err != nil {
			return c, err
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + path
		c.endpoint = u.String()
	}
	if c.endpoint == "" {
		return c, nil
	}
	if v, name := get("PROTOCOL"); v != "" && v != "http/protobuf" {
		return c, usagef("%s=%q: hrns exports OTLP over http/protobuf only", name, v)
	}
	var err error
	c.headers = map[string]string{}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_HEADERS")); v != "" {
		if err = parseOTLPHeaders("OTEL_EXPORTER_OTLP_HEADERS", v, c.headers); err != nil {
			return c, err
		}
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_HEADERS")); v != "" {
		if err = parseOTLPHeaders("OTEL_EXPORTER_OTLP_"+signal+"_HEADERS", v, c.headers); err != nil {
			return c, err
		}
	}
	if v, name := get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return c, usagef("%s=%q: want a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := get("COMPRESSION"); v {
	case "", "none", "gzip":
		c.compression = v
	default:
		return c, usagef("%s=%q: want gzip or none", name, v)
	}
	return c, nil
}

// otlpURL checks an endpoint variable: an http or https URL.
func otlpURL(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("%s: want an http:// or https:// URL, such as http://localhost:4318", name)
	}
	return u, nil
}

// parseOTLPHeaders adds the headers of an OTEL_EXPORTER_OTLP_*HEADERS
// variable (key=value pairs separated by commas, values URL-encoded) to
// h. Errors never quote the value: it may hold a secret.
func parseOTLPHeaders(name, v string, h map[string]string) error {
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !httpguts.ValidHeaderFieldName(k) {
			return usagef("%s: entry %d is not key=value", name, i+1)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil || !httpguts.ValidHeaderFieldValue(dec) {
			return usagef("%s: the value of %s is not a valid URL-encoded header value", name, k)
		}
		h[k] = dec
	}
	return nil
}

// telemetryResource describes this process: service.name from
// OTEL_SERVICE_NAME (else OTEL_RESOURCE_ATTRIBUTES, else "hrns") and the
// attributes of OTEL_RESOURCE_ATTRIBUTES.
func telemetryResource(getenv func(string) string) (*resource.Resource, error) {
	attrs := map[string]string{}
	if v := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); v != "" {
		if err := parseOTLPHeaders("OTEL_RESOURCE_ATTRIBUTES", v, attrs); err != nil {
			return nil, err
		}
	}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		attrs["service.name"] = v
	}
	if attrs["service.name"] == "" {
		attrs["service.name"] = "hrns"
	}
	kv := make([]attribute.KeyValue, 0, len(attrs)+2)
	for k, v := range attrs {
		kv = append(kv, attribute.String(k, v))
	}
	kv = append(kv, attribute.String("telemetry.sdk.language", "go"), attribute.String("telemetry.sdk.name", "opentelemetry"))
	return resource.NewSchemaless(kv...), nil
}

// providerName is gen_ai.provider.name for a model.
func providerName(m llm.Model) string {
	switch m.(type) {
	case *openai.Client, *responses.Client:
		return "openai"
	case *anthropic.Client:
		return "anthropic"
	}
	return ""
}
