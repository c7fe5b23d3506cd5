package session

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by [Manager] methods. The server maps them to HTTP
// statuses: ErrNotFound to 404, ErrFinished and ErrInFlight to 409,
// ErrQuotaExceeded to 429, the others to 422.
var (
	// ErrNotFound: no session has the id, or it belongs to another owner.
	ErrNotFound = errors.New("session not found")
	// ErrFinished: the session has ended; it takes no more input.
	ErrFinished = errors.New("session has finished")
	// ErrIdempotencyMismatch: the idempotency key was used before with a
	// different request.
	ErrIdempotencyMismatch = errors.New("idempotency key was used with a different request")
	// ErrInFlight: a request with the same idempotency key is still
	// being processed; retry later.
	ErrInFlight = errors.New("a request with this idempotency key is in flight")
	// ErrQuotaExceeded: the owner has as many active sessions as
	// [Options.MaxActiveSessions] allows, and the request asked not to be
	// queued (queue: false).
	ErrQuotaExceeded = errors.New("concurrent session limit reached")
)

// A ValidationError lists what is wrong with a request, field by field.
type ValidationError struct {
	Fields []FieldError
}

// A FieldError is one problem of a request: Loc is the path to the field
// ("body", "agent", "tools", 0, "name"), Msg says what is wrong, Type
// classifies it.
type FieldError struct {
	Loc   []any  `json:"loc"`
	Msg   string `json:"msg"`
	Type  string `json:"type"`
	Input any    `json:"input,omitempty"`
}

// Error lists the fields and what is wrong with each.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, l := range f.Loc {
			if j > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, l)
		}
		b.WriteString(": ")
		b.WriteString(f.Msg)
	}
	return b.String()
}

// invalid returns a validation error about one field.
func invalid(msg string, loc ...any) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Loc: loc, Msg: msg, Type: "value_error"}}}
}

// validation collects field errors.
type validation struct{ fields []FieldError }

func (v *validation) add(msg string, loc ...any) {
	v.fields = append(v.fields, FieldError{Loc: loc, Msg: msg, Type: "value_error"})
}

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}
