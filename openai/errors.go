package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// errorWire is an error object: {"message", "type", "code", "param"}, or a
// bare string as some servers send.
type errorWire struct {
	Message, Type, Code string
}

// UnmarshalJSON reads an error object or string. It never fails: anything
// else is kept as the message, so that an odd error is still reported.
func (e *errorWire) UnmarshalJSON(b []byte) error {
	var obj struct {
		Message flexString `json:"message"`
		Type    flexString `json:"type"`
		Code    flexString `json:"code"`
	}
	var s string
	switch {
	case json.Unmarshal(b, &s) == nil:
		*e = errorWire{Message: s}
	case json.Unmarshal(b, &obj) == nil:
		*e = errorWire{Message: string(obj.Message), Type: string(obj.Type), Code: string(obj.Code)}
	default:
		*e = errorWire{Message: httpapi.Truncate(string(b), httpapi.MaxErrorText)}
	}
	return nil
}

// apiError converts e into an *llm.APIError.
func (e *errorWire) apiError(status int) *llm.APIError {
	a := &llm.APIError{
		Provider:   providerName,
		StatusCode: status,
		Type:       e.Type,
		Code:       e.Code,
		Message:    e.Message,
	}
	markContextLength(a)
	return a
}

// errorBody is an error response body. OpenAI and most servers nest the
// error under "error"; some vLLM versions put its fields at the top level,
// and FastAPI-based servers answer {"detail": ...}.
type errorBody struct {
	Error   *errorWire `json:"error"`
	Message flexString `json:"message"`
	Type    flexString `json:"type"`
	Code    flexString `json:"code"`
	Detail  flexString `json:"detail"`
}

// errorFromResponse builds the error for an HTTP status of 400 or more. It
// reads (part of) the body but does not close it.
func errorFromResponse(resp *http.Response) *llm.APIError {
	body := httpapi.ErrorBody(resp)
	var e errorWire
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		switch {
		case eb.Error != nil:
			e = *eb.Error
		case eb.Message != "" || eb.Type != "":
			e = errorWire{Message: string(eb.Message), Type: string(eb.Type), Code: string(eb.Code)}
		case eb.Detail != "":
			e.Message = string(eb.Detail)
		}
	}
	if e.Message == "" {
		e.Message = httpapi.Excerpt(body, httpapi.MaxErrorText)
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	a := e.apiError(resp.StatusCode)
	a.RequestID = requestID(resp.Header)
	a.RetryAfter = httpapi.RetryAfter(resp, rateLimitReset)
	return a
}

// requestID returns the server's request ID header.
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

// contextLengthPhrases appear in the messages that compatible servers send,
// often without a code, when a request does not fit the context window.
var contextLengthPhrases = [...]string{
	"maximum context length",             // OpenAI, vLLM, DeepSeek, OpenRouter, Mistral
	"context length exceeded",            //
	"context_length_exceeded",            //
	"exceeds the available context size", // llama.cpp
	"context window",                     //
}

// markContextLength sets Code to "context_length_exceeded" on a request
// error that says, in a server's own words, that the context window is too
// small, so that errors.Is(err, llm.ErrContextLength) holds for every server.
//
// A code already set is kept, unless it only repeats the HTTP status (vLLM
// and llama.cpp send "code": 400).
func markContextLength(e *llm.APIError) {
	if e.Code != "" && !isDigits(e.Code) {
		return
	}
	switch e.StatusCode {
	case 0, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
	default:
		return
	}
	if e.Type == "exceed_context_size_error" {
		e.Code = "context_length_exceeded"
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

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
