package gemini

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
)

// TestHTTPErrors checks how error responses become *llm.APIError values of
// the right class, with the retry delay Google asks for.
func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    http.Header
		body      string
		is        error
		retryable bool
		typ, code string
		after     time.Duration
		msg       string
	}{
		{name: "quota with RetryInfo", status: 429,
			body: `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"m"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`,
			is:   llm.ErrRateLimited, retryable: true, typ: "RESOURCE_EXHAUSTED", code: "429", after: 26 * time.Second, msg: "current quota"},
		{name: "Retry-After header wins", status: 429, header: http.Header{"Retry-After": {"3"}},
			body: `{"error":{"code":429,"message":"slow","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`,
			is:   llm.ErrRateLimited, retryable: true, typ: "RESOURCE_EXHAUSTED", code: "429", after: 3 * time.Second},
		{name: "overloaded", status: 503, body: geminitest.ErrorBody(503, "UNAVAILABLE", "The model is overloaded."),
			is: llm.ErrOverloaded, retryable: true, typ: "UNAVAILABLE", code: "503"},
		{name: "internal", status: 500, body: geminitest.ErrorBody(500, "INTERNAL", "An internal error has occurred."),
			is: llm.ErrOverloaded, retryable: true, typ: "INTERNAL", code: "500"},
		{name: "invalid key", status: 400,
			body: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`,
			is:   llm.ErrAuth, typ: "INVALID_ARGUMENT", code: "API_KEY_INVALID"},
		{name: "permission", status: 403, body: geminitest.ErrorBody(403, "PERMISSION_DENIED", "denied"), is: llm.ErrAuth, typ: "PERMISSION_DENIED", code: "403"},
		{name: "context length", status: 400,
			body: geminitest.ErrorBody(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."),
			is:   llm.ErrContextLength, typ: "INVALID_ARGUMENT", code: "context_length_exceeded"},
		{name: "bad request", status: 400, body: geminitest.ErrorBody(400, "INVALID_ARGUMENT", "Invalid JSON payload received."),
			is: llm.ErrBadRequest, typ: "INVALID_ARGUMENT", code: "400"},
		{name: "unknown model", status: 404, body: geminitest.ErrorBody(404, "NOT_FOUND", "models/x is not found"), is: llm.ErrBadRequest, typ: "NOT_FOUND", code: "404"},
		{name: "array body", status: 400, body: `[{"error":{"code":400,"message":"from a proxy","status":"FAILED_PRECONDITION"}}]`, is: llm.ErrBadRequest, typ: "FAILED_PRECONDITION", code: "400", msg: "from a proxy"},
		{name: "not JSON", status: 502, header: http.Header{"Content-Type": {"text/plain"}}, body: "bad gateway", is: llm.ErrOverloaded, retryable: true, msg: "bad gateway"},
		{name: "empty body", status: 500, body: "", is: llm.ErrOverloaded, retryable: true, msg: "Internal Server Error"},
		{name: "code as a string", status: 503, body: `{"error":{"code":"503","message":"x","status":"UNAVAILABLE"}}`, is: llm.ErrOverloaded, retryable: true, typ: "UNAVAILABLE", code: "503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Reply{Status: tt.status, Header: tt.header, Body: tt.body})
			defer srv.Close()
			c := &Client{BaseURL: srv.URL(), Model: "gemini-test"}
			_, err := collect(c.Stream(t.Context(), userRequest("hi")))
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok {
				t.Fatalf("err = %v", err)
			}
			if !errors.Is(err, tt.is) || llm.IsRetryable(err) != tt.retryable {
				t.Errorf("err %v: is %v %v, retryable %v", err, tt.is, errors.Is(err, tt.is), llm.IsRetryable(err))
			}
			if apiErr.Provider != "gemini" || apiErr.StatusCode != tt.status || apiErr.Type != tt.typ || apiErr.Code != tt.code || apiErr.RetryAfter != tt.after {
				t.Errorf("%+v", apiErr)
			}
			if !strings.Contains(apiErr.Message, tt.msg) {
				t.Errorf("message %q, want %q", apiErr.Message, tt.msg)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1.5s": 1500 * time.Millisecond, "0s": 0, "-3s": 0, "s": 0, "30": 0, "1e300s": llm.RetryAfterLimit, "NaNs": 0,
	} {
		if got := retryDelay(in); got != want {
			t.Errorf("retryDelay(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestHTMLPage reports a web page instead of an event stream clearly.
func TestHTMLPage(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Reply{Status: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>login</html>"})
	defer srv.Close()
	c := &Client{BaseURL: srv.URL(), Model: "gemini-test", APIKey: "secret"}
	_, err := collect(c.Stream(t.Context(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "HTML page") || strings.Contains(err.Error(), "secret") || llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}
