package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// errorWire is the error object of an error response or an error event:
// {"type": "overloaded_error", "message": "Overloaded"}, with details on
// some errors.
type errorWire struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

// apiError converts e into an *llm.APIError.
func (e *errorWire) apiError(status int) *llm.APIError {
	a := &llm.APIError{
		Provider:   providerName,
		StatusCode: status,
		Type:       e.Type,
		Message:    e.Message,
	}
	if e.Details != nil {
		a.Code = e.Details.ErrorCode
	}
	markContextLength(a)
	return a
}

// errorBody is an error response body:
// {"type": "error", "error": {...}, "request_id": "req_..."}.
type errorBody struct {
	Error     *errorWire `json:"error"`
	RequestID string     `json:"request_id"`
}

// errorFromResponse builds the error for an HTTP status of 400 or more. It
// reads (part of) the body but does not close it.
func errorFromResponse(resp *http.Response) *llm.APIError {
	body := httpapi.ErrorBody(resp)
	var eb errorBody
	var e errorWire
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		e = *eb.Error
	}
	if e.Message == "" && e.Type == "" {
		e.Message = httpapi.Excerpt(body, httpapi.MaxErrorText)
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	a := e.apiError(resp.StatusCode)
	a.RequestID = requestID(resp.Header)
	if a.RequestID == "" {
		a.RequestID = eb.RequestID
	}
	a.RetryAfter = httpapi.RetryAfter(resp, func(h http.Header) time.Duration { return rateLimitReset(h, time.Now()) })
	return a
}

// requestID returns the API's request ID header.
func requestID(h http.Header) string {
	return h.Get("Request-Id")
}

// rateLimitKinds are the limits the API reports in anthropic-ratelimit-*
// headers.
var rateLimitKinds = [...]string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"}

// rateLimitReset reads the anthropic-ratelimit-*-reset headers (RFC 3339
// times) of the limits that are exhausted, and returns the longest wait from
// now. The API sends retry-after on a 429, so this is a fallback for proxies
// that drop it.
func rateLimitReset(h http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for _, kind := range rateLimitKinds {
		if h.Get("Anthropic-Ratelimit-"+kind+"-Remaining") != "0" {
			continue
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+kind+"-Reset")))
		if err != nil {
			continue
		}
		wait = max(wait, t.Sub(now))
	}
	return wait
}

// contextLengthPhrases appear in the messages of invalid_request_error
// responses that say a request does not fit the model's context window.
var contextLengthPhrases = [...]string{
	"prompt is too long",   // "prompt is too long: 215000 tokens > 200000 maximum"
	"exceed context limit", // "input length and `max_tokens` exceed context limit: ..."
	"context window",       // gateways
	"context length",       // gateways
}

// markContextLength sets Code to "context_length_exceeded" on a request
// error that says the context window is too small, so that
// errors.Is(err, llm.ErrContextLength) holds: the API has no code for it.
func markContextLength(e *llm.APIError) {
	if e.Code != "" {
		return
	}
	switch e.StatusCode {
	case 0, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
	default:
		return
	}
	msg := strings.ToLower(e.Message)
	for _, p := range contextLengthPhrases {
		if strings.Contains(msg, p) {
			e.Code = "context_length_exceeded"
			return
		}
	}
}
