package openai_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

// TestRetryAfterTooLong runs the loop against a server that answers 429 with
// a wait too long for a Duration, or one that is not a wait at all. A huge
// wait must end the run as longer than allowed after one request, instead
// of overflowing into a negative wait that is retried at once; NaN, Inf and
// negative values count as no Retry-After, so the loop's own backoff applies.
func TestRetryAfterTooLong(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header, value string
		tooLong       bool // the run fails at once as longer than allowed
	}{
		{"Retry-After", "99999999999", true},
		{"Retry-After", "1e300", true},
		{"Retry-After", "1e400", true},
		{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT", true},
		{"Retry-After-Ms", "1e30", true},
		{"Retry-After", "Inf", false},
		{"Retry-After", "NaN", false},
		{"Retry-After", "-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.header+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.Header().Set(tt.header, tt.value)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
			}))
			t.Cleanup(srv.Close)
			model := &openai.Client{BaseURL: srv.URL, Model: "m", HTTPClient: srv.Client()}
			agent := loop.NewAgent(model, nil, &loop.Options{Retry: loop.RetryPolicy{
				MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
			}})
			_, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("hi")})
			if err == nil {
				t.Fatal("Run succeeded against a server that only answers 429")
			}
			tooLong := strings.Contains(err.Error(), "more than the")
			if tooLong != tt.tooLong {
				t.Errorf("err = %v; refused as too long: %v, want %v", err, tooLong, tt.tooLong)
			}
			want := int32(2)
			if tt.tooLong {
				want = 1
			}
			if got := requests.Load(); got != want {
				t.Errorf("%d requests, want %d", got, want)
			}
			if got := llm.RetryAfter(err); got < 0 || got > llm.RetryAfterLimit {
				t.Errorf("RetryAfter(err) = %v, outside [0, %v]", got, llm.RetryAfterLimit)
			}
		})
	}
}
