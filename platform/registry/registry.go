// Package registry is the API of the agents, environments and skills each
// API key registers (/api/v2/agents, /api/v2/environments,
// /api/v2/skills): create, get (with the names an agent gives resolved),
// list, replace, patch and delete, each key's entries apart, beside the
// server's read-only entries.
//
// It is a service of the platform beside the sessions runtime (package
// session), which it reaches through [Runtime]: the runtime validates a
// body as sessions will read it, says which entries the server's
// configuration defines, and holds the store the entries live in.
// Sessions resolve the names they give of entries themselves
// ([session.Manager.ResolveAgent]).
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hrns-dev/hrns/internal/rawjson"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// EntryKind names one of the registries: agents, environments or skills.
type EntryKind string

// The registries.
const (
	EntryAgent       EntryKind = store.KindAgent
	EntryEnvironment EntryKind = store.KindEnvironment
	EntrySkill       EntryKind = store.KindSkill
)

// Errors of [Registry] methods. The server maps ErrEntryNotFound to 404,
// ErrEntryExists and ErrEntryConflict to 409, ErrReadOnly and ErrReserved
// to 403; invalid bodies are a *[session.ValidationError] (422).
var (
	// ErrEntryNotFound: the caller has no entry of the kind with the
	// name (another key's entries are not visible).
	ErrEntryNotFound = errors.New("not found")
	// ErrEntryExists: an entry of the kind already has the name: the
	// caller's, or one of the server's read-only entries.
	ErrEntryExists = errors.New("already exists")
	// ErrReadOnly: the entry is defined by the server's configuration;
	// callers may use it, not change or delete it.
	ErrReadOnly = errors.New("is defined by the server's configuration and is read-only")
	// ErrReserved: names in the h/ namespace are reserved for the
	// server's own entries.
	ErrReserved = errors.New("the h/ namespace is reserved for the server's entries")
	// ErrEntryConflict: the entry kept changing while it was being
	// updated; retry.
	ErrEntryConflict = errors.New("the entry changed while it was being updated; retry")
	// ErrTooManyEntries: the caller has registered as many entries of
	// the kind as a key may (1000); delete some first.
	ErrTooManyEntries = errors.New("too many entries")
)

// A Registry is the API of the registered agents, environments and
// skills of a [session.Manager]'s store: each API key (owner) has its own,
// and sees the server's read-only entries besides (the agents of
// [session.Options.Agents], their [session.Options.Catalog] names, and the
// environment kinds of [session.Options.Environments]). Sessions name registered entries by
// name (agents, skills) or id (environments).
//
// A Registry holds no state of its own: every read goes to the store, so
// that replicas sharing it agree.
type Registry struct {
	rt Runtime
	st store.Registry
}

// Runtime is what a [Registry] needs of the sessions runtime; a
// *[session.Manager] is one.
type Runtime interface {
	// ParseEntry validates a body of the kind as sessions read it and
	// returns it as the owner's entry ([session.Manager.ParseEntry]).
	ParseEntry(kind, owner string, body []byte) (*store.Entry, error)
	// BuiltinEntries are the server's read-only entries of the kind
	// ([session.Manager.BuiltinEntries]).
	BuiltinEntries(kind string) []session.BuiltinEntry
	// Entries is the store of the registered entries.
	Entries() store.Registry
	// CheckAgentEnvironments checks an agent's environments, their kinds
	// known ([session.Manager.CheckAgentEnvironments]).
	CheckAgentEnvironments(a *session.AgentSpec, kindOf func(id string) string, loc ...any) error
}

// New returns the registries of rt's store. A Registry holds no state: a
// new one per call is as good as a kept one.
func New(rt Runtime) *Registry { return &Registry{rt: rt, st: rt.Entries()} }

// EntryListParams select a page of [Registry.List].
type EntryListParams struct {
	// Name keeps entries whose name (an environment's id) contains it,
	// ignoring ASCII case.
	Name string
	// Search keeps entries whose name or description contains it.
	Search string
	// Type keeps environments of this kind ("web", "desktop").
	Type string
	// Sort is "created_at", "-created_at" (the default), "name" or
	// "-name" (the name of an agent or skill, the id of an environment).
	Sort string
	// Page (from 1) and Size (default 10) select the page.
	Page, Size int
}

