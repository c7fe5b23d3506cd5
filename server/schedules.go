package server

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/hrns-dev/hrns/platform/schedule"
)

// scheduleRoutes adds the routes of the schedules, when the server has a
// scheduler ([Options.Schedules]):
//
//	POST   /api/v2/schedules                create (201)
//	GET    /api/v2/schedules                list (paged)
//	GET    /api/v2/schedules/{id}           one
//	PATCH  /api/v2/schedules/{id}           change the fields given
//	DELETE /api/v2/schedules/{id}           204; its sessions stay
//	POST   /api/v2/schedules/{id}/pause     {"note"} optional
//	POST   /api/v2/schedules/{id}/resume
//	POST   /api/v2/schedules/{id}/trigger   fire once now: the run (Idempotency-Key)
//	GET    /api/v2/schedules/{id}/runs      its runs (paged), latest first
//
// Like sessions, a key sees only its own schedules: another key's is 404.
func (s *Server) scheduleRoutes() {
	if s.opts.Schedules == nil {
		return
	}
	for _, r := range []struct {
		pattern string
		body    body
		h       func(w http.ResponseWriter, r *http.Request, owner string) error
	}{
		{"POST /api/v2/schedules", bodyJSON, s.scheduleCreate},
		{"GET /api/v2/schedules", bodyNone, s.scheduleList},
		{"GET /api/v2/schedules/{id}", bodyNone, s.scheduleGet},
		{"PATCH /api/v2/schedules/{id}", bodyJSON, s.scheduleUpdate},
		{"DELETE /api/v2/schedules/{id}", bodyNone, s.scheduleDelete},
		{"POST /api/v2/schedules/{id}/pause", bodyIgnored, s.schedulePause},
		{"POST /api/v2/schedules/{id}/resume", bodyIgnored, s.scheduleResume},
		{"POST /api/v2/schedules/{id}/trigger", bodyIgnored, s.scheduleTrigger},
		{"GET /api/v2/schedules/{id}/runs", bodyNone, s.scheduleRuns},
	} {
		s.mux.Handle(r.pattern, s.api(r.body, r.h))
	}
}

// scheduleError maps the errors of the scheduler to responses; it returns
// the errors it does not know, for writeErr.
func scheduleError(w http.ResponseWriter, err error) error {
	switch {
	case errors.Is(err, schedule.ErrNotFound):
		writeError(w, http.StatusNotFound, "Schedule not found")
	case errors.Is(err, schedule.ErrTooMany):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, schedule.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusConflict, err.Error())
	default:
		return err
	}
	return nil
}

func (s *Server) scheduleCreate(w http.ResponseWriter, r *http.Request, owner string) error {
	var req schedule.CreateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	sc, err := s.opts.Schedules.Create(r.Context(), owner, &req)
	if err != nil {
		return scheduleError(w, err)
	}
	w.Header().Set("Location", "/api/v2/schedules/"+sc.ID)
	writeJSON(w, http.StatusCreated, sc)
	return nil
}

// pageParams reads page, size and a sort of two values, the first of
// which is ascending.
func pageParams(r *http.Request, asc, desc string) (*schedule.ListParams, error) {
	q := &query{r: r}
	p := &schedule.ListParams{Page: q.int("page", 1, 1, 1<<30), Size: q.int("size", 10, 1, 1000)}
	for _, sort := range r.URL.Query()["sort"] {
		switch sort {
		case asc:
			p.Ascending = true
		case desc:
		default:
			q.add("sort", "Input should be '"+asc+"' or '"+desc+"'", sort)
		}
	}
	return p, q.err()
}

func (s *Server) scheduleList(w http.ResponseWriter, r *http.Request, owner string) error {
	p, err := pageParams(r, "created_at", "-created_at")
	if err != nil {
		return err
	}
	page, err := s.opts.Schedules.List(r.Context(), owner, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) scheduleGet(w http.ResponseWriter, r *http.Request, owner string) error {
	sc, err := s.opts.Schedules.Get(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return scheduleError(w, err)
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) scheduleUpdate(w http.ResponseWriter, r *http.Request, owner string) error {
	var req schedule.UpdateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	sc, err := s.opts.Schedules.Update(r.Context(), owner, r.PathValue("id"), &req)
	if err != nil {
		return scheduleError(w, err)
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) scheduleDelete(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := s.opts.Schedules.Delete(r.Context(), owner, r.PathValue("id")); err != nil {
		return scheduleError(w, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) schedulePause(w http.ResponseWriter, r *http.Request, owner string) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	// The body is optional: none, null, or {"note": ...}.
	var req struct {
		Note *string `json:"note"`
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := decodeBytes(t, &req); err != nil {
			return err
		}
	}
	sc, err := s.opts.Schedules.Pause(r.Context(), owner, r.PathValue("id"), req.Note)
	if err != nil {
		return scheduleError(w, err)
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) scheduleResume(w http.ResponseWriter, r *http.Request, owner string) error {
	sc, err := s.opts.Schedules.Resume(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return scheduleError(w, err)
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) scheduleTrigger(w http.ResponseWriter, r *http.Request, owner string) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	run, made, err := s.opts.Schedules.Trigger(r.Context(), owner, r.PathValue("id"), key)
	if err != nil {
		return scheduleError(w, err)
	}
	if !made {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) scheduleRuns(w http.ResponseWriter, r *http.Request, owner string) error {
	p, err := pageParams(r, "scheduled_for", "-scheduled_for")
	if err != nil {
		return err
	}
	page, err := s.opts.Schedules.Runs(r.Context(), owner, r.PathValue("id"), p)
	if err != nil {
		return scheduleError(w, err)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
