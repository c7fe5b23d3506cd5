// Package feedback is the feedback and sharing of sessions: the owner's
// judgement of a session and of its events (POST
// /api/v2/sessions/{id}/feedback, .../events/{index}/feedback, GET
// .../feedback), and share tokens that make a session's trajectory
// readable, read-only, by whoever has the token (POST and DELETE
// .../share, GET /api/v2/shared/{token}).
//
// It is a service of the platform beside the sessions runtime (package
// session), which it reaches through [Runtime]: what it records lives in
// the session's state ([session.Annotations]), changed in one commit like
// any change of a session.
package feedback

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/session"
)

// maxFeedback bounds the bytes of a feedback message.
const maxFeedback = 64 << 10

// Runtime is what [Service] needs of the sessions runtime; a
// *[session.Manager] is one.
type Runtime interface {
	// Annotate changes the annotations of the owner's session in one
	// commit ([session.Manager.Annotate]).
	Annotate(ctx context.Context, owner, id string, change func(s *session.Annotated, a *session.Annotations) (bool, error)) error
	// Annotations reads a session, whoever owns it, with its
	// annotations ([session.Manager.Annotations]).
	Annotations(ctx context.Context, id string) (*session.Annotated, *session.Annotations, error)
	// EventsFor and EventPageFor read a session's events for a reader
	// other than its owner ([session.Manager.EventsFor]).
	EventsFor(ctx context.Context, reader, owner, id string, p *session.EventsParams) (*session.Page[session.Event], error)
	EventPageFor(ctx context.Context, reader, owner, id string, p *session.EventsParams) (*session.EventPageReader, error)
}

// A Service records feedback on the sessions of a runtime and shares
// them. It holds no state: a new one per call is as good as a kept one.
type Service struct {
	rt Runtime
}

// New returns the feedback and sharing of rt's sessions.
func New(rt Runtime) *Service { return &Service{rt: rt} }

// SetFeedback records the owner's feedback on the session, replacing any
// earlier one. A finished session takes feedback too.
func (f *Service) SetFeedback(ctx context.Context, owner, id string, fb session.Feedback) error {
	return f.feedback(ctx, owner, id, -1, fb)
}

// SetEventFeedback records the owner's feedback on the session's event
// with the index, replacing any earlier one. An index that is not an
// event of the session is a *[session.ValidationError].
func (f *Service) SetEventFeedback(ctx context.Context, owner, id string, index int64, fb session.Feedback) error {
	return f.feedback(ctx, owner, id, index, fb)
}

func (f *Service) feedback(ctx context.Context, owner, id string, index int64, fb session.Feedback) error {
	if fb.Message != nil && len(*fb.Message) > maxFeedback {
		return invalid(fmt.Sprintf("String should have at most %d bytes", maxFeedback), "body", "message")
	}
	return f.rt.Annotate(ctx, owner, id, func(s *session.Annotated, a *session.Annotations) (bool, error) {
		if s.Lost {
			return false, fmt.Errorf("%w: its state is lost", session.ErrFinished)
		}
		if index < 0 {
			a.Feedback = &fb
			return true, nil
		}
		if index >= s.Events {
			return false, invalid(fmt.Sprintf("the session has no event %d (it has %d)", index, s.Events), "path", "event_index")
		}
		if a.EventFeedback == nil {
			a.EventFeedback = map[int64]session.Feedback{}
		}
		a.EventFeedback[index] = fb
		return true, nil
	})
}

// Share makes the session readable by anyone who has the token it
// returns (the same token until [Service.Unshare]); [Service.Shared] reads
// it with the token.
func (f *Service) Share(ctx context.Context, owner, id string) (string, error) {
	var token string
	err := f.rt.Annotate(ctx, owner, id, func(s *session.Annotated, a *session.Annotations) (bool, error) {
		if s.Lost {
			return false, fmt.Errorf("%w: its state is lost", session.ErrFinished)
		}
		if a.ShareSecret != "" {
			token = s.ID + "." + a.ShareSecret
			return false, nil
		}
		a.ShareSecret = randomHex(24)
		token = s.ID + "." + a.ShareSecret
		return true, nil
	})
	return token, err
}

// Unshare revokes the session's share token; unsharing a session that is
// not shared does nothing.
func (f *Service) Unshare(ctx context.Context, owner, id string) error {
	return f.rt.Annotate(ctx, owner, id, func(_ *session.Annotated, a *session.Annotations) (bool, error) {
		if a.ShareSecret == "" {
			return false, nil
		}
		a.ShareSecret = ""
		return true, nil
	})
}

// Shared returns the session a share token names, or [session.ErrNotFound]
// when the token is not (or no longer) valid.
func (f *Service) Shared(ctx context.Context, token string) (*session.View, error) {
	s, err := f.shared(ctx, token)
	if err != nil {
		return nil, err
	}
	return s.View()
}

// shared is the session a valid share token names.
func (f *Service) shared(ctx context.Context, token string) (*session.Annotated, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || secret == "" || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		// No session's id holds text a store cannot hold (PostgreSQL's
		// text refuses it, an error): a token that names nothing.
		return nil, session.ErrNotFound
	}
	s, a, err := f.rt.Annotations(ctx, id)
	if err != nil {
		return nil, err
	}
	if a.ShareSecret == "" || subtle.ConstantTimeCompare([]byte(a.ShareSecret), []byte(secret)) != 1 {
		return nil, session.ErrNotFound
	}
	return s, nil
}

// invalid returns a validation error about one field.
func invalid(msg string, loc ...any) *session.ValidationError {
	return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: msg, Type: "value_error"}}}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
