package responses

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// serveJSON answers every request with status and body as JSON.
func serveJSON(t testing.TB, status int, body string, header ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		header    []string
		class     error
		retryable bool
		after     time.Duration
	}{
		{"rate limit with retry-after", 429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			[]string{"Retry-After", "2", "X-Request-Id", "req_9"}, llm.ErrRateLimited, true, 2 * time.Second},
		{"rate limit from reset headers", 429, `{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}`,
			[]string{"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1.5s"}, llm.ErrRateLimited, true, 1500 * time.Millisecond},
		{"quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`,
			nil, llm.ErrRateLimited, false, 0},
		{"auth", 401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`,
			nil, llm.ErrAuth, false, 0},
		{"context length", 400, `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			nil, llm.ErrContextLength, false, 0},
		{"context length without a code", 400, `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":null}}`,
			nil, llm.ErrContextLength, false, 0},
		{"bad request", 400, `{"error":{"message":"Invalid schema for function 'f'","type":"invalid_request_error","param":"tools[0].parameters","code":"invalid_function_parameters"}}`,
			nil, llm.ErrBadRequest, false, 0},
		{"overloaded", 503, `{"error":{"message":"The engine is currently overloaded","type":"server_error","code":null}}`,
			nil, llm.ErrOverloaded, true, 0},
		{"not json", 502, `<<bad gateway>>`, nil, llm.ErrOverloaded, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serveJSON(t, tt.status, tt.body, tt.header...)
			_, err := llm.Collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok {
				t.Fatalf("err = %v, want an *llm.APIError", err)
			}
			if !errors.Is(err, tt.class) {
				t.Errorf("err = %v, want class %v", err, tt.class)
			}
			if llm.IsRetryable(err) != tt.retryable {
				t.Errorf("retryable = %v", !tt.retryable)
			}
			if apiErr.RetryAfter != tt.after {
				t.Errorf("RetryAfter = %v, want %v", apiErr.RetryAfter, tt.after)
			}
			if apiErr.StatusCode != tt.status || apiErr.Provider != "openai-responses" || apiErr.Message == "" {
				t.Errorf("err = %+v", apiErr)
			}
		})
	}
}
