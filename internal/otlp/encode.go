package otlp

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The encoding follows the OTLP exporters of go.opentelemetry.io/otel
// (their internal tracetransform and transform packages) field for field:
// TestTracesAsTheSDKExporter and TestMetricsAsTheSDKExporter decode both
// with the OTLP protobuf types and compare.

// Span flags (opentelemetry.proto.trace.v1.SpanFlags).
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// appendKeyValues writes attributes as repeated KeyValue field.
func appendKeyValues(b []byte, field int, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, field, func(b []byte) []byte {
			b = appendString(b, 1, string(kv.Key))
			return appendMessage(b, 2, func(b []byte) []byte { return appendAnyValue(b, kv.Value) })
		})
	}
	return b
}

func appendSet(b []byte, field int, s attribute.Set) []byte {
	return appendKeyValues(b, field, s.ToSlice())
}

// appendAnyValue writes the fields of an AnyValue: one member of its oneof,
// written even at its zero value.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	array := func(n int, each func(b []byte, i int) []byte) []byte {
		return appendMessage(b, 5, func(b []byte) []byte {
			for i := range n {
				b = appendMessage(b, 1, func(b []byte) []byte { return each(b, i) })
			}
			return b
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		return appendVarint(appendTag(b, 2, wireVarint), boolUint(v.AsBool()))
	case attribute.INT64:
		return appendVarint(appendTag(b, 3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return appendFixed64Always(b, 4, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return appendStringAlways(b, 1, v.AsString())
	case attribute.BYTESLICE:
		return appendBytesAlways(b, 7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return array(len(s), func(b []byte, i int) []byte { return appendVarint(appendTag(b, 2, wireVarint), boolUint(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return array(len(s), func(b []byte, i int) []byte { return appendVarint(appendTag(b, 3, wireVarint), uint64(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return array(len(s), func(b []byte, i int) []byte { return appendFixed64Always(b, 4, math.Float64bits(s[i])) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return array(len(s), func(b []byte, i int) []byte { return appendStringAlways(b, 1, s[i]) })
	case attribute.SLICE:
		s := v.AsSlice()
		return array(len(s), func(b []byte, i int) []byte { return appendAnyValue(b, s[i]) })
	case attribute.MAP:
		m := v.AsMap()
		return appendMessage(b, 6, func(b []byte) []byte { return appendKeyValues(b, 1, m) })
	case attribute.EMPTY:
		return b
	default:
		return appendStringAlways(b, 1, "INVALID")
	}
}

func boolUint(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func appendResource(b []byte, field int, r *resource.Resource) []byte {
	if r == nil {
		return b
	}
	return appendMessage(b, field, func(b []byte) []byte { return appendSet(b, 1, *r.Set()) })
}

func appendScope(b []byte, field int, s instrumentation.Scope) []byte {
	return appendMessage(b, field, func(b []byte) []byte {
		b = appendString(b, 1, s.Name)
		b = appendString(b, 2, s.Version)
		return appendSet(b, 3, s.Attributes)
	})
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }

// appendTraceRequest appends an ExportTraceServiceRequest of spans: one
// ResourceSpans per resource, one ScopeSpans per scope in it, in the order
// they first appear. It appends nothing when there is no span.
func appendTraceRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		r attribute.Distinct
		s instrumentation.Scope
	}
	type resourceSpans struct {
		res    *resource.Resource
		scopes []scopeKey
	}
	var order []attribute.Distinct
	byRes := map[attribute.Distinct]*resourceSpans{}
	byScope := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		k := scopeKey{rk, s.InstrumentationScope()}
		rs := byRes[rk]
		if rs == nil {
			rs = &resourceSpans{res: s.Resource()}
			byRes[rk] = rs
			order = append(order, rk)
		}
		if _, ok := byScope[k]; !ok {
			rs.scopes = append(rs.scopes, k)
		}
		byScope[k] = append(byScope[k], s)
	}
	for _, rk := range order {
		rs := byRes[rk]
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendResource(b, 1, rs.res)
			for _, k := range rs.scopes {
				b = appendMessage(b, 2, func(b []byte) []byte {
					if k.s != (instrumentation.Scope{}) {
						b = appendScope(b, 1, k.s)
					}
					for _, s := range byScope[k] {
						b = appendMessage(b, 2, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, 3, k.s.SchemaURL)
				})
			}
			return appendString(b, 3, rs.res.SchemaURL())
		})
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, 4, psid[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendUint(b, 6, spanKind(s.SpanKind()))
	b = appendFixed64(b, 7, unixNano(s.StartTime()))
	b = appendFixed64(b, 8, unixNano(s.EndTime()))
	b = appendKeyValues(b, 9, s.Attributes())
	b = appendUint(b, 10, clampUint32(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = appendMessage(b, 11, func(b []byte) []byte {
			b = appendFixed64(b, 1, unixNano(e.Time))
			b = appendString(b, 2, e.Name)
			b = appendKeyValues(b, 3, e.Attributes)
			return appendUint(b, 4, clampUint32(e.DroppedAttributeCount))
		})
	}
	b = appendUint(b, 12, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, 13, func(b []byte) []byte {
			tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, 1, tid[:])
			b = appendBytes(b, 2, sid[:])
			b = appendKeyValues(b, 4, l.Attributes)
			b = appendUint(b, 5, clampUint32(l.DroppedAttributeCount))
			return appendFixed32(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendUint(b, 14, clampUint32(s.DroppedLinks()))
	st := s.Status()
	b = appendMessage(b, 15, func(b []byte) []byte {
		b = appendString(b, 2, st.Description)
		return appendUint(b, 3, statusCode(st.Code))
	})
	return appendFixed32(b, 16, spanFlags(sc.TraceFlags(), parent))
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// spanKind is the OTLP Span.SpanKind of k.
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// statusCode is the OTLP Status.StatusCode of c: OTLP has OK before ERROR.
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

var (
	errUnknownAggregation = errors.New("unknown aggregation")
	errUnknownTemporality = errors.New("unknown temporality")
)

// appendMetricsRequest appends an ExportMetricsServiceRequest of rm. A
// metric of an unknown kind is left out and reported in the error, as the
// SDK's exporter does; the rest is still encoded.
func appendMetricsRequest(b []byte, rm *metricdata.ResourceMetrics) ([]byte, error) {
	var errs []error
	b = appendMessage(b, 1, func(b []byte) []byte {
		b = appendMessage(b, 1, func(b []byte) []byte { return appendSet(b, 1, *rm.Resource.Set()) })
		for _, sm := range rm.ScopeMetrics {
			b = appendMessage(b, 2, func(b []byte) []byte {
				b = appendScope(b, 1, sm.Scope)
				for _, m := range sm.Metrics {
					start := len(b)
					var err error
					b = appendMessage(b, 2, func(b []byte) []byte {
						var out []byte
						out, err = appendMetric(b, m)
						return out
					})
					if err != nil {
						b = b[:start]
						errs = append(errs, fmt.Errorf("invalid metric (name: %q, description: %q, unit: %q): %w", m.Name, m.Description, m.Unit, err))
					}
				}
				return appendString(b, 3, sm.Scope.SchemaURL)
			})
		}
		return appendString(b, 3, rm.Resource.SchemaURL())
	})
	return b, errors.Join(errs...)
}

func appendMetric(b []byte, m metricdata.Metrics) ([]byte, error) {
	b = appendString(b, 1, m.Name)
	b = appendString(b, 2, m.Description)
	b = appendString(b, 3, m.Unit)
	switch a := m.Data.(type) {
	case metricdata.Gauge[int64]:
		return appendMessage(b, 5, func(b []byte) []byte { return appendNumberPoints(b, a.DataPoints) }), nil
	case metricdata.Gauge[float64]:
		return appendMessage(b, 5, func(b []byte) []byte { return appendNumberPoints(b, a.DataPoints) }), nil
	case metricdata.Sum[int64]:
		return appendSum(b, a)
	case metricdata.Sum[float64]:
		return appendSum(b, a)
	case metricdata.Histogram[int64]:
		return appendHistogram(b, a)
	case metricdata.Histogram[float64]:
		return appendHistogram(b, a)
	case metricdata.ExponentialHistogram[int64]:
		return appendExpHistogram(b, a)
	case metricdata.ExponentialHistogram[float64]:
		return appendExpHistogram(b, a)
	case metricdata.Summary:
		return appendMessage(b, 11, func(b []byte) []byte { return appendSummaryPoints(b, a.DataPoints) }), nil
	}
	return b, fmt.Errorf("%w: %T", errUnknownAggregation, m.Data)
}

func temporality(t metricdata.Temporality) (uint64, error) {
	switch t {
	case metricdata.DeltaTemporality:
		return 1, nil
	case metricdata.CumulativeTemporality:
		return 2, nil
	}
	return 0, fmt.Errorf("%w: %s", errUnknownTemporality, t)
}

func appendSum[N int64 | float64](b []byte, s metricdata.Sum[N]) ([]byte, error) {
	t, err := temporality(s.Temporality)
	if err != nil {
		return b, err
	}
	return appendMessage(b, 7, func(b []byte) []byte {
		b = appendNumberPoints(b, s.DataPoints)
		b = appendUint(b, 2, t)
		return appendBool(b, 3, s.IsMonotonic)
	}), nil
}

// appendAsDouble and appendAsInt write the value of a NumberDataPoint or
// an Exemplar, a oneof of as_double and as_int (sfixed64), the one that
// applies. They come after the other fields, where the protobuf runtime
// puts a oneof (any order decodes alike; this one is byte for byte the
// runtime's).
func appendAsDouble[N int64 | float64](b []byte, field int, v N) []byte {
	if f, ok := any(v).(float64); ok {
		return appendFixed64Always(b, field, math.Float64bits(f))
	}
	return b
}

func appendAsInt[N int64 | float64](b []byte, field int, v N) []byte {
	if i, ok := any(v).(int64); ok {
		return appendFixed64Always(b, field, uint64(i))
	}
	return b
}

func appendNumberPoints[N int64 | float64](b []byte, pts []metricdata.DataPoint[N]) []byte {
	for _, p := range pts {
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendFixed64(b, 2, unixNano(p.StartTime))
			b = appendFixed64(b, 3, unixNano(p.Time))
			b = appendExemplars(b, 5, p.Exemplars)
			b = appendSet(b, 7, p.Attributes)
			b = appendAsDouble(b, 4, p.Value)
			return appendAsInt(b, 6, p.Value)
		})
	}
	return b
}

func appendExemplars[N int64 | float64](b []byte, field int, es []metricdata.Exemplar[N]) []byte {
	for _, e := range es {
		b = appendMessage(b, field, func(b []byte) []byte {
			b = appendFixed64(b, 2, unixNano(e.Time))
			b = appendBytes(b, 4, e.SpanID)
			b = appendBytes(b, 5, e.TraceID)
			b = appendKeyValues(b, 7, e.FilteredAttributes)
			b = appendAsDouble(b, 3, e.Value)
			return appendAsInt(b, 6, e.Value)
		})
	}
	return b
}

func appendHistogram[N int64 | float64](b []byte, h metricdata.Histogram[N]) ([]byte, error) {
	t, err := temporality(h.Temporality)
	if err != nil {
		return b, err
	}
	return appendMessage(b, 9, func(b []byte) []byte {
		for _, p := range h.DataPoints {
			b = appendMessage(b, 1, func(b []byte) []byte {
				b = appendFixed64(b, 2, unixNano(p.StartTime))
				b = appendFixed64(b, 3, unixNano(p.Time))
				b = appendFixed64(b, 4, p.Count)
				b = appendFixed64Always(b, 5, math.Float64bits(float64(p.Sum)))
				b = appendPackedFixed64(b, 6, len(p.BucketCounts), func(i int) uint64 { return p.BucketCounts[i] })
				b = appendPackedFixed64(b, 7, len(p.Bounds), func(i int) uint64 { return math.Float64bits(p.Bounds[i]) })
				b = appendExemplars(b, 8, p.Exemplars)
				b = appendSet(b, 9, p.Attributes)
				if v, ok := p.Min.Value(); ok {
					b = appendFixed64Always(b, 11, math.Float64bits(float64(v)))
				}
				if v, ok := p.Max.Value(); ok {
					b = appendFixed64Always(b, 12, math.Float64bits(float64(v)))
				}
				return b
			})
		}
		return appendUint(b, 2, t)
	}), nil
}

func appendExpHistogram[N int64 | float64](b []byte, h metricdata.ExponentialHistogram[N]) ([]byte, error) {
	t, err := temporality(h.Temporality)
	if err != nil {
		return b, err
	}
	buckets := func(b []byte, field int, bk metricdata.ExponentialBucket) []byte {
		return appendMessage(b, field, func(b []byte) []byte {
			b = appendSint32(b, 1, bk.Offset)
			return appendPackedVarint(b, 2, bk.Counts)
		})
	}
	return appendMessage(b, 10, func(b []byte) []byte {
		for _, p := range h.DataPoints {
			b = appendMessage(b, 1, func(b []byte) []byte {
				b = appendSet(b, 1, p.Attributes)
				b = appendFixed64(b, 2, unixNano(p.StartTime))
				b = appendFixed64(b, 3, unixNano(p.Time))
				b = appendFixed64(b, 4, p.Count)
				b = appendFixed64Always(b, 5, math.Float64bits(float64(p.Sum)))
				b = appendSint32(b, 6, p.Scale)
				b = appendFixed64(b, 7, p.ZeroCount)
				b = buckets(b, 8, p.PositiveBucket)
				b = buckets(b, 9, p.NegativeBucket)
				b = appendExemplars(b, 11, p.Exemplars)
				if v, ok := p.Min.Value(); ok {
					b = appendFixed64Always(b, 12, math.Float64bits(float64(v)))
				}
				if v, ok := p.Max.Value(); ok {
					b = appendFixed64Always(b, 13, math.Float64bits(float64(v)))
				}
				return appendDouble(b, 14, p.ZeroThreshold)
			})
		}
		return appendUint(b, 2, t)
	}), nil
}

func appendSummaryPoints(b []byte, pts []metricdata.SummaryDataPoint) []byte {
	for _, p := range pts {
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendFixed64(b, 2, unixNano(p.StartTime))
			b = appendFixed64(b, 3, unixNano(p.Time))
			b = appendFixed64(b, 4, p.Count)
			b = appendDouble(b, 5, p.Sum)
			for _, q := range p.QuantileValues {
				b = appendMessage(b, 6, func(b []byte) []byte {
					b = appendDouble(b, 1, q.Quantile)
					return appendDouble(b, 2, q.Value)
				})
			}
			return appendSet(b, 7, p.Attributes)
		})
	}
	return b
}
