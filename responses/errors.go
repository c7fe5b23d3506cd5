package responses

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// errorWire is an error object: {"message", "type", "code", "param"}. The
// code is a string for OpenAI; some compatible servers send a number.
type errorWire struct {
	Message flexString `json:"message"`
	Type    flexString `json:"type"`
	Code    flexString `json:"code"`
}

// apiError converts e into an *llm.APIError.
func (e *errorWire) apiError(status int) *llm.APIError {
	a := &llm.APIError{
		Provider:   providerName,
		StatusCode: status,
		Type:       string(e.Type),
		Code:       string(e.Code),
		Message:    string(e.Message),
	}
	classify(a)
	return a
}

// errorBody is an error response body: {"error": {...}}.
type errorBody struct {
	Error *errorWire `json:"error"`
}

// errorFromResponse builds the error for an HTTP status of 400 or more. It
// reads (part of) the body but does not close it.
func errorFromResponse(resp *http.Response) *llm.APIError {
	body := httpapi.ErrorBody(resp)
	var e errorWire
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		e = *eb.Error
	}
	if e.Message == "" {
		e.Message = flexString(httpapi.Excerpt(body, httpapi.MaxErrorText))
	}
	if e.Message == "" {
		e.Message = flexString(http.StatusText(resp.StatusCode))
	}
	a := e.apiError(resp.StatusCode)
	a.RequestID = requestID(resp.Header)
	a.RetryAfter = httpapi.RetryAfter(resp, rateLimitReset)
	return a
}

// requestID returns OpenAI's request ID header.
func requestID(h http.Header) string {
	return h.Get("X-Request-Id")
}

// rateLimitReset reads OpenAI's x-ratelimit-reset-* headers ("1s", "6m0s")
// for the limits that are exhausted, and returns the longest wait.
func rateLimitReset(h http.Header) time.Duration {
	var wait time.Duration
	for _, kind := range [...]string{"Requests", "Tokens"} {
		if h.Get("X-Ratelimit-Remaining-"+kind) != "0" {
			continue
		}
		v := strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + kind))
		d, err := time.ParseDuration(v)
		if err != nil {
			d = httpapi.Seconds(v) // bounded: "1e300" must not overflow
		}
		wait = max(wait, d)
	}
	return wait
}

// classify fills in what the classes of [llm.APIError] read, for errors
// that carry it in another form:
//
//   - An error inside a stream (status 0) has a code but often no type: a
//     "server_error" code gets the type "server_error", so that it is
//     [llm.ErrOverloaded] and retried.
//   - A request too long for the context window is told by its message
//     when the code does not say it, so that it is [llm.ErrContextLength].
func classify(e *llm.APIError) {
	if e.StatusCode == 0 && e.Type == "" && e.Code == "server_error" {
		e.Type = "server_error"
	}
	if e.Code != "" || (e.StatusCode != 0 && e.StatusCode != http.StatusBadRequest) {
		return
	}
	msg := strings.ToLower(e.Message)
	for _, p := range [...]string{"context window", "maximum context length", "context length exceeded", "context_length_exceeded"} {
		if strings.Contains(msg, p) {
			e.Code = "context_length_exceeded"
			return
		}
	}
}

// flexString is a JSON string that some servers send as a number.
type flexString string

// UnmarshalJSON reads a string, or keeps any other scalar's literal text.
func (f *flexString) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*f = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	default:
		*f = flexString(httpapi.Truncate(string(b), httpapi.MaxErrorText))
	}
	return nil
}
