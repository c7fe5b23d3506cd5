package session

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/hrns-dev/hrns/store"
)

// maxFeedback bounds the bytes of a feedback message.
const maxFeedback = 64 << 10

// SetFeedback records the owner's feedback on the session, replacing any
// earlier one. A finished session takes feedback too.
func (m *Manager) SetFeedback(ctx context.Context, owner, id string, fb Feedback) error {
	return m.feedback(ctx, owner, id, -1, fb)
}

// SetEventFeedback records the owner's feedback on the session's event
// with the index, replacing any earlier one. An index that is not an
// event of the session is a *[ValidationError].
func (m *Manager) SetEventFeedback(ctx context.Context, owner, id string, index int64, fb Feedback) error {
	return m.feedback(ctx, owner, id, index, fb)
}

func (m *Manager) feedback(ctx context.Context, owner, id string, index int64, fb Feedback) error {
	if fb.Message != nil && len(*fb.Message) > maxFeedback {
		return invalid(fmt.Sprintf("String should have at most %d bytes", maxFeedback), "body", "message")
	}
	_, _, err := m.update(ctx, id, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.Spec.spec == nil {
			return nil, fmt.Errorf("%w: its state is lost", ErrFinished)
		}
		if index < 0 {
			st.Feedback = &fb
			return nil, nil
		}
		if index >= s.EventCount {
			return nil, invalid(fmt.Sprintf("the session has no event %d (it has %d)", index, s.EventCount), "path", "event_index")
		}
		if st.EventFeedback == nil {
			st.EventFeedback = map[int64]Feedback{}
		}
		st.EventFeedback[index] = fb
		return nil, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Share makes the session readable by anyone who has the token it
// returns (the same token until [Manager.Unshare]); [Manager.Shared] reads
// it with the token.
func (m *Manager) Share(ctx context.Context, owner, id string) (string, error) {
	var token string
	_, _, err := m.update(ctx, id, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.Spec.spec == nil {
			return nil, fmt.Errorf("%w: its state is lost", ErrFinished)
		}
		if st.ShareSecret != "" {
			token = s.ID + "." + st.ShareSecret
			return nil, errNoChange
		}
		st.ShareSecret = randomHex(24)
		token = s.ID + "." + st.ShareSecret
		return nil, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrNotFound
	}
	return token, err
}

// Unshare revokes the session's share token; unsharing a session that is
// not shared does nothing.
func (m *Manager) Unshare(ctx context.Context, owner, id string) error {
	_, _, err := m.update(ctx, id, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.ShareSecret == "" {
			return nil, errNoChange
		}
		st.ShareSecret = ""
		return nil, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Shared returns the session a share token names, or [ErrNotFound] when
// the token is not (or no longer) valid.
func (m *Manager) Shared(ctx context.Context, token string) (*View, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || secret == "" {
		return nil, ErrNotFound
	}
	s, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	st := viewState(s)
	if st.ShareSecret == "" || subtle.ConstantTimeCompare([]byte(st.ShareSecret), []byte(secret)) != 1 {
		return nil, ErrNotFound
	}
	return view(s)
}
