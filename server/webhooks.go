package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// webhookRoutes adds the webhooks API (package platform/webhook):
//
//	POST   /api/v2/webhooks                          create (201, with the secret)
//	GET    /api/v2/webhooks                          list (paged)
//	GET    /api/v2/webhooks/events                   the event types
//	GET    /api/v2/webhooks/{webhook_id}             one
//	PATCH  /api/v2/webhooks/{webhook_id}             change the fields given
//	DELETE /api/v2/webhooks/{webhook_id}             204
//	POST   /api/v2/webhooks/{webhook_id}/rotate      a new secret
//	POST   /api/v2/webhooks/{webhook_id}/ping        a signed ping, now
//	GET    /api/v2/webhooks/{webhook_id}/deliveries  the delivery log (hrns
//	                                                 addition)
//
// A key sees only its own webhooks: another key's is 404. Without
// [Options.Webhooks] these answer 501.
func (s *Server) webhookRoutes() {
	for _, r := range []struct {
		pattern string
		body    body
		h       func(w http.ResponseWriter, r *http.Request, owner string) error
	}{
		{"POST /api/v2/webhooks", bodyJSON, s.hookCreate},
		{"GET /api/v2/webhooks", bodyNone, s.hookList},
		{"GET /api/v2/webhooks/events", bodyNone, s.hookEvents},
		{"GET /api/v2/webhooks/{webhook_id}", bodyNone, s.hookGet},
		{"PATCH /api/v2/webhooks/{webhook_id}", bodyJSON, s.hookUpdate},
		{"DELETE /api/v2/webhooks/{webhook_id}", bodyNone, s.hookDelete},
		{"POST /api/v2/webhooks/{webhook_id}/rotate", bodyIgnored, s.hookRotate},
		{"POST /api/v2/webhooks/{webhook_id}/ping", bodyIgnored, s.hookPing},
		{"GET /api/v2/webhooks/{webhook_id}/deliveries", bodyNone, s.hookDeliveries},
	} {
		h := r.h
		s.mux.Handle(r.pattern, s.api(r.body, func(w http.ResponseWriter, req *http.Request, owner string) error {
			if s.opts.Webhooks == nil {
				writeError(w, http.StatusNotImplemented, "webhooks are not enabled on this server")
				return nil
			}
			if raw := req.PathValue("webhook_id"); raw != "" {
				id, ok := canonicalUUID(raw)
				if !ok {
					return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"path", "webhook_id"}, Msg: "Input should be a valid UUID", Type: "uuid_parsing", Input: raw}}}
				}
				req.SetPathValue("webhook_id", id)
			}
			return hookError(w, h(w, req, owner))
		}))
	}
}

// canonicalUUID returns a UUID as the store keeps it: lower case, dashed.
func canonicalUUID(s string) (string, bool) {
	if !validUUID(s) {
		return "", false
	}
	x := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:], true
}

// hookError maps the errors of package webhook to responses; it returns
// the others, for writeErr.
func hookError(w http.ResponseWriter, err error) error {
	if ve, ok := errors.AsType[*webhook.ValidationError](err); ok {
		fields := make([]session.FieldError, len(ve.Fields))
		for i, f := range ve.Fields {
			fields[i] = session.FieldError{Loc: f.Loc, Msg: f.Msg, Type: f.Type}
		}
		return &session.ValidationError{Fields: fields}
	}
	switch {
	case errors.Is(err, webhook.ErrNotFound):
		writeError(w, http.StatusNotFound, "Webhook not found")
	case errors.Is(err, webhook.ErrTooMany):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrConflict):
		// Other writers kept changing it (as for a vault).
		writeError(w, http.StatusConflict, "the webhook is being changed by other requests: retry")
	case errors.Is(err, webhook.ErrPing):
		writeError(w, http.StatusBadGateway, err.Error())
	default:
		return err
	}
	return nil
}

func (s *Server) hookCreate(w http.ResponseWriter, r *http.Request, owner string) error {
	var p webhook.CreateParams
	if err := decode(r, &p); err != nil {
		return err
	}
	got, err := s.opts.Webhooks.Create(r.Context(), owner, &p)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v2/webhooks/"+got.ID)
	writeJSON(w, http.StatusCreated, got)
	return nil
}

func (s *Server) hookList(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	p := &webhook.ListParams{Page: q.int("page", 1, 1, 1<<30), Size: q.int("size", 10, 1, 1000)}
	for _, sort := range r.URL.Query()["sort"] {
		switch sort {
		case "created_at":
			p.Ascending = true
		case "-created_at":
			p.Ascending = false
		default:
			q.add("sort", "Input should be 'created_at' or '-created_at'", sort)
		}
	}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.opts.Webhooks.List(r.Context(), owner, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) hookEvents(w http.ResponseWriter, _ *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, webhook.EventTypes())
	return nil
}

func (s *Server) hookGet(w http.ResponseWriter, r *http.Request, owner string) error {
	got, err := s.opts.Webhooks.Get(r.Context(), owner, r.PathValue("webhook_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

func (s *Server) hookUpdate(w http.ResponseWriter, r *http.Request, owner string) error {
	var p webhook.UpdateParams
	if err := decode(r, &p); err != nil {
		return err
	}
	got, err := s.opts.Webhooks.Update(r.Context(), owner, r.PathValue("webhook_id"), &p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

func (s *Server) hookDelete(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := s.opts.Webhooks.Delete(r.Context(), owner, r.PathValue("webhook_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) hookRotate(w http.ResponseWriter, r *http.Request, owner string) error {
	got, err := s.opts.Webhooks.Rotate(r.Context(), owner, r.PathValue("webhook_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

func (s *Server) hookPing(w http.ResponseWriter, r *http.Request, owner string) error {
	code, err := s.opts.Webhooks.Ping(r.Context(), owner, r.PathValue("webhook_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"response_status": code})
	return nil
}

func (s *Server) hookDeliveries(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	p := &webhook.DeliveryParams{Page: q.int("page", 1, 1, 1<<30), Size: q.int("size", 10, 1, 100), State: r.URL.Query().Get("state")}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.opts.Webhooks.Deliveries(r.Context(), owner, r.PathValue("webhook_id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
