package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hrns-dev/hrns/platform/registry"
)

// registryKind describes the routes of one registry of the API.
type registryKind struct {
	kind registry.EntryKind
	// path is the collection's path; title names an entry in messages.
	path, title string
	// nameParam is the list filter on names; sortName the sort key of
	// names.
	nameParam, sortName string
}

var registries = []registryKind{
	{registry.EntryAgent, "/api/v2/agents", "Agent", "agent_name", "agent_name"},
	{registry.EntryEnvironment, "/api/v2/environments", "Environment", "id", "id"},
	{registry.EntrySkill, "/api/v2/skills", "Skill", "name", "name"},
}

// registryRoutes adds the routes of the agents, environments and skills
// registries. Names may hold a slash ("acme/reviewer"), so the name is
// the rest of the path.
func (s *Server) registryRoutes() {
	for _, g := range registries {
		for _, r := range []struct {
			method string
			item   bool
			body   body
			h      func(w http.ResponseWriter, r *http.Request, owner string) error
		}{
			{"POST", false, bodyJSON, s.regCreate(g)},
			{"GET", false, bodyNone, s.regList(g)},
			{"GET", true, bodyNone, s.regGet(g)},
			{"PUT", true, bodyJSON, s.regReplace(g)},
			{"PATCH", true, bodyJSON, s.regPatch(g)},
			{"DELETE", true, bodyNone, s.regDelete(g)},
		} {
			pattern := r.method + " " + g.path
			if r.item {
				pattern += "/{name...}"
			}
			s.mux.Handle(pattern, s.api(r.body, r.h))
		}
	}
}

// readBody reads a request body, within the server's limit, refusing
// text no store can hold (checkText).
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, fmt.Errorf("%w (limit %d bytes)", errBodyTooLarge, mbe.Limit)
	}
	if err != nil {
		return nil, err
	}
	if err := checkText(body); err != nil {
		return nil, err
	}
	return body, nil
}

// regError maps the errors of a registry to responses; it returns the
// errors it does not know, for writeErr.
func regError(w http.ResponseWriter, g registryKind, err error) error {
	switch {
	case errors.Is(err, registry.ErrEntryNotFound):
		writeError(w, http.StatusNotFound, g.title+" not found")
	case errors.Is(err, registry.ErrEntryExists), errors.Is(err, registry.ErrEntryConflict), errors.Is(err, registry.ErrTooManyEntries):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, registry.ErrReadOnly), errors.Is(err, registry.ErrReserved):
		writeError(w, http.StatusForbidden, err.Error())
	default:
		return err
	}
	return nil
}

func itemName(r *http.Request) string { return r.PathValue("name") }

func (s *Server) regCreate(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		doc, err := registry.New(s.m).Create(r.Context(), g.kind, owner, body)
		if err != nil {
			return regError(w, g, err)
		}
		var named struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		}
		if decodeBytes(doc, &named) == nil {
			w.Header().Set("Location", g.path+"/"+escapeName(named.Name+named.ID))
		}
		writeJSON(w, http.StatusCreated, doc)
		return nil
	}
}

// escapeName escapes each segment of a name for a URL path.
func escapeName(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func (s *Server) regList(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		q := &query{r: r}
		values := r.URL.Query()
		p := &registry.EntryListParams{
			Page:   q.int("page", 1, 1, 1<<30),
			Size:   q.int("size", 10, 1, 1000),
			Name:   values.Get(g.nameParam),
			Search: q.search("search"),
		}
		if g.kind == registry.EntryEnvironment {
			switch kind := values.Get("kind"); kind {
			case "", "web", "desktop":
				p.Type = kind
			default:
				q.add("kind", "Input should be 'web' or 'desktop'", kind)
			}
		}
		sorts := values["sort"]
		for _, sort := range sorts {
			switch sort {
			case "created_at", "-created_at":
				p.Sort = sort
			case g.sortName:
				p.Sort = "name"
			case "-" + g.sortName:
				p.Sort = "-name"
			default:
				q.add("sort", fmt.Sprintf("Input should be 'created_at', '-created_at', '%s' or '-%s'", g.sortName, g.sortName), sort)
			}
		}
		if len(sorts) > 1 {
			q.add("sort", "hrns sorts by one field at a time", strings.Join(sorts, ","))
		}
		if err := q.err(); err != nil {
			return err
		}
		page, err := registry.New(s.m).List(r.Context(), g.kind, owner, p)
		if err != nil {
			return regError(w, g, err)
		}
		writeJSON(w, http.StatusOK, page)
		return nil
	}
}

func (s *Server) regGet(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		q := &query{r: r}
		resolve := false
		if g.kind == registry.EntryAgent {
			resolve = q.bool("resolve", false)
		}
		if err := q.err(); err != nil {
			return err
		}
		doc, err := registry.New(s.m).Get(r.Context(), g.kind, owner, itemName(r), resolve)
		if err != nil {
			return regError(w, g, err)
		}
		writeJSON(w, http.StatusOK, doc)
		return nil
	}
}

func (s *Server) regReplace(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		doc, err := registry.New(s.m).Replace(r.Context(), g.kind, owner, itemName(r), body)
		if err != nil {
			return regError(w, g, err)
		}
		writeJSON(w, http.StatusOK, doc)
		return nil
	}
}

func (s *Server) regPatch(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		doc, err := registry.New(s.m).Patch(r.Context(), g.kind, owner, itemName(r), body)
		if err != nil {
			return regError(w, g, err)
		}
		writeJSON(w, http.StatusOK, doc)
		return nil
	}
}

func (s *Server) regDelete(g registryKind) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		if err := registry.New(s.m).Delete(r.Context(), g.kind, owner, itemName(r)); err != nil {
			return regError(w, g, err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
