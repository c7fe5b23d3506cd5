package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

// sentinels are the error classes of package llm.
var sentinels = map[string]error{
	"ErrRateLimited":   llm.ErrRateLimited,
	"ErrAuth":          llm.ErrAuth,
	"ErrContextLength": llm.ErrContextLength,
	"ErrOverloaded":    llm.ErrOverloaded,
	"ErrBadRequest":    llm.ErrBadRequest,
	"ErrUnsupported":   llm.ErrUnsupported,
}

// checkClasses checks that err matches exactly the sentinels named in is.
func checkClasses(t *testing.T, err error, is []string) {
	t.Helper()
	for name, s := range sentinels {
		want := false
		for _, n := range is {
			want = want || n == name
		}
		if got := errors.Is(err, s); got != want {
			t.Errorf("errors.Is(err, llm.%s) = %v, want %v", name, got, want)
		}
	}
}

func TestRecordedHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want *llm.APIError
		is   []string
	}{
		{
			file: "rate_limit.http",
			want: &llm.APIError{
				Provider: "anthropic", StatusCode: 429, Type: "rate_limit_error",
				Message:    "This request would exceed the rate limit for your organization (3a1b7c2d-0e4f-4a5b-8c9d-1e2f3a4b5c6d) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
				RetryAfter: 17 * time.Second,
				RequestID:  "req_011CSHoEeqs5C35K2UUqR7Fy",
			},
			is: []string{"ErrRateLimited"},
		},
		{
			file: "overloaded.http",
			want: &llm.APIError{
				Provider: "anthropic", StatusCode: 529, Type: "overloaded_error", Message: "Overloaded",
				RetryAfter: 3 * time.Second,
				RequestID:  "req_011CSHp3MvYkRw8dZ2xN4LtQ",
			},
			is: []string{"ErrOverloaded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			srv := serveRecorded(t, tt.file)
			_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok {
				t.Fatalf("error %v (%T) is not an *llm.APIError", err, err)
			}
			if diff := cmp.Diff(tt.want, apiErr); diff != "" {
				t.Errorf("APIError mismatch (-want +got):\n%s", diff)
			}
			checkClasses(t, err, tt.is)
			if !llm.IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = false, want true", err)
			}
			if got := llm.RetryAfter(err); got != tt.want.RetryAfter {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want.RetryAfter)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	longBody := strings.Repeat("é", 400) // 800 bytes, cut on a rune boundary
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		want      llm.APIError // Provider and StatusCode are filled in
		is        []string     // the sentinels err matches; it matches no other
		retryable bool
	}{
		{
			name:   "400 invalid request",
			status: 400,
			header: map[string]string{"Request-Id": "req_400"},
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.type: Expected ` + "`thinking`" + `, but found ` + "`text`" + `."},"request_id":"req_400"}`,
			want:   llm.APIError{Type: "invalid_request_error", Message: "messages.1.content.0.type: Expected `thinking`, but found `text`.", RequestID: "req_400"},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:   "400 prompt too long",
			status: 400,
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215732 tokens > 200000 maximum"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "prompt is too long: 215732 tokens > 200000 maximum"},
			is:     []string{"ErrContextLength"},
		},
		{
			name:   "400 input and max_tokens exceed the context",
			status: 400,
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 195000 + 8192 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` and try again"},
			is:     []string{"ErrContextLength"},
		},
		{
			name:   "401",
			status: 401,
			body:   `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_body_only"}`,
			want:   llm.APIError{Type: "authentication_error", Message: "invalid x-api-key", RequestID: "req_body_only"},
			is:     []string{"ErrAuth"},
		},
		{
			name:   "403",
			status: 403,
			body:   `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`,
			want:   llm.APIError{Type: "permission_error", Message: "Your API key does not have permission to use the specified resource."},
			is:     []string{"ErrAuth"},
		},
		{
			name:   "404 model",
			status: 404,
			body:   `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nonexistent"}}`,
			want:   llm.APIError{Type: "not_found_error", Message: "model: claude-nonexistent"},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:   "413",
			status: 413,
			body:   `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			want:   llm.APIError{Type: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."},
		},
		{
			name:   "429 spend limit carries its code",
			status: 429,
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			want:   llm.APIError{Type: "rate_limit_error", Code: "enforced_spend_limit_reached", Message: "You have reached your specified API usage limits."},
			is:     []string{"ErrRateLimited"},
			// A spend limit needs a person: retrying cannot help.
			retryable: false,
		},
		{
			name:      "429 with retry-after-ms",
			status:    429,
			header:    map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"},
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want:      llm.APIError{Type: "rate_limit_error", Message: "slow down", RetryAfter: 1500 * time.Millisecond},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "429 with a retry-after too long for a Duration",
			status:    429,
			header:    map[string]string{"Retry-After": "99999999999"},
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want:      llm.APIError{Type: "rate_limit_error", Message: "slow down", RetryAfter: llm.RetryAfterLimit},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "429 with NaN retry-after and huge retry-after-ms",
			status:    429,
			header:    map[string]string{"Retry-After-Ms": "1e30", "Retry-After": "NaN"},
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want:      llm.APIError{Type: "rate_limit_error", Message: "slow down", RetryAfter: llm.RetryAfterLimit},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:   "429 with a reset far in the future",
			status: 429,
			header: map[string]string{
				"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "9999-12-31T23:59:59Z",
			},
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want:      llm.APIError{Type: "rate_limit_error", Message: "slow down", RetryAfter: llm.RetryAfterLimit},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "429 with Inf retry-after",
			status:    429,
			header:    map[string]string{"Retry-After": "Inf"},
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			want:      llm.APIError{Type: "rate_limit_error", Message: "slow down"},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "500",
			status:    500,
			body:      `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			want:      llm.APIError{Type: "api_error", Message: "Internal server error"},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:      "529 without a body",
			status:    529,
			want:      llm.APIError{}, // http.StatusText has no text for 529
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:      "502 HTML from a proxy",
			status:    502,
			body:      "<html><body>Bad Gateway</body></html>\n",
			want:      llm.APIError{Message: "<html><body>Bad Gateway</body></html>"},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:      "long text body is truncated",
			status:    503,
			body:      longBody,
			want:      llm.APIError{Message: longBody[:512] + "..."},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok {
				t.Fatalf("error %v (%T) is not an *llm.APIError", err, err)
			}
			want := tt.want
			want.Provider, want.StatusCode = "anthropic", tt.status
			if diff := cmp.Diff(&want, apiErr); diff != "" {
				t.Errorf("APIError mismatch (-want +got):\n%s", diff)
			}
			checkClasses(t, err, tt.is)
			if got := llm.IsRetryable(err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
		})
	}
}

func TestRateLimitReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"exhausted requests", map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "2025-09-01T12:00:20Z",
		}, 20 * time.Second},
		{"the longest exhausted limit", map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "2025-09-01T12:00:20Z",
			"Anthropic-Ratelimit-Output-Tokens-Remaining": "0", "Anthropic-Ratelimit-Output-Tokens-Reset": "2025-09-01T12:01:00Z",
			"Anthropic-Ratelimit-Tokens-Remaining": "100", "Anthropic-Ratelimit-Tokens-Reset": "2025-09-01T12:05:00Z",
		}, time.Minute},
		{"reset in the past", map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "2025-09-01T11:59:00Z",
		}, 0},
		{"unparsable reset", map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": "soon",
		}, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := rateLimitReset(h, now); got != tt.want {
			t.Errorf("%s: rateLimitReset = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRateLimitResetFallback(t *testing.T) {
	t.Parallel()
	// A 429 without retry-after waits for the exhausted limit to reset.
	reset := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "0")
		w.Header().Set("Anthropic-Ratelimit-Input-Tokens-Reset", reset)
		w.WriteHeader(429)
		w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"tokens"}}`))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	// Between 59 and 60 minutes, whatever the clock did meanwhile.
	if d := llm.RetryAfter(err); d <= 59*time.Minute || d > time.Hour {
		t.Errorf("RetryAfter = %v, want about an hour", d)
	}
}

func TestStreamErrorEventTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		event     string
		is        []string
		retryable bool
	}{
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, []string{"ErrOverloaded"}, true},
		{`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, []string{"ErrOverloaded"}, true},
		{`{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, []string{"ErrRateLimited"}, true},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201000 tokens > 200000 maximum"}}`, []string{"ErrContextLength"}, false},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, nil, false},
	}
	for _, tt := range tests {
		srv := serveSSE(t, []byte(eventStream(evStart, tt.event)))
		_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
		if _, ok := errors.AsType[*llm.APIError](err); !ok {
			t.Fatalf("%s: error %v is not an *llm.APIError", tt.event, err)
		}
		checkClasses(t, err, tt.is)
		if got := llm.IsRetryable(err); got != tt.retryable {
			t.Errorf("%s: IsRetryable = %v, want %v", tt.event, got, tt.retryable)
		}
	}
}
