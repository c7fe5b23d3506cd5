// Package otel traces and measures agent runs with OpenTelemetry, following
// the OpenTelemetry semantic conventions for generative AI (gen_ai.*).
//
// [New] returns a [loop.Observer]; set it in [loop.Options.Observer] (or
// session.Options.Observer) and each run gives:
//
//   - an invoke_agent span per run (named "invoke_agent NAME" for a named
//     agent or a sub-agent), with the run's token usage;
//   - a chat span per model request ("chat MODEL"), with the requested and
//     answering model, the finish reason, input, output and cached tokens,
//     the retries (and a retry event for each) and the error that ended it;
//   - an execute_tool span per tool call ("execute_tool NAME"), with the
//     tool's name, the call's ID and its error type; a sub-agent's run is a
//     child of its tool call's span.
//
// A run resumed from a [loop.Suspension] continues the trace of the run that
// suspended ([loop.Suspension.TraceParent]): its span links to the span of
// the suspended run, and is its child unless the resuming context already
// has a span (a sub-agent resumed inside its parent's tool call, or a server
// request), which it then is a child of.
//
// Metrics: gen_ai.client.token.usage and gen_ai.client.operation.duration
// (per model request), gen_ai.execute_tool.duration (per tool call),
// gen_ai.invoke_agent.duration (per run) and hrns.model.retries; failures
// carry error.type.
//
// Message contents, tool arguments and results are never recorded: the loop
// does not give them to observers.
//
// Nothing is exported unless the program configures OpenTelemetry: with nil
// providers the observer uses the global ones, which record nothing until
// the program sets them. The hrns command sets up OTLP exporters from the
// standard OTEL_* environment variables (see docs/observability.md).
package otel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/hrns-dev/hrns/otel"

// Attribute keys, from the GenAI semantic conventions, and hrns's own.
const (
	keyOperation        = attribute.Key("gen_ai.operation.name")
	keyProvider         = attribute.Key("gen_ai.provider.name")
	keyAgentName        = attribute.Key("gen_ai.agent.name")
	keyRequestModel     = attribute.Key("gen_ai.request.model")
	keyResponseModel    = attribute.Key("gen_ai.response.model")
	keyResponseID       = attribute.Key("gen_ai.response.id")
	keyFinishReasons    = attribute.Key("gen_ai.response.finish_reasons")
	keyInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	keyCacheReadTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	keyCacheWriteTokens = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	keyReasoningTokens  = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	keyTokenType        = attribute.Key("gen_ai.token.type")
	keyToolName         = attribute.Key("gen_ai.tool.name")
	keyToolCallID       = attribute.Key("gen_ai.tool.call.id")
	keyToolType         = attribute.Key("gen_ai.tool.type")
	keyToolDescription  = attribute.Key("gen_ai.tool.description")
	keyErrorType        = attribute.Key("error.type")

	keyDepth           = attribute.Key("hrns.agent.depth")
	keyStatus          = attribute.Key("hrns.run.status")
	keyResumed         = attribute.Key("hrns.run.resumed")
	keyTurn            = attribute.Key("hrns.turn")
	keyFinal           = attribute.Key("hrns.turn.final")
	keyRetries         = attribute.Key("hrns.retries")
	keyRetryAttempt    = attribute.Key("hrns.retry.attempt")
	keyRetryDelay      = attribute.Key("hrns.retry.delay_s")
	keyPending         = attribute.Key("hrns.tool.pending")
	keyCompactReason   = attribute.Key("hrns.compaction.reason")
	keyCompactStrategy = attribute.Key("hrns.compaction.strategy")
	keyTokensBefore    = attribute.Key("hrns.compaction.tokens_before")
	keyTokensAfter     = attribute.Key("hrns.compaction.tokens_after")
	keyMessagesBefore  = attribute.Key("hrns.compaction.messages_before")
	keyMessagesAfter   = attribute.Key("hrns.compaction.messages_after")
)

