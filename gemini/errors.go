package gemini

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// statusWire is a google.rpc.Status, the error of Google APIs:
// {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED",
// "details": [...]}.
type statusWire struct {
	Code    flexString   `json:"code"`
	Message string       `json:"message"`
	Status  string       `json:"status"`
	Details []detailWire `json:"details"`
}

// detailWire is one of a status's details. Only two kinds are read: an
// ErrorInfo's reason (such as API_KEY_INVALID) and a RetryInfo's delay.
type detailWire struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"`
}

// maxDetails bounds the details read from one error.
const maxDetails = 16

// errorBody is an error response body: {"error": {...}}. Some proxies
// answer with an array holding it.
type errorBody struct {
	Error *statusWire `json:"error"`
}

// apiError converts s into an *llm.APIError: Type is the canonical status
// (which the classes of [llm.APIError] read), Code the ErrorInfo reason
// when there is one and the numeric code otherwise.
func (s *statusWire) apiError(status int) *llm.APIError {
	a := &llm.APIError{
		Provider:   providerName,
		StatusCode: status,
		Type:       httpapi.Truncate(s.Status, httpapi.MaxErrorText),
		Code:       string(s.Code),
		Message:    s.Message,
	}
	for i, d := range s.Details {
		if i == maxDetails {
			break
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && d.Reason != "":
			a.Code = httpapi.Truncate(d.Reason, httpapi.MaxErrorText)
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			a.RetryAfter = max(a.RetryAfter, retryDelay(d.RetryDelay))
		}
	}
	classify(a)
	return a
}

// retryDelay reads a google.protobuf.Duration in its JSON form ("30s",
// "1.5s"), bounded as [llm.ParseRetryAfter] bounds waits.
func retryDelay(v string) time.Duration {
	v = strings.TrimSpace(v)
	num, ok := strings.CutSuffix(v, "s")
	if !ok {
		return 0
	}
	return httpapi.Seconds(num)
}

// errorFromResponse builds the error for an HTTP status of 400 or more. It
// reads (part of) the body but does not close it.
func errorFromResponse(resp *http.Response) *llm.APIError {
	body := httpapi.ErrorBody(resp)
	var s statusWire
	var eb errorBody
	var arr []errorBody
	switch {
	case json.Unmarshal(body, &eb) == nil && eb.Error != nil:
		s = *eb.Error
	case json.Unmarshal(body, &arr) == nil && len(arr) > 0 && arr[0].Error != nil:
		s = *arr[0].Error
	}
	if s.Message == "" {
		s.Message = httpapi.Excerpt(body, httpapi.MaxErrorText)
	}
	if s.Message == "" {
		s.Message = http.StatusText(resp.StatusCode)
	}
	a := s.apiError(resp.StatusCode)
	a.RequestID = requestID(resp.Header)
	if wait := httpapi.RetryAfter(resp, func(http.Header) time.Duration { return 0 }); wait > 0 {
		a.RetryAfter = wait
	}
	return a
}

// requestID returns the request ID header Google's front ends may send.
func requestID(h http.Header) string {
	return h.Get("X-Request-Id")
}

// classify marks a request too long for the model's context window (a 400
// INVALID_ARGUMENT whose message says so) with the code
// "context_length_exceeded", so that it is [llm.ErrContextLength].
func classify(e *llm.APIError) {
	if e.StatusCode != 0 && e.StatusCode != http.StatusBadRequest {
		return
	}
	if e.Type != "" && e.Type != "INVALID_ARGUMENT" {
		return
	}
	msg := strings.ToLower(e.Message)
	for _, p := range [...]string{"exceeds the maximum number of tokens", "input token count", "context window", "too many tokens"} {
		if strings.Contains(msg, p) {
			e.Code = "context_length_exceeded"
			return
		}
	}
}

// flexString is a JSON scalar kept as text: the code of a status is a
// number, which some proxies send as a string.
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
		*f = flexString(httpapi.Truncate(s, httpapi.MaxErrorText))
	default:
		*f = flexString(httpapi.Truncate(string(b), httpapi.MaxErrorText))
	}
	return nil
}