// An EntryPage is a page of entries: each an [session.AgentSpec],
// [session.EnvironmentSpec] or [session.SkillSpec] as JSON.
type EntryPage struct {
	Items []json.RawMessage `json:"items"`
	Total int               `json:"total"`
	Page  int               `json:"page"`
}

// builtins returns the server's read-only entries of the kind, by name.
func (r *Registry) builtins(kind EntryKind) []session.BuiltinEntry {
	return r.rt.BuiltinEntries(string(kind))
}

func (r *Registry) builtin(kind EntryKind, name string) (session.BuiltinEntry, bool) {
	for _, b := range r.builtins(kind) {
		if b.Name == name {
			return b, true
		}
	}
	return session.BuiltinEntry{}, false
}

// parse validates a body of the kind and returns it as an entry.
func (r *Registry) parse(kind EntryKind, owner string, body []byte) (*store.Entry, error) {
	return r.rt.ParseEntry(string(kind), owner, body)
}

// doc is the entry as the API returns it: its spec, with a skill's files.
func doc(e *store.Entry) json.RawMessage { return session.EntryDoc(e) }

func isReserved(name string) bool { return strings.HasPrefix(name, "h/") }

// Create validates body and registers it as the owner's entry of the kind.
//
// Errors: a *[session.ValidationError] for an invalid body or a reference to an
// unknown entry, [ErrEntryExists], [ErrReserved].
func (r *Registry) Create(ctx context.Context, kind EntryKind, owner string, body []byte) (json.RawMessage, error) {
	e, err := r.parse(kind, owner, body)
	if err != nil {
		return nil, err
	}
	if _, ok := r.builtin(kind, e.Name); ok {
		return nil, fmt.Errorf("%s %q %w (the server defines it)", kind, e.Name, ErrEntryExists)
	}
	if isReserved(e.Name) {
		return nil, fmt.Errorf("%s %q: %w", kind, e.Name, ErrReserved)
	}
	if err := r.checkRefs(ctx, owner, e); err != nil {
		return nil, err
	}
	// Concurrent creations may pass this check together: the bound is
	// approximate by their number.
	if _, n, err := r.st.ListEntries(ctx, &store.EntryListParams{Kind: string(kind), Owner: owner, Limit: 1}); err != nil {
		return nil, err
	} else if n >= maxEntries {
		return nil, fmt.Errorf("%w: this API key has %d %ss, the most it may register; delete some first", ErrTooManyEntries, n, kind)
	}
	got, err := r.st.CreateEntry(ctx, e)
	if errors.Is(err, store.ErrEntryExists) {
		return nil, fmt.Errorf("%s %q %w", kind, e.Name, ErrEntryExists)
	}
	if err != nil {
		return nil, err
	}
	return session.RedactMCPServers(doc(got)), nil
}

// Get returns the owner's entry, or the server's read-only entry, with the
// name. With resolve, the names an agent gives of environments, skills and
// subagents are replaced by their definitions (recursively, to a bounded
// depth); names that no longer resolve stay names.
//
// Errors: [ErrEntryNotFound].
func (r *Registry) Get(ctx context.Context, kind EntryKind, owner, name string, resolve bool) (json.RawMessage, error) {
	out, err := r.get(ctx, kind, owner, name)
	if err != nil || !resolve || kind != EntryAgent {
		return session.RedactMCPServers(out), err
	}
	var a session.AgentSpec
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, err
	}
	if err := r.materialise(ctx, owner, &a, 0, &budget{lookups: maxLookups, bytes: maxResolvedBytes}); err != nil {
		return nil, err
	}
	out, err = json.Marshal(a)
	return session.RedactMCPServers(out), err
}

// budget bounds the work of resolving references: the entries looked up,
// and the bytes of the definitions they add. Once spent, names stay
// names.
type budget struct {
	lookups, bytes int
}

func (r *Registry) get(ctx context.Context, kind EntryKind, owner, name string) (json.RawMessage, error) {
	if b, ok := r.builtin(kind, name); ok {
		return b.Doc, nil
	}
	e, err := r.st.GetEntry(ctx, string(kind), owner, name)
	if errors.Is(err, store.ErrEntryNotFound) {
		return nil, fmt.Errorf("%s %q %w", kind, name, ErrEntryNotFound)
	}
	if err != nil {
		return nil, err
	}
	return doc(e), nil
}