// Operation names (gen_ai.operation.name).
const (
	opInvokeAgent = "invoke_agent"
	opChat        = "chat"
	opExecuteTool = "execute_tool"
)

// Options configure an [Observer].
type Options struct {
	// TracerProvider makes the spans; nil means the global one
	// (go.opentelemetry.io/otel.GetTracerProvider), which records
	// nothing unless the program set one.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; nil means the global one.
	MeterProvider metric.MeterProvider
	// Provider is gen_ai.provider.name: "openai", "anthropic"... Empty
	// leaves it out.
	Provider string
	// AgentName is gen_ai.agent.name of top-level runs; empty leaves it
	// out. Sub-agents are named by their agent tool.
	AgentName string
}

// An Observer records runs as OpenTelemetry spans and metrics. It
// implements [loop.Observer] and is safe for concurrent use by many runs.
type Observer struct {
	tracer   trace.Tracer
	provider string
	agent    string

	tokens     metric.Int64Histogram
	opDuration metric.Float64Histogram
	toolDur    metric.Float64Histogram
	agentDur   metric.Float64Histogram
	retries    metric.Int64Counter
}

var _ loop.Observer = (*Observer)(nil)

// Bucket boundaries the conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// New returns an observer; a nil opts means the defaults. It fails only if
// the meter provider refuses an instrument.
func New(opts *Options) (*Observer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otelapi.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otelapi.GetMeterProvider()
	}
	meter := o.MeterProvider.Meter(ScopeName)
	ob := &Observer{
		tracer:   o.TracerProvider.Tracer(ScopeName),
		provider: o.Provider,
		agent:    o.AgentName,
	}
	var errs [5]error
	ob.tokens, errs[0] = meter.Int64Histogram("gen_ai.client.token.usage",
		metric.WithUnit("{token}"), metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	ob.opDuration, errs[1] = meter.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithUnit("s"), metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ob.toolDur, errs[2] = meter.Float64Histogram("gen_ai.execute_tool.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of tool executions."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ob.agentDur, errs[3] = meter.Float64Histogram("gen_ai.invoke_agent.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of agent runs."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	ob.retries, errs[4] = meter.Int64Counter("hrns.model.retries",
		metric.WithUnit("{retry}"), metric.WithDescription("Model requests sent again after a transient failure."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return ob, nil
}

// common returns the attributes every span and metric of an operation has.
func (o *Observer) common(op string, extra int) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 2+extra)
	kv = append(kv, keyOperation.String(op))
	if o.provider != "" {
		kv = append(kv, keyProvider.String(o.provider))
	}
	return kv
}

func (o *Observer) agentName(e *loop.RunEvent) string {
	if e.Agent != "" {
		return e.Agent
	}
	return o.agent
}

// RunStart starts the run's invoke_agent span.
func (o *Observer) RunStart(ctx context.Context, e loop.RunEvent) context.Context {
	name := o.agentName(&e)
	attrs := o.common(opInvokeAgent, 4)
	spanName := opInvokeAgent
	if name != "" {
		attrs = append(attrs, keyAgentName.String(name))
		spanName += " " + name
	}
	if e.Model != "" {
		attrs = append(attrs, keyRequestModel.String(e.Model))
	}
	if e.Depth > 0 {
		attrs = append(attrs, keyDepth.Int(e.Depth))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if e.Resumed {
		attrs = append(attrs, keyResumed.Bool(true))
		if sc := parseTraceParent(e.TraceParent); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			if !trace.SpanContextFromContext(ctx).IsValid() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	ctx, _ = o.tracer.Start(ctx, spanName, opts...)
	return ctx
}

// RunEnd ends the run's span and records its duration.
func (o *Observer) RunEnd(ctx context.Context, e loop.RunEvent) {
	span := trace.SpanFromContext(ctx)
	status := string(e.Status)
	if status == "" {
		status = "stopped"
	}
	span.SetAttributes(
		keyStatus.String(status),
		keyInputTokens.Int64(e.Usage.InputTokens),
		keyOutputTokens.Int64(e.Usage.OutputTokens),
	)
	attrs := o.common(opInvokeAgent, 2)
	if name := o.agentName(&e); name != "" {
		attrs = append(attrs, keyAgentName.String(name))
	}
	if e.Status == loop.StatusFailed && e.Err != nil {
		et := errorType(e.Err)
		span.SetAttributes(keyErrorType.String(et))
		span.SetStatus(codes.Error, describe(e.Err))
		attrs = append(attrs, keyErrorType.String(et))
	}
	span.End()
	o.agentDur.Record(context.WithoutCancel(ctx), e.Duration.Seconds(), metric.WithAttributes(attrs...))
}

// TurnStart starts the model request's chat span.
func (o *Observer) TurnStart(ctx context.Context, e loop.TurnEvent) context.Context {
	attrs := o.common(opChat, 3)
	spanName := opChat
	if e.Model != "" {
		attrs = append(attrs, keyRequestModel.String(e.Model))
		spanName += " " + e.Model
	}
	attrs = append(attrs, keyTurn.Int(e.Turn))
	if e.Final {
		attrs = append(attrs, keyFinal.Bool(true))
	}
	ctx, _ = o.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// TurnEnd ends the chat span and records the request's tokens and
// duration.
func (o *Observer) TurnEnd(ctx context.Context, e loop.TurnEvent) {
	span := trace.SpanFromContext(ctx)
	mattrs := o.common(opChat, 3)
	if e.Model != "" {
		mattrs = append(mattrs, keyRequestModel.String(e.Model))
	}
	if e.ResponseModel != "" {
		span.SetAttributes(keyResponseModel.String(e.ResponseModel))
		mattrs = append(mattrs, keyResponseModel.String(e.ResponseModel))
	}
	if e.ResponseID != "" {
		span.SetAttributes(keyResponseID.String(e.ResponseID))
	}
	if e.Retries > 0 {
		span.SetAttributes(keyRetries.Int(e.Retries))
	}
	mctx := context.WithoutCancel(ctx)
	if e.Err != nil {
		et := errorType(e.Err)
		span.SetAttributes(keyErrorType.String(et))
		if !errors.Is(e.Err, context.Canceled) {
			// A request the run gave up (its consumer left) did
			// not fail.
			span.SetStatus(codes.Error, describe(e.Err))
		}
		span.End()
		o.opDuration.Record(mctx, e.Duration.Seconds(), metric.WithAttributes(append(mattrs, keyErrorType.String(et))...))
		return
	}
	u := e.Usage
	span.SetAttributes(
		keyFinishReasons.StringSlice([]string{string(e.FinishReason)}),
		keyInputTokens.Int64(u.InputTokens),
		keyOutputTokens.Int64(u.OutputTokens),
	)
	if u.CacheReadTokens > 0 {
		span.SetAttributes(keyCacheReadTokens.Int64(u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		span.SetAttributes(keyCacheWriteTokens.Int64(u.CacheWriteTokens))
	}
	if u.ReasoningTokens > 0 {
		span.SetAttributes(keyReasoningTokens.Int64(u.ReasoningTokens))
	}
	span.End()
	o.opDuration.Record(mctx, e.Duration.Seconds(), metric.WithAttributes(mattrs...))
	o.tokens.Record(mctx, u.InputTokens, metric.WithAttributes(append(mattrs, keyTokenType.String("input"))...))
	o.tokens.Record(mctx, u.OutputTokens, metric.WithAttributes(append(mattrs, keyTokenType.String("output"))...))
}

// Retry adds a retry event to the chat span and counts it.
func (o *Observer) Retry(ctx context.Context, e loop.RetryEvent) {
	et := errorType(e.Err)
	trace.SpanFromContext(ctx).AddEvent("hrns.retry", trace.WithAttributes(
		keyRetryAttempt.Int(e.Attempt),
		keyRetryDelay.Float64(e.Delay.Seconds()),
		keyErrorType.String(et),
	))
	o.retries.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(append(o.common(opChat, 1), keyErrorType.String(et))...))
}

// ToolStart starts the call's execute_tool span.
func (o *Observer) ToolStart(ctx context.Context, e loop.ToolEvent) context.Context {
	attrs := o.common(opExecuteTool, 4)
	attrs = append(attrs, keyToolName.String(e.Name), keyToolCallID.String(e.CallID), keyToolType.String("function"))
	if e.Description != "" {
		attrs = append(attrs, keyToolDescription.String(bound(e.Description, 1024)))
	}
	ctx, _ = o.tracer.Start(ctx, opExecuteTool+" "+e.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx
}

// ToolEnd ends the call's span and records its duration.
func (o *Observer) ToolEnd(ctx context.Context, e loop.ToolEvent) {
	span := trace.SpanFromContext(ctx)
	attrs := append(o.common(opExecuteTool, 2), keyToolName.String(e.Name))
	if e.Pending != "" {
		span.SetAttributes(keyPending.String(string(e.Pending)))
	}
	if e.Err != nil {
		et := errorType(e.Err)
		span.SetAttributes(keyErrorType.String(et))
		// A tool's error message may quote what it read or ran: the
		// span says what kind of failure it was, not what it said.
		span.SetStatus(codes.Error, et)
		attrs = append(attrs, keyErrorType.String(et))
	}
	span.End()
	o.toolDur.Record(context.WithoutCancel(ctx), e.Duration.Seconds(), metric.WithAttributes(attrs...))
}

// Compaction adds a compaction event to the run's span.
func (o *Observer) Compaction(ctx context.Context, info loop.CompactionInfo) {
	trace.SpanFromContext(ctx).AddEvent("hrns.compaction", trace.WithAttributes(
		keyCompactReason.String(info.Reason),
		keyCompactStrategy.String(info.Strategy),
		keyTokensBefore.Int(info.TokensBefore),
		keyTokensAfter.Int(info.TokensAfter),
		keyMessagesBefore.Int(info.MessagesBefore),
		keyMessagesAfter.Int(info.MessagesAfter),
	))
}

// TraceParent returns the W3C traceparent of the span in ctx, or "".
func (o *Observer) TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// parseTraceParent reads a W3C traceparent, as stored in a suspension
// (which may have been tampered with: anything invalid is ignored).
func parseTraceParent(tp string) trace.SpanContext {
	if tp == "" || len(tp) > 128 {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// errorType names the class of err for error.type: a low-cardinality
// word, never the error's text.
func errorType(err error) string {
	var te *loop.ToolError
	var api *llm.APIError
	var oe *loop.OutputError
	switch {
	case errors.As(err, &te) && te.Kind != "":
		return string(te.Kind)
	case errors.Is(err, loop.ErrRetriesExhausted):
		return "retries_exhausted"
	case errors.Is(err, llm.ErrContextLength):
		return "context_length"
	case errors.Is(err, llm.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, llm.ErrAuth):
		return "auth"
	case errors.Is(err, llm.ErrOverloaded):
		return "overloaded"
	case errors.Is(err, llm.ErrBadRequest):
		return "bad_request"
	case errors.Is(err, llm.ErrUnsupported):
		return "unsupported"
	case errors.As(err, &api) && api.StatusCode != 0:
		return strconv.Itoa(api.StatusCode)
	case errors.Is(err, loop.ErrNoAnswer):
		return "no_answer"
	case errors.Is(err, loop.ErrCancelled):
		return "cancelled_by_approver"
	case errors.As(err, &oe):
		return "output_schema"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// describe is a span status description: the error's text, bounded.
func describe(err error) string { return bound(err.Error(), 512) }

// bound cuts s to at most n bytes on a rune boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimSpace(s) + "…"
}
