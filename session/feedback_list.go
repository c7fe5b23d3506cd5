package session

import (
	"cmp"
	"context"
	"errors"
	"github.com/hrns-dev/hrns/api"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/store"
)

// EventFeedback is the feedback given on one event of a session: [api.EventFeedback].
type EventFeedback = api.EventFeedback

// FeedbackList is the feedback given on a session and its events: [api.FeedbackList].
type FeedbackList = api.FeedbackList

// Feedback returns the feedback the owner gave on the session and its
// events ([Manager.SetFeedback], [Manager.SetEventFeedback]).
func (m *Manager) Feedback(ctx context.Context, owner, id string) (*FeedbackList, error) {
	s, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	st := viewState(s)
	l := &FeedbackList{Session: st.Feedback, Events: []EventFeedback{}}
	for i, fb := range st.EventFeedback {
		l.Events = append(l.Events, EventFeedback{EventIndex: i, Feedback: fb})
	}
	slices.SortFunc(l.Events, func(a, b EventFeedback) int { return cmp.Compare(a.EventIndex, b.EventIndex) })
	return l, nil
}

// SharedEvents returns a page of the events of the session a share token
// names (see [Manager.Share]), as [Manager.Events] gives them to its
// owner: the trajectory, read-only, to whoever has the token. It returns
// [ErrNotFound] when the token is not (or no longer) valid.
func (m *Manager) SharedEvents(ctx context.Context, token string, p *EventsParams) (*Page[Event], error) {
	if _, err := m.Shared(ctx, token); err != nil {
		return nil, err
	}
	id, _, _ := strings.Cut(token, ".")
	s, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	// Counted apart from the owner's own reads: a share link's readers
	// can hold up only each other.
	return m.events(ctx, "shared:"+s.Owner, s.Owner, id, p)
}

// SharedEventPage is [Manager.EventPage] for the session a share token
// names, as [Manager.SharedEvents] reads it.
func (m *Manager) SharedEventPage(ctx context.Context, token string, p *EventsParams) (*EventPageReader, error) {
	if _, err := m.Shared(ctx, token); err != nil {
		return nil, err
	}
	id, _, _ := strings.Cut(token, ".")
	s, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return m.eventPage(ctx, "shared:"+s.Owner, s.Owner, id, p)
}
