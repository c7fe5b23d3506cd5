package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

func TestAPIErrorError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  llm.APIError
		want string
	}{
		{llm.APIError{Provider: "openai", StatusCode: 429, Type: "requests", Message: "slow down"}, "openai: HTTP 429 requests: slow down"},
		{llm.APIError{Provider: "anthropic", Type: "overloaded_error", Message: "Overloaded"}, "anthropic: stream error overloaded_error: Overloaded"},
		{llm.APIError{StatusCode: 500}, "llm: HTTP 500"},
		{llm.APIError{Message: "boom"}, "llm: stream error: boom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestAPIErrorIs(t *testing.T) {
	t.Parallel()
	sentinels := []struct {
		name string
		err  error
	}{
		{"RateLimited", llm.ErrRateLimited},
		{"Auth", llm.ErrAuth},
		{"ContextLength", llm.ErrContextLength},
		{"Overloaded", llm.ErrOverloaded},
		{"BadRequest", llm.ErrBadRequest},
		{"Unsupported", llm.ErrUnsupported},
		{"ContentFiltered", llm.ErrContentFiltered},
	}
	tests := []struct {
		name string
		err  *llm.APIError
		is   []string // every other sentinel must not match
	}{
		{"429", &llm.APIError{StatusCode: 429}, []string{"RateLimited"}},
		{"rate_limit_error type", &llm.APIError{Type: "rate_limit_error"}, []string{"RateLimited"}},
		{"rate_limit_exceeded code", &llm.APIError{StatusCode: 400, Code: "rate_limit_exceeded"}, []string{"RateLimited", "BadRequest"}},
		{"401", &llm.APIError{StatusCode: 401}, []string{"Auth"}},
		{"403", &llm.APIError{StatusCode: 403}, []string{"Auth"}},
		{"authentication_error", &llm.APIError{Type: "authentication_error"}, []string{"Auth"}},
		{"permission_error", &llm.APIError{Type: "permission_error"}, []string{"Auth"}},
		{"context_length_exceeded", &llm.APIError{StatusCode: 400, Code: "context_length_exceeded"}, []string{"ContextLength"}},
		{"string_above_max_length", &llm.APIError{StatusCode: 400, Code: "string_above_max_length"}, []string{"ContextLength"}},
		{"context length in stream", &llm.APIError{Code: "context_length_exceeded"}, []string{"ContextLength"}},
		{"500", &llm.APIError{StatusCode: 500}, []string{"Overloaded"}},
		{"529", &llm.APIError{StatusCode: 529, Type: "overloaded_error"}, []string{"Overloaded"}},
		{"server_error in stream", &llm.APIError{Type: "server_error"}, []string{"Overloaded"}},
		{"api_error in stream", &llm.APIError{Type: "api_error"}, []string{"Overloaded"}},
		{"400", &llm.APIError{StatusCode: 400, Type: "invalid_request_error"}, []string{"BadRequest"}},
		{"404", &llm.APIError{StatusCode: 404}, []string{"BadRequest"}},
		{"422", &llm.APIError{StatusCode: 422}, []string{"BadRequest"}},
		{"402", &llm.APIError{StatusCode: 402}, nil},
		{"unknown stream error", &llm.APIError{Type: "weird"}, nil},
		// Google's canonical statuses, over HTTP and inside a stream.
		{"RESOURCE_EXHAUSTED", &llm.APIError{StatusCode: 429, Type: "RESOURCE_EXHAUSTED"}, []string{"RateLimited"}},
		{"RESOURCE_EXHAUSTED in stream", &llm.APIError{Type: "RESOURCE_EXHAUSTED", Code: "429"}, []string{"RateLimited"}},
		{"UNAVAILABLE in stream", &llm.APIError{Type: "UNAVAILABLE"}, []string{"Overloaded"}},
		{"INTERNAL in stream", &llm.APIError{Type: "INTERNAL"}, []string{"Overloaded"}},
		{"UNAUTHENTICATED", &llm.APIError{StatusCode: 401, Type: "UNAUTHENTICATED"}, []string{"Auth"}},
		{"PERMISSION_DENIED", &llm.APIError{StatusCode: 403, Type: "PERMISSION_DENIED"}, []string{"Auth"}},
		{"API_KEY_INVALID", &llm.APIError{StatusCode: 400, Type: "INVALID_ARGUMENT", Code: "API_KEY_INVALID"}, []string{"Auth"}},
		{"INVALID_ARGUMENT", &llm.APIError{StatusCode: 400, Type: "INVALID_ARGUMENT"}, []string{"BadRequest"}},
		{"content filter in stream", &llm.APIError{Type: "content_filter", Code: "SAFETY"}, []string{"ContentFiltered"}},
		{"content_filter code over HTTP", &llm.APIError{StatusCode: 400, Code: "content_filter"}, []string{"ContentFiltered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range sentinels {
				want := false
				for _, n := range tt.is {
					want = want || n == s.name
				}
				if got := errors.Is(tt.err, s.err); got != want {
					t.Errorf("errors.Is(%v, Err%s) = %v, want %v", tt.err, s.name, got, want)
				}
				wrapped := fmt.Errorf("attempt 2: %w", tt.err)
				if got := errors.Is(wrapped, s.err); got != want {
					t.Errorf("errors.Is(wrapped, Err%s) = %v, want %v", s.name, got, want)
				}
			}
			if errors.Is(tt.err, io.EOF) {
				t.Errorf("errors.Is(%v, io.EOF) = true", tt.err)
			}
		})
	}
}

func TestAPIErrorRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *llm.APIError
		want bool
	}{
		{&llm.APIError{StatusCode: 408}, true},
		{&llm.APIError{StatusCode: 409}, true},
		{&llm.APIError{StatusCode: 429}, true},
		{&llm.APIError{StatusCode: 500}, true},
		{&llm.APIError{StatusCode: 502}, true},
		{&llm.APIError{StatusCode: 503}, true},
		{&llm.APIError{StatusCode: 529}, true},
		{&llm.APIError{StatusCode: 400}, false},
		{&llm.APIError{StatusCode: 401}, false},
		{&llm.APIError{StatusCode: 403}, false},
		{&llm.APIError{StatusCode: 404}, false},
		{&llm.APIError{StatusCode: 413}, false},
		{&llm.APIError{StatusCode: 400, Code: "context_length_exceeded"}, false},
		{&llm.APIError{Type: "overloaded_error"}, true},
		{&llm.APIError{Type: "server_error"}, true},
		{&llm.APIError{Type: "rate_limit_error"}, true},
		{&llm.APIError{Type: "invalid_request_error"}, false},
		{&llm.APIError{}, false},
		{&llm.APIError{StatusCode: 429, Code: "insufficient_quota"}, false},
		{&llm.APIError{StatusCode: 429, Code: "enforced_spend_limit_reached"}, false},
		{&llm.APIError{Code: "502"}, true},
		{&llm.APIError{Code: "429"}, true},
		{&llm.APIError{Code: "400"}, false},
		{&llm.APIError{StatusCode: 404, Type: "api_error"}, false},
	}
	for _, tt := range tests {
		if got := tt.err.Retryable(); got != tt.want {
			t.Errorf("%+v.Retryable() = %v, want %v", *tt.err, got, tt.want)
		}
	}
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// closedPortError dials a loopback port nothing listens on.
func closedPortError(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
		t.Skip("a listener appeared on a closed port")
	}
	return err
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("invalid argument"), false},
		{"canceled", context.Canceled, false},
		{"wrapped canceled", fmt.Errorf("stream: %w", context.Canceled), false},
		{"canceled with a net error", fmt.Errorf("%w: %w", context.Canceled, opErr), false},
		{"deadline", context.DeadlineExceeded, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", fmt.Errorf("reading stream: %w", io.ErrUnexpectedEOF), true},
		{"ECONNRESET", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"ECONNREFUSED", syscall.ECONNREFUSED, true},
		{"EPIPE", syscall.EPIPE, true},
		{"ECONNABORTED", syscall.ECONNABORTED, true},
		{"OpError", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}, true},
		{"url.Error around OpError", &url.Error{Op: "Post", URL: "http://x", Err: opErr}, true},
		{"timeout", timeoutError{}, true},
		{"os deadline", os.ErrDeadlineExceeded, true},
		{"429", &llm.APIError{StatusCode: 429}, true},
		{"wrapped 503", fmt.Errorf("openai: %w", &llm.APIError{StatusCode: 503}), true},
		{"400", &llm.APIError{StatusCode: 400}, false},
		{"401", &llm.APIError{StatusCode: 401}, false},
		{"stream server_error", &llm.APIError{Type: "server_error"}, true},
		{"stream invalid_request_error", &llm.APIError{Type: "invalid_request_error"}, false},
		{"unsupported", fmt.Errorf("openai: %w", llm.ErrUnsupported), false},
		{"no response", llm.ErrNoResponse, false},
		{"no such host", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}}, false},
		{"DNS timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, true},
	}
	for _, tt := range tests {
		if got := llm.IsRetryable(tt.err); got != tt.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
	if err := closedPortError(t); !llm.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = false for a refused connection", err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want time.Duration
	}{
		{nil, 0},
		{errors.New("x"), 0},
		{&llm.APIError{StatusCode: 429, RetryAfter: 3 * time.Second}, 3 * time.Second},
		{fmt.Errorf("try 1: %w", &llm.APIError{RetryAfter: time.Minute}), time.Minute},
		{&llm.APIError{StatusCode: 500}, 0},
	}
	for _, tt := range tests {
		if got := llm.RetryAfter(tt.err); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "20"}, 20 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"HTTP date", map[string]string{"Retry-After": date(90 * time.Second)}, 90 * time.Second},
		{"RFC 850 date", map[string]string{"Retry-After": now.Add(time.Hour).Format(time.RFC850)}, time.Hour},
		{"past date", map[string]string{"Retry-After": date(-time.Minute)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"milliseconds", map[string]string{"Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "3"}, 250 * time.Millisecond},
		{"zero milliseconds fall back", map[string]string{"Retry-After-Ms": "0", "Retry-After": "3"}, 3 * time.Second},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "3"}, 3 * time.Second},
		{"lowercase names", map[string]string{"retry-after-ms": "10"}, 10 * time.Millisecond},
		{"surrounding space", map[string]string{"Retry-After": " 7 "}, 7 * time.Second},

		// Waits too long for a Duration are clamped, not overflowed into a
		// negative one (which was retried at once).
		{"huge seconds", map[string]string{"Retry-After": "99999999999"}, llm.RetryAfterLimit},
		{"1e300 seconds", map[string]string{"Retry-After": "1e300"}, llm.RetryAfterLimit},
		{"seconds beyond float64", map[string]string{"Retry-After": "1e400"}, llm.RetryAfterLimit},
		{"just over the limit", map[string]string{"Retry-After": "86401"}, llm.RetryAfterLimit},
		{"at the limit", map[string]string{"Retry-After": "86400"}, llm.RetryAfterLimit},
		{"under the limit", map[string]string{"Retry-After": "86399"}, llm.RetryAfterLimit - time.Second},
		{"huge milliseconds", map[string]string{"Retry-After-Ms": "1e30"}, llm.RetryAfterLimit},
		{"huge milliseconds win", map[string]string{"Retry-After-Ms": "1e30", "Retry-After": "3"}, llm.RetryAfterLimit},
		{"far date", map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, llm.RetryAfterLimit},
		{"far past date", map[string]string{"Retry-After": "Mon, 01 Jan 0001 00:00:00 GMT"}, 0},

		// Not numbers of seconds: absent.
		{"Inf", map[string]string{"Retry-After": "Inf"}, 0},
		{"+Inf", map[string]string{"Retry-After": "+Inf"}, 0},
		{"-Inf", map[string]string{"Retry-After": "-Inf"}, 0},
		{"infinity", map[string]string{"Retry-After": "infinity"}, 0},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0},
		{"minus one", map[string]string{"Retry-After": "-1"}, 0},
		{"huge negative", map[string]string{"Retry-After": "-1e400"}, 0},
		{"underflow", map[string]string{"Retry-After": "1e-400"}, 0},
		{"NaN milliseconds fall back", map[string]string{"Retry-After-Ms": "NaN", "Retry-After": "3"}, 3 * time.Second},
		{"Inf milliseconds fall back", map[string]string{"Retry-After-Ms": "Inf", "Retry-After": "3"}, 3 * time.Second},
		{"negative milliseconds fall back", map[string]string{"Retry-After-Ms": "-1", "Retry-After": "3"}, 3 * time.Second},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := llm.ParseRetryAfter(h, now); got != tt.want {
			t.Errorf("%s: ParseRetryAfter(%v) = %v, want %v", tt.name, h, got, tt.want)
		}
	}
}

