package feedback

import (
	"cmp"
	"context"
	"slices"

	"github.com/hrns-dev/hrns/session"
)

// Feedback returns the feedback the owner gave on the session and its
// events ([Service.SetFeedback], [Service.SetEventFeedback]).
func (f *Service) Feedback(ctx context.Context, owner, id string) (*session.FeedbackList, error) {
	s, a, err := f.rt.Annotations(ctx, id)
	if err == nil && s.Owner != owner {
		err = session.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	l := &session.FeedbackList{Session: a.Feedback, Events: []session.EventFeedback{}}
	for i, fb := range a.EventFeedback {
		l.Events = append(l.Events, session.EventFeedback{EventIndex: i, Feedback: fb})
	}
	slices.SortFunc(l.Events, func(a, b session.EventFeedback) int { return cmp.Compare(a.EventIndex, b.EventIndex) })
	return l, nil
}

// SharedEvents returns a page of the events of the session a share token
// names (see [Service.Share]), as [session.Manager.Events] gives them to
// its owner: the trajectory, read-only, to whoever has the token. It
// returns [session.ErrNotFound] when the token is not (or no longer)
// valid.
func (f *Service) SharedEvents(ctx context.Context, token string, p *session.EventsParams) (*session.Page[session.Event], error) {
	s, err := f.shared(ctx, token)
	if err != nil {
		return nil, err
	}
	// Counted apart from the owner's own reads: a share link's readers
	// can hold up only each other.
	return f.rt.EventsFor(ctx, "shared:"+s.Owner, s.Owner, s.ID, p)
}

// SharedEventPage is [session.Manager.EventPage] for the session a share
// token names, as [Service.SharedEvents] reads it.
func (f *Service) SharedEventPage(ctx context.Context, token string, p *session.EventsParams) (*session.EventPageReader, error) {
	s, err := f.shared(ctx, token)
	if err != nil {
		return nil, err
	}
	return f.rt.EventPageFor(ctx, "shared:"+s.Owner, s.Owner, s.ID, p)
}