// materialise replaces the names of a's environments, skills and
// subagents by their definitions.
func (r *Registry) materialise(ctx context.Context, owner string, a *session.AgentSpec, depth int, b *budget) error {
	for _, list := range []struct {
		kind EntryKind
		refs []json.RawMessage
	}{{EntryEnvironment, a.Environments}, {EntrySkill, a.Skills}, {EntryAgent, a.Subagents}} {
		for i, raw := range list.refs {
			name, ok := rawjson.String(raw)
			if !ok {
				if list.kind == EntryAgent && depth < maxInlineDepth {
					var sub session.AgentSpec
					if json.Unmarshal(raw, &sub) == nil {
						if err := r.materialise(ctx, owner, &sub, depth+1, b); err != nil {
							return err
						}
						list.refs[i], _ = json.Marshal(sub)
					}
				}
				continue
			}
			if list.kind == EntryAgent && (depth >= maxInlineDepth || name == a.Name) || b.lookups <= 0 || b.bytes <= 0 {
				continue
			}
			b.lookups--
			got, err := r.get(ctx, list.kind, owner, name)
			if errors.Is(err, ErrEntryNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if list.kind == EntryAgent {
				var sub session.AgentSpec
				if err := json.Unmarshal(got, &sub); err != nil {
					return err
				}
				if err := r.materialise(ctx, owner, &sub, depth+1, b); err != nil {
					return err
				}
				got, _ = json.Marshal(sub)
			}
			if len(got) > b.bytes {
				b.bytes = 0
				continue
			}
			b.bytes -= len(got)
			list.refs[i] = got
		}
	}
	return nil
}

// checkRefs checks that the names an agent gives of environments, skills
// and subagents are entries the owner sees.
func (r *Registry) checkRefs(ctx context.Context, owner string, e *store.Entry) error {
	if e.Kind != store.KindAgent {
		return nil
	}
	var a session.AgentSpec
	if err := json.Unmarshal(e.Spec, &a); err != nil {
		return err
	}
	var v validation
	seen := map[string]bool{} // kind + name: known
	if err := r.checkAgentRefs(ctx, &v, owner, &a, []any{"body"}, seen); err != nil {
		return err
	}
	if err := v.err(); err != nil {
		return err
	}
	// The kinds of the registered environments it names: at most one of
	// each, and no user's desktop on a subagent. Each id is read once;
	// checkAgentRefs bounded their number.
	kinds := map[string]string{}
	var lookupErr error
	kindOf := func(id string) string {
		if k, ok := kinds[id]; ok || lookupErr != nil {
			return k
		}
		kinds[id] = ""
		doc, err := r.get(ctx, EntryEnvironment, owner, id)
		if err != nil {
			if !errors.Is(err, ErrEntryNotFound) {
				lookupErr = err
			}
			return ""
		}
		var env session.EnvironmentSpec
		if json.Unmarshal(doc, &env) == nil {
			kinds[id] = env.Kind
		}
		return kinds[id]
	}
	err := r.rt.CheckAgentEnvironments(&a, kindOf, "body")
	if lookupErr != nil {
		return lookupErr
	}
	return err
}

// checkAgentRefs looks up the references of a and of its inline
// subagents, each name once, at most maxLookups of them.
func (r *Registry) checkAgentRefs(ctx context.Context, v *validation, owner string, a *session.AgentSpec, loc []any, seen map[string]bool) error {
	for _, list := range []struct {
		field string
		kind  EntryKind
		refs  []json.RawMessage
	}{{"environments", EntryEnvironment, a.Environments}, {"skills", EntrySkill, a.Skills}, {"subagents", EntryAgent, a.Subagents}} {
		for i, raw := range list.refs {
			name, ok := rawjson.String(raw)
			if !ok {
				if list.kind == EntryAgent {
					var sub session.AgentSpec
					if json.Unmarshal(raw, &sub) == nil {
						if err := r.checkAgentRefs(ctx, v, owner, &sub, at(loc, list.field, i), seen); err != nil {
							return err
						}
					}
				}
				continue
			}
			if list.kind == EntryAgent && name == a.Name {
				v.add("an agent cannot be its own subagent", at(loc, list.field, i)...)
				continue
			}
			key := string(list.kind) + "\x00" + name
			known, looked := seen[key]
			if !looked {
				if len(seen) >= maxLookups {
					v.add(fmt.Sprintf("an agent names at most %d distinct entries, its inline subagents included", maxLookups), at(loc, list.field, i)...)
					return nil
				}
				_, err := r.get(ctx, list.kind, owner, name)
				if err != nil && !errors.Is(err, ErrEntryNotFound) {
					return err
				}
				known = err == nil
				seen[key] = known
			}
			if !known {
				v.add(fmt.Sprintf("unknown %s %q: register it first, or define it inline", list.kind, name), at(loc, list.field, i)...)
			}
		}
	}
	return nil
}

// List returns a page of the entries of the kind that the owner sees: the
// server's read-only entries first (by name), then the owner's in the
// order p asks.
//
// Errors: a *[session.ValidationError] for an unknown sort.
func (r *Registry) List(ctx context.Context, kind EntryKind, owner string, p *EntryListParams) (*EntryPage, error) {
	q := *p
	if q.Page < 1 {
		q.Page = 1
	}
	if q.Size < 1 {
		q.Size = 10
	}
	sort := q.Sort
	switch sort {
	case "", store.SortCreatedDesc, store.SortCreatedAsc, store.SortNameAsc, store.SortNameDesc:
	default:
		return nil, invalid(fmt.Sprintf("unknown sort %q", sort), "query", "sort")
	}
	var fixed []session.BuiltinEntry
	for _, b := range r.builtins(kind) {
		if q.Type != "" && b.Type != q.Type || q.Name != "" && !containsFold(b.Name, q.Name) ||
			q.Search != "" && !containsFold(b.Name, q.Search) && !containsFold(b.Description, q.Search) {
			continue
		}
		fixed = append(fixed, b)
	}
	off := (q.Page - 1) * q.Size
	page := &EntryPage{Items: []json.RawMessage{}, Page: q.Page}
	for i := off; i < len(fixed) && len(page.Items) < q.Size; i++ {
		page.Items = append(page.Items, fixed[i].Doc)
	}
	stored, total, err := r.st.ListEntries(ctx, &store.EntryListParams{
		Kind: string(kind), Owner: owner, Type: q.Type, Name: q.Name, Search: q.Search, Sort: sort,
		Offset: max(off-len(fixed), 0), Limit: max(q.Size-len(page.Items), 1),
	})
	if err != nil {
		return nil, err
	}
	for _, e := range stored {
		if len(page.Items) == q.Size {
			break
		}
		page.Items = append(page.Items, session.RedactMCPServers(doc(e)))
	}
	page.Total = len(fixed) + total
	return page, nil
}

// containsFold reports whether s contains sub, ignoring ASCII case, as the
// stores match.
func containsFold(s, sub string) bool {
	return strings.Contains(asciiLower(s), asciiLower(sub))
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Replace replaces the owner's entry with body, whose name (an
// environment's id) must be the entry's: renames are not supported.
//
// Errors: a *[session.ValidationError], [ErrEntryNotFound], [ErrReadOnly],
// [ErrEntryConflict].
func (r *Registry) Replace(ctx context.Context, kind EntryKind, owner, name string, body []byte) (json.RawMessage, error) {
	return r.update(ctx, kind, owner, name, func(*store.Entry) ([]byte, error) { return body, nil })
}

// patchable are the fields a PATCH may change, by kind.
var patchable = map[EntryKind][]string{
	EntryAgent:       {"description", "environments", "model", "reasoning_effort", "instructions", "subagents", "skills", "answer_format", "tools", "max_steps"},
	EntryEnvironment: {"host", "start_url", "headless", "session_id", "mode", "page_chars", "image", "lazy", "vault_id", "browser_profile_id", "use_default_browser_profile", "persist_browser_profile", "network", "mcp_servers"},
	EntrySkill:       {"description", "body", "source", "url_pattern", "files"},
}

// Patch changes the fields of the owner's entry that body sets; other
// fields are kept. A field set to null returns to its default (null, or
// the API's default value); a required field cannot be null. Fields that
// cannot change (name, id, kind) are ignored. The result is validated as
// a whole.
//
// Errors: as [Registry.Replace].
func (r *Registry) Patch(ctx context.Context, kind EntryKind, owner, name string, body []byte) (json.RawMessage, error) {
	var patch map[string]json.RawMessage
	if err := session.DecodeObject(body, &patch, "body"); err != nil {
		return nil, err
	}
	return r.update(ctx, kind, owner, name, func(cur *store.Entry) ([]byte, error) {
		var merged map[string]json.RawMessage
		if err := json.Unmarshal(doc(cur), &merged); err != nil {
			return nil, err
		}
		for _, f := range patchable[kind] {
			raw, ok := patch[f]
			switch {
			case !ok:
			case rawjson.IsNull(raw):
				delete(merged, f)
			default:
				merged[f] = raw
			}
		}
		return json.Marshal(merged)
	})
}

// update replaces the entry with what next makes of it, at the version it
// was read, retrying a few times when it changes meanwhile.
func (r *Registry) update(ctx context.Context, kind EntryKind, owner, name string, next func(*store.Entry) ([]byte, error)) (json.RawMessage, error) {
	if _, ok := r.builtin(kind, name); ok {
		return nil, fmt.Errorf("%s %q %w", kind, name, ErrReadOnly)
	}
	for range 5 {
		cur, err := r.st.GetEntry(ctx, string(kind), owner, name)
		if errors.Is(err, store.ErrEntryNotFound) {
			return nil, fmt.Errorf("%s %q %w", kind, name, ErrEntryNotFound)
		}
		if err != nil {
			return nil, err
		}
		body, err := next(cur)
		if err != nil {
			return nil, err
		}
		// A definition read back (its secrets redacted) and sent again
		// keeps the secrets it had.
		body = session.RestoreRedactedMCPServers(body, cur.Spec)
		e, err := r.parse(kind, owner, body)
		if err != nil {
			return nil, err
		}
		if e.Name != name {
			field := "name"
			if kind == EntryEnvironment {
				field = "id"
			}
			return nil, invalid(fmt.Sprintf("%s must match the URL identifier %q; renames are not supported", field, name), "body", field)
		}
		if err := r.checkRefs(ctx, owner, e); err != nil {
			return nil, err
		}
		e.Version = cur.Version
		got, err := r.st.UpdateEntry(ctx, e)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrEntryNotFound):
			return nil, fmt.Errorf("%s %q %w", kind, name, ErrEntryNotFound)
		case err != nil:
			return nil, err
		}
		return session.RedactMCPServers(doc(got)), nil
	}
	return nil, fmt.Errorf("%s %q: %w", kind, name, ErrEntryConflict)
}