// FuzzParseRetryAfter checks that any header values give a wait in
// [0, RetryAfterLimit], without panicking, and that the wait grows with the
// number of seconds asked for.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range [][2]string{
		{"20", ""}, {"1.5", ""}, {"-1", ""}, {"99999999999", "1"}, {"1e300", "1e301"},
		{"1e400", "1e300"}, {"Inf", "1"}, {"NaN", "0"}, {"0x1p-2", "86400"},
		{"Fri, 31 Dec 9999 23:59:59 GMT", "1"}, {"Sun, 01 Jun 2025 12:00:30 GMT", "30"},
	} {
		f.Add(s[0], s[1], "")
		f.Add(s[0], s[1], "1e30")
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	parse := func(name, v string) time.Duration {
		return llm.ParseRetryAfter(http.Header{name: {v}}, now)
	}
	f.Fuzz(func(t *testing.T, a, b, ms string) {
		for _, name := range []string{"Retry-After", "Retry-After-Ms"} {
			for _, v := range []string{a, b} {
				if d := parse(name, v); d < 0 || d > llm.RetryAfterLimit {
					t.Fatalf("%s: %q gives %v, outside [0, %v]", name, v, d, llm.RetryAfterLimit)
				}
			}
			// Monotone: more seconds never mean a shorter wait.
			x, errA := strconv.ParseFloat(strings.TrimSpace(a), 64)
			y, errB := strconv.ParseFloat(strings.TrimSpace(b), 64)
			if errA == nil && errB == nil && !math.IsInf(x, 0) && !math.IsInf(y, 0) && x <= y {
				if da, db := parse(name, a), parse(name, b); da > db {
					t.Fatalf("%s: %q gives %v, more than %v for %q", name, a, da, db, b)
				}
			}
		}
		h := http.Header{"Retry-After": {a}, "Retry-After-Ms": {ms}}
		if d := llm.ParseRetryAfter(h, now); d < 0 || d > llm.RetryAfterLimit {
			t.Fatalf("%v gives %v, outside [0, %v]", h, d, llm.RetryAfterLimit)
		}
	})
}
