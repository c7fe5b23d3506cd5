package server

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// liveRoutes adds GET /api/v2/sessions/{id}/live: the latest picture of
// the session's browser while the session runs, for the page's live
// view (an hrns addition). Another key's session is 404, as everywhere;
// so is a session with no browser running now (it has not used one, it
// waits, or it has ended): its screenshots stay in its events.
//
// GET /api/v2/sessions/{id}/live/desktop is the same for the session's
// desktop (the computer tool's screen, in the model's view of it).
func (s *Server) liveRoutes() {
	s.mux.Handle("GET /api/v2/sessions/{id}/live", s.api(bodyNone, func(w http.ResponseWriter, r *http.Request, owner string) error {
		return s.live(w, r, owner, "browser", s.opts.LiveFrame)
	}))
	s.mux.Handle("GET /api/v2/sessions/{id}/live/desktop", s.api(bodyNone, func(w http.ResponseWriter, r *http.Request, owner string) error {
		return s.live(w, r, owner, "desktop", s.opts.LiveDesktopFrame)
	}))
}

// live answers with the latest frame frame gives of the session's what
// (its browser, its desktop).
func (s *Server) live(w http.ResponseWriter, r *http.Request, owner, what string, frame func(context.Context, string) ([]byte, time.Time, error)) error {
	id := r.PathValue("id")
	if _, err := s.m.Get(r.Context(), owner, id); err != nil {
		return err
	}
	if frame == nil {
		writeError(w, http.StatusNotFound, "No live "+what+": this server keeps none")
		return nil
	}
	img, at, err := frame(r.Context(), id)
	if err != nil || len(img) == 0 {
		writeError(w, http.StatusNotFound, "No live "+what+": the session is not running one now")
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", "image/jpeg")
	h.Set("Content-Length", strconv.Itoa(len(img)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Time", at.UTC().Format(time.RFC3339Nano))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(img); err != nil && r.Context().Err() == nil {
		s.log.Debug("writing a live frame", "err", err)
	}
	return nil
}
