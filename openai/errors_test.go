package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/internal/httpapi"
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
			name:   "401 invalid key",
			status: 401,
			header: map[string]string{"X-Request-Id": "req_4f1c"},
			body:   `{"error":{"message":"Incorrect API key provided: sk-abc.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided: sk-abc.", RequestID: "req_4f1c"},
			is:     []string{"ErrAuth"},
		},
		{
			name:   "403",
			status: 403,
			body:   `{"error":{"message":"Project does not have access to model gpt-5","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "model_not_found", Message: "Project does not have access to model gpt-5"},
			is:     []string{"ErrAuth"},
		},
		{
			name:      "429 with Retry-After seconds",
			status:    429,
			header:    map[string]string{"Retry-After": "20"},
			body:      `{"error":{"message":"Rate limit reached for gpt-4.1 on requests per min (RPM).","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			want:      llm.APIError{Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for gpt-4.1 on requests per min (RPM).", RetryAfter: 20 * time.Second},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "429 with retry-after-ms",
			status:    429,
			header:    map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"},
			body:      `{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}`,
			want:      llm.APIError{Type: "tokens", Code: "rate_limit_exceeded", Message: "slow down", RetryAfter: 1500 * time.Millisecond},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:   "429 with x-ratelimit-reset headers",
			status: 429,
			header: map[string]string{
				"X-Ratelimit-Remaining-Requests": "10", "X-Ratelimit-Reset-Requests": "1s",
				"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "6m0s",
			},
			body:      `{"error":{"message":"Rate limit reached on tokens per min (TPM)","type":"tokens","code":"rate_limit_exceeded"}}`,
			want:      llm.APIError{Type: "tokens", Code: "rate_limit_exceeded", Message: "Rate limit reached on tokens per min (TPM)", RetryAfter: 6 * time.Minute},
			is:        []string{"ErrRateLimited"},
			retryable: true,
		},
		{
			name:      "500",
			status:    500,
			body:      `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			want:      llm.APIError{Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:   "400 context_length_exceeded",
			status: 400,
			body:   `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."},
			is:     []string{"ErrContextLength"},
		},
		{
			name:   "400 context length from vLLM, code is the status",
			status: 400,
			body:   `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			want:   llm.APIError{Type: "BadRequestError", Code: "context_length_exceeded", Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."},
			is:     []string{"ErrContextLength"},
		},
		{
			name:   "400 context length from llama.cpp",
			status: 400,
			body:   `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			want:   llm.APIError{Type: "exceed_context_size_error", Code: "context_length_exceeded", Message: "the request exceeds the available context size, try increasing it"},
			is:     []string{"ErrContextLength"},
		},
		{
			name:   "400 other",
			status: 400,
			body:   `{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
			want:   llm.APIError{Type: "invalid_request_error", Code: "invalid_value", Message: "Invalid value for 'temperature'."},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:   "404 from Ollama",
			status: 404,
			body:   `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`,
			want:   llm.APIError{Type: "not_found_error", Message: `model "llama9" not found, try pulling it first`},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:   "404 FastAPI detail",
			status: 404,
			body:   `{"detail":"Not Found"}`,
			want:   llm.APIError{Message: "Not Found"},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:   "error as a string",
			status: 400,
			body:   `{"error":"invalid model name"}`,
			want:   llm.APIError{Message: "invalid model name"},
			is:     []string{"ErrBadRequest"},
		},
		{
			name:      "non-JSON body",
			status:    502,
			body:      "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n</html>\r\n",
			want:      llm.APIError{Message: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n</html>"},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:      "long non-JSON body is truncated",
			status:    503,
			body:      longBody,
			want:      llm.APIError{Message: longBody[:httpapi.MaxErrorText] + "..."},
			is:        []string{"ErrOverloaded"},
			retryable: true,
		},
		{
			name:      "empty body",
			status:    503,
			want:      llm.APIError{Message: "Service Unavailable"},
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
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			chunks, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
			if len(chunks) != 0 {
				t.Errorf("got %d chunks before the error, want none", len(chunks))
			}
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok {
				t.Fatalf("err = %v (%T), want an *llm.APIError", err, err)
			}
			want := tt.want
			want.Provider, want.StatusCode = "openai", tt.status
			if diff := cmp.Diff(&want, apiErr); diff != "" {
				t.Errorf("APIError mismatch (-want +got):\n%s", diff)
			}
			for name, sentinel := range sentinels {
				want := false
				for _, s := range tt.is {
					want = want || s == name
				}
				if got := errors.Is(err, sentinel); got != want {
					t.Errorf("errors.Is(err, llm.%s) = %v, want %v", name, got, want)
				}
			}
			if got := llm.IsRetryable(err); got != tt.retryable {
				t.Errorf("llm.IsRetryable = %v, want %v", got, tt.retryable)
			}
			if got, want := llm.RetryAfter(err), tt.want.RetryAfter; got != want {
				t.Errorf("llm.RetryAfter = %v, want %v", got, want)
			}
		})
	}
}

func TestHTTPErrorRetryAfterDate(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if !errors.Is(err, llm.ErrRateLimited) {
		t.Fatalf("err = %v, want llm.ErrRateLimited", err)
	}
	// The date has a one-second resolution and the request takes some time.
	if d := llm.RetryAfter(err); d <= 58*time.Minute || d > time.Hour {
		t.Errorf("RetryAfter = %v, want about an hour", d)
	}
}

func TestMarkContextLength(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       llm.APIError
		wantCode string
	}{
		{llm.APIError{StatusCode: 400, Message: "This endpoint's maximum context length is 8192 tokens."}, "context_length_exceeded"},
		{llm.APIError{StatusCode: 0, Message: "prompt exceeds the model's context window"}, "context_length_exceeded"},
		{llm.APIError{StatusCode: 413, Message: "Context length exceeded"}, "context_length_exceeded"},
		{llm.APIError{StatusCode: 400, Code: "string_above_max_length", Message: "maximum context length"}, "string_above_max_length"},
		{llm.APIError{StatusCode: 400, Code: "invalid_value", Message: "maximum context length"}, "invalid_value"},
		{llm.APIError{StatusCode: 500, Message: "maximum context length"}, ""},
		{llm.APIError{StatusCode: 400, Message: "bad temperature"}, ""},
	}
	for _, tt := range tests {
		e := tt.in
		markContextLength(&e)
		if e.Code != tt.wantCode {
			t.Errorf("markContextLength(%+v): Code = %q, want %q", tt.in, e.Code, tt.wantCode)
		}
	}
}

func TestRateLimitReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header map[string]string
		want   time.Duration
	}{
		{map[string]string{}, 0},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1.5s"}, 1500 * time.Millisecond},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "20"}, 20 * time.Second},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "later"}, 0},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "3", "X-Ratelimit-Reset-Requests": "1m"}, 0},
		// Bounded like Retry-After: no overflow into a negative wait.
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1e300"}, llm.RetryAfterLimit},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "99999999999"}, llm.RetryAfterLimit},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "NaN"}, 0},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "Inf"}, 0},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "-1"}, 0},
		{map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "Sun, 01 Jun 2025 12:00:00 GMT"}, 0},
		{map[string]string{
			"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "2s",
			"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1m30s",
		}, 90 * time.Second},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := rateLimitReset(h); got != tt.want {
			t.Errorf("rateLimitReset(%v) = %v, want %v", h, got, tt.want)
		}
	}
}
