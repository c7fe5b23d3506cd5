package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors that an [APIError] matches with [errors.Is], so callers can
// test for a class of failure without knowing the provider.
var (
	// ErrRateLimited: the provider asked to slow down (HTTP 429).
	ErrRateLimited = errors.New("rate limited")
	// ErrAuth: the key is missing, wrong or lacks permission (HTTP 401, 403).
	ErrAuth = errors.New("authentication failed")
	// ErrContextLength: the request does not fit the model's context window.
	ErrContextLength = errors.New("context length exceeded")
	// ErrOverloaded: the provider is overloaded or failing (HTTP 5xx, 529,
	// or an overloaded or server error inside a stream).
	ErrOverloaded = errors.New("provider overloaded")
	// ErrBadRequest: the provider rejected the request as malformed (HTTP
	// 400, 404, 422 other than a context length error).
	ErrBadRequest = errors.New("bad request")
	// ErrUnsupported: the request uses a feature this provider or endpoint
	// does not support. Providers return it before sending anything.
	ErrUnsupported = errors.New("unsupported feature")
	// ErrContentFiltered: the provider blocked the prompt or withheld the
	// answer under its content policy (Gemini's safety and other blocks,
	// Azure OpenAI's content filter). Sending the same request again does
	// not help.
	ErrContentFiltered = errors.New("content filtered")
)

// An APIError is an error reported by a provider, either as an HTTP status or
// as an error event inside a stream (StatusCode 0 then).
type APIError struct {
	// Provider names the provider, such as "openai" or "anthropic".
	Provider string
	// StatusCode is the HTTP status, or 0 for an error inside a stream.
	StatusCode int
	// Type and Code are the provider's error type and code, if any.
	Type, Code string
	// Message is the provider's human-readable message.
	Message string
	// RetryAfter is the wait the provider asked for (Retry-After or its
	// own headers), or 0.
	RetryAfter time.Duration
	// RequestID is the provider's request ID, for support tickets.
	RequestID string
}

func (e *APIError) Error() string {
	s := e.Provider
	if s == "" {
		s = "llm"
	}
	if e.StatusCode != 0 {
		s += fmt.Sprintf(": HTTP %d", e.StatusCode)
	} else {
		s += ": stream error"
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether e belongs to the class named by a sentinel of this
// package.
//
// Besides HTTP statuses it reads the error types and codes of the
// providers: OpenAI's and Anthropic's, and the canonical status names of
// Google APIs (google.rpc.Code, such as "RESOURCE_EXHAUSTED" or
// "UNAVAILABLE") in Type, which Gemini reports inside streams too.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests || e.Type == "rate_limit_error" || e.Code == "rate_limit_exceeded" ||
			e.Type == "RESOURCE_EXHAUSTED" || (e.StatusCode == 0 && e.numericCode() == http.StatusTooManyRequests)
	case ErrAuth:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden ||
			e.Type == "authentication_error" || e.Type == "permission_error" ||
			e.Type == "UNAUTHENTICATED" || e.Type == "PERMISSION_DENIED" || e.Code == "API_KEY_INVALID"
	case ErrContextLength:
		return e.Code == "context_length_exceeded" || e.Code == "string_above_max_length"
	case ErrContentFiltered:
		return e.Type == "content_filter" || e.Code == "content_filter"
	case ErrOverloaded:
		if e.StatusCode != 0 {
			return e.StatusCode >= 500
		}
		// Inside a stream only the error's type or code tells.
		return e.Type == "overloaded_error" || e.Type == "server_error" || e.Type == "api_error" ||
			e.Type == "UNAVAILABLE" || e.Type == "INTERNAL" || e.Type == "DEADLINE_EXCEEDED" || e.numericCode() >= 500
	case ErrBadRequest:
		return (e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusNotFound ||
			e.StatusCode == http.StatusUnprocessableEntity) &&
			!e.Is(ErrContextLength) && !e.Is(ErrAuth) && !e.Is(ErrContentFiltered)
	}
	return false
}

// numericCode returns Code as an HTTP status, as some servers put one
// there inside a stream, or 0.
func (e *APIError) numericCode() int {
	n, err := strconv.Atoi(e.Code)
	if err != nil || n < 100 || n > 599 {
		return 0
	}
	return n
}

// Retryable reports whether sending the same request again may succeed. An
// exhausted quota or spend limit (OpenAI's insufficient_quota, Anthropic's
// enforced_spend_limit_reached, both sent as a 429) is not: it needs a
// person to act.
func (e *APIError) Retryable() bool {
	if e.Code == "insufficient_quota" || e.Type == "insufficient_quota" || e.Code == "enforced_spend_limit_reached" {
		return false
	}
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		return true
	case e.StatusCode == 0:
		return e.Is(ErrOverloaded) || e.Is(ErrRateLimited)
	}
	return false
}

// IsRetryable reports whether err is a transient failure worth retrying:
// a retryable [APIError] (429, 408, 409, 5xx, 529, overloaded or server errors
// in a stream), a timeout, or a connection that was refused, reset or dropped
// mid-response. Cancellation of the caller's context is never retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		return apiErr.Retryable()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A per-attempt timeout; the caller's own deadline is checked by
		// the retrier before it waits.
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		// A name that does not resolve is a wrong URL, not a blip.
		return dns.IsTimeout || dns.IsTemporary
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	return false
}

// RetryAfter returns the wait a provider asked for in err, or 0.
func RetryAfter(err error) time.Duration {
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		return apiErr.RetryAfter
	}
	return 0
}

// RetryAfterLimit is the longest wait [ParseRetryAfter] returns. A provider
// that asks for longer (or for a wait too long to represent, such as
// "Retry-After: 99999999999") gets this limit, which is more than any retry
// policy should accept: the caller then refuses the wait as too long
// instead of retrying at once.
const RetryAfterLimit = 24 * time.Hour

// ParseRetryAfter reads the wait a response asks for: the standard
// Retry-After header (seconds or an HTTP date), or the retry-after-ms header
// some providers send, which wins when valid. now is used for HTTP dates.
//
// The result is never negative and never more than [RetryAfterLimit]; longer
// waits are clamped to it. It is 0 when there is no valid wait: a header that
// is absent, not a number or a date, zero, negative, NaN or infinite, or a
// date in the past.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if d, _ := parseDelay(h.Get("Retry-After-Ms"), float64(time.Millisecond)); d > 0 {
		return d
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if d, ok := parseDelay(v, float64(time.Second)); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil {
		// Sub saturates instead of overflowing.
		return min(max(t.Sub(now), 0), RetryAfterLimit)
	}
	return 0
}

// parseDelay reads v as a number of units (of unit nanoseconds each),
// bounded to [0, RetryAfterLimit]: 0 for anything but a positive number.
// ok reports whether v is a number at all. A number too large for a float64
// ("1e400") is a very long wait; "Inf" and "NaN" are not waits.
func parseDelay(v string, unit float64) (d time.Duration, ok bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if numErr, isNum := err.(*strconv.NumError); isNum && numErr.Err == strconv.ErrRange {
		err = nil // f is ±Inf for an overflow, ±0 for an underflow
	} else if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, true
	}
	if err != nil {
		return 0, false
	}
	if f <= 0 {
		return 0, true
	}
	// Compare in floating point: converting a float beyond the range of a
	// Duration to one gives an implementation-defined, often negative, value.
	if ns := f * unit; ns < float64(RetryAfterLimit) {
		return time.Duration(ns), true
	}
	return RetryAfterLimit, true
}
