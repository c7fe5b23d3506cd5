package session

import (
	"context"
	"errors"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/store"
)

// This file is the runtime's side of feedback and sharing (package
// platform/feedback holds their operations): what a session keeps for
// them in its state, changed in one commit like any change of a session,
// and the reads of a shared session's events, counted apart from its
// owner's.

// EventFeedback is the feedback given on one event of a session: [api.EventFeedback].
type EventFeedback = api.EventFeedback

// FeedbackList is the feedback given on a session and its events: [api.FeedbackList].
type FeedbackList = api.FeedbackList

// Annotations are what a session keeps for the platform besides its run:
// its owner's feedback on it and on its events, and the secret of its
// share token.
type Annotations struct {
	Feedback      *Feedback
	EventFeedback map[int64]Feedback
	// ShareSecret, when set, makes the session readable by who has it;
	// empty when the session is not shared.
	ShareSecret string
}

// An Annotated is a session as [Manager.Annotate] shows it to a change,
// and [Manager.Annotations] to a reader.
type Annotated struct {
	ID, Owner string
	// Events is the session's event count.
	Events int64
	// Lost is true when the session's state no longer decodes (its spec
	// is lost): only its annotations are left.
	Lost bool

	s *store.Session // as read by Manager.Annotations
}

// View is the session as the API shows it, for an Annotated that
// [Manager.Annotations] returned ([ErrNotFound] for one given to a
// change).
func (a *Annotated) View() (*View, error) {
	if a.s == nil {
		return nil, ErrNotFound
	}
	return view(a.s)
}

// Annotate changes the annotations of the owner's session in one commit:
// change gets the session and its annotations, changes them in place, and
// reports whether it did (false writes nothing). A finished session is
// annotated too.
//
// Errors: [ErrNotFound] when owner has no such session; change's error.
func (m *Manager) Annotate(ctx context.Context, owner, id string, change func(s *Annotated, a *Annotations) (bool, error)) error {
	_, _, err := m.update(ctx, id, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		a := Annotations{Feedback: st.Feedback, EventFeedback: st.EventFeedback, ShareSecret: st.ShareSecret}
		changed, err := change(&Annotated{ID: s.ID, Owner: s.Owner, Events: s.EventCount, Lost: st.Spec.spec == nil}, &a)
		if err != nil {
			return nil, err
		}
		if !changed {
			return nil, errNoChange
		}
		st.Feedback, st.EventFeedback, st.ShareSecret = a.Feedback, a.EventFeedback, a.ShareSecret
		return nil, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Annotations returns the session id (whoever owns it) with its
// annotations, as stored. It is for the platform's checks (a share
// token's secret) before anything of the session is shown: callers
// check the owner or the secret themselves.
//
// Errors: [ErrNotFound].
func (m *Manager) Annotations(ctx context.Context, id string) (*Annotated, *Annotations, error) {
	s, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	st := viewState(s)
	return &Annotated{ID: s.ID, Owner: s.Owner, Events: s.EventCount, Lost: st.Spec.spec == nil, s: s},
		&Annotations{Feedback: st.Feedback, EventFeedback: st.EventFeedback, ShareSecret: st.ShareSecret}, nil
}

// EventsFor is [Manager.Events] for a reader other than the owner (the
// readers of a share link: "shared:" and the owner): the read takes
// reader's read slots ([Options.MaxReadsPerOwner]), not the owner's, so
// that such readers can hold up only each other.
func (m *Manager) EventsFor(ctx context.Context, reader, owner, id string, p *EventsParams) (*Page[Event], error) {
	return m.events(ctx, reader, owner, id, p)
}

// EventPageFor is [Manager.EventPage] for a reader other than the owner,
// as [Manager.EventsFor].
func (m *Manager) EventPageFor(ctx context.Context, reader, owner, id string, p *EventsParams) (*EventPageReader, error) {
	return m.eventPage(ctx, reader, owner, id, p)
}