// Delete removes the owner's entry. Agents that name it keep the name;
// sessions created after cannot use them until it is registered again.
//
// Errors: [ErrEntryNotFound], [ErrReadOnly].
func (r *Registry) Delete(ctx context.Context, kind EntryKind, owner, name string) error {
	if _, ok := r.builtin(kind, name); ok {
		return fmt.Errorf("%s %q %w", kind, name, ErrReadOnly)
	}
	err := r.st.DeleteEntry(ctx, string(kind), owner, name)
	if errors.Is(err, store.ErrEntryNotFound) {
		return fmt.Errorf("%s %q %w", kind, name, ErrEntryNotFound)
	}
	return err
}

// The bounds of the registries.
var (
	// maxEntries bounds the entries of each kind a key registers.
	maxEntries = 1000
	// maxResolvedBytes bounds the definitions GET ?resolve=true adds.
	maxResolvedBytes = 8 << 20
)

const (
	// maxLookups bounds the references one check or resolution looks up.
	maxLookups = 256
	// maxInlineDepth bounds the nesting of inline subagents a resolution
	// follows: the depth session's validation allows.
	maxInlineDepth = 3
)

// validation collects field errors, as session's validation reports them.
type validation struct{ fields []session.FieldError }

func (v *validation) add(msg string, loc ...any) {
	v.fields = append(v.fields, session.FieldError{Loc: loc, Msg: msg, Type: "value_error"})
}

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &session.ValidationError{Fields: v.fields}
}

// invalid returns a validation error about one field.
func invalid(msg string, loc ...any) *session.ValidationError {
	return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: msg, Type: "value_error"}}}
}

func at(loc []any, more ...any) []any { return append(append([]any{}, loc...), more...) }
