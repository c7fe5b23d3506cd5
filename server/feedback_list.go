package server

import (
	"net/http"

	"github.com/hrns-dev/hrns/platform/feedback"
)

// listFeedback answers GET /api/v2/sessions/{id}/feedback (an hrns
// addition): the feedback the key gave on the session and its events.
func (s *Server) listFeedback(w http.ResponseWriter, r *http.Request, owner string) error {
	l, err := feedback.New(s.m).Feedback(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// sharedEvents answers GET /api/v2/shared/{token}/events (an hrns
// addition): the events of a shared session, paged as the session's own
// events listing, to anyone with the token; 404 once it is revoked.
func (s *Server) sharedEvents(w http.ResponseWriter, r *http.Request) {
	p, err := eventsParams(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if p.From == nil {
		// A page asked by number is given whole, in pieces.
		pr, err := feedback.New(s.m).SharedEventPage(r.Context(), r.PathValue("token"), p)
		if err == nil {
			err = s.writeEventPage(w, r, pr)
		}
		if err != nil {
			s.writeErr(w, r, err)
		}
		return
	}
	page, err := feedback.New(s.m).SharedEvents(r.Context(), r.PathValue("token"), p)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
