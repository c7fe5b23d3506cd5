package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/store"
)

// The re-encryption of MCP servers' secrets under a new key: the middle
// step of a rotation of the vault keys (see [Manager.ReencryptMCPSecrets]).
// Each value is opened with the key that sealed it and the associated
// data of where it is stored (its owner or session, server, field and
// name: the row's own, never another's), and sealed again with the same
// associated data under the primary key: a value moved into another
// owner's or session's row does not open there, so it is not sealed for
// it either, and stays as it is.

// MCPReencryption is what [Manager.ReencryptMCPSecrets] did.
type MCPReencryption struct {
	// KeyID is the primary key, under which the values were sealed
	// again.
	KeyID string
	// Sessions, Entries and Schedules count what was written again: the
	// sessions (their request and state), registered agents and
	// environments, and schedules holding a value another key sealed.
	Sessions, Entries, Schedules int
	// Values counts the values sealed again.
	Values int
	// Failed counts the values that do not open with the configured keys
	// (their key is not configured, or they belong to another owner or
	// session): they are left as they are, and each is logged.
	Failed int
	// Undecryptable counts the sessions, registered entries and
	// schedules holding at least one of the values counted in Failed.
	Undecryptable int
	// Skipped counts the registered entries and schedules changed by
	// others at each of reencryptTries attempts, and the sessions whose
	// state does not decode: left, with their values, for the next start.
	Skipped int
}

// Remaining is how many values still need a key other than the primary:
// those that failed and those of what was skipped (counted as one each).
func (r *MCPReencryption) Remaining() int { return r.Failed + r.Skipped }

// reencryptTries bounds the attempts at writing one registered entry or
// schedule that others keep changing. A session is written through the
// commit path, which retries until it writes.
const reencryptTries = 5

// reencryptPage is how many rows a page of the re-encryption reads.
const reencryptPage = 100

// ReencryptMCPSecrets seals again under the primary key of
// [MCPServerOptions.Secrets] every env and headers value of MCP servers
// that another configured key sealed, in what the store keeps of every
// owner: sessions' requests and states (every session, ended ones
// included: a message may resume those that are idle or completed, and a
// session read later must not need the old key), registered agents and
// environments, and schedules' templates. Once it ran with every replica
// on the new keyring, the old key may be dropped. hrns serve runs it at
// start.
//
// It reads the store a page at a time. Sessions are written through the
// commit path: a change committed meanwhile (a worker's step, a caller's
// message, on this replica or another) makes the write fail its version
// check, and the change is made again on the session as committed, so
// that no commit is lost and no newer version overwritten. Registered
// entries and schedules are written under their version too, read again
// on a conflict, and left for the next start (counted in Skipped) after
// reencryptTries conflicts. It is safe to run on several replicas at once.
//
// Without a Sealer it does nothing. The error is the store's, or a
// failure to seal; what was written before it stays written.
func (m *Manager) ReencryptMCPSecrets(ctx context.Context) (*MCPReencryption, error) {
	s, _ := m.mcpSecrets()
	if s == nil {
		return &MCPReencryption{}, nil
	}
	// The primary key is the one Seal names.
	primary, _, err := s.Seal(nil, []byte("hrns mcp secret v1 primary key"))
	if err != nil {
		return nil, fmt.Errorf("re-encrypting MCP servers' secrets: %w", err)
	}
	r := &reencryption{m: m, s: s, out: &MCPReencryption{KeyID: primary}}
	defer func() {
		out := *r.out
		m.mcpHealth.mu.Lock()
		m.mcpHealth.atStart = &out
		m.mcpHealth.mu.Unlock()
		if out.Failed > 0 {
			// Each value is logged; this is the count.
			m.log.Warn("MCP secrets re-encryption: values cannot be decrypted with the configured keys; their servers are left out of runs",
				"values", out.Failed, "definitions", out.Undecryptable)
		}
	}()
	for _, step := range []func(context.Context) error{r.entries, r.schedules, r.sessions} {
		if err := step(ctx); err != nil {
			return r.out, fmt.Errorf("re-encrypting MCP servers' secrets under key %s: %w", primary, err)
		}
	}
	return r.out, nil
}

// failed counts in r.out the values of c that do not decrypt, and their
// document.
func (r *reencryption) failed(c *resealed) {
	r.out.Failed += c.failed
	if c.failed > 0 {
		r.out.Undecryptable++
	}
}

// A reencryption is one run of ReencryptMCPSecrets.
type reencryption struct {
	m   *Manager
	s   Sealer
	out *MCPReencryption
}

func (r *reencryption) params() *store.SealedParams {
	return &store.SealedParams{Prefix: sealedPrefix, KeyID: r.out.KeyID, Limit: reencryptPage}
}

// A resealed counts what resealing one document did.
type resealed struct {
	values int
	failed int
}

// value returns val sealed again under the primary key, with the
// associated data of scope, server, field and name, when another key
// sealed it; val itself otherwise (not sealed, already under the
// primary, or not opening: counted in failed, and logged).
func (r *reencryption) value(where string, c *resealed, scope, server, field, name, val string) (string, error) {
	if !isSealed(val) {
		return val, nil
	}
	id, enc, _ := strings.Cut(strings.TrimPrefix(val, sealedPrefix), ":")
	if id == r.out.KeyID {
		return val, nil
	}
	aad := mcpAAD(scope, server, field, name)
	ct, err := base64.RawURLEncoding.DecodeString(enc)
	var p []byte
	if err == nil {
		p, err = r.s.Open(id, ct, aad)
	}
	if err != nil {
		c.failed++
		r.m.log.Error("MCP secrets re-encryption: a value cannot be decrypted", "in", where, "server", server, "field", field, "name", name, "key", id)
		return val, nil
	}
	nid, nct, err := r.s.Seal(p, aad)
	clear(p)
	if err != nil {
		return "", fmt.Errorf("the value of %s of MCP server %q in %s could not be encrypted: %w", name, server, where, err)
	}
	c.values++
	return sealedPrefix + nid + ":" + base64.RawURLEncoding.EncodeToString(nct), nil
}

// servers reseals the env and headers values of a decoded mcp_servers
// list's entries (maps of a document decoded into any), in scope.
func (r *reencryption) servers(where string, c *resealed, scope string, list any) error {
	items, _ := list.([]any)
	for _, it := range items {
		srv, ok := it.(map[string]any)
		if !ok {
			continue
		}
		name, _ := srv["name"].(string)
		for _, f := range []string{"env", "headers"} {
			vals, _ := srv[f].(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(vals)) {
				v, ok := vals[k].(string)
				if !ok {
					continue
				}
				out, err := r.value(where, c, scope, name, f, k, v)
				if err != nil {
					return err
				}
				vals[k] = out
			}
		}
	}
	return nil
}

// tree reseals, for owner scope, the mcp_servers lists anywhere in v, as
// sealTree seals them.
func (r *reencryption) tree(where string, c *resealed, scope string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			var err error
			if k == "mcp_servers" {
				err = r.servers(where, c, scope, x[k])
			} else {
				err = r.tree(where, c, scope, x[k])
			}
			if err != nil {
				return err
			}
		}
	case []any:
		for _, val := range x {
			if err := r.tree(where, c, scope, val); err != nil {
				return err
			}
		}
	}
	return nil
}

// doc returns doc, an owner's definition (a request, a registered entry,
// a schedule), with its values resealed for owner; doc itself when none
// was.
func (r *reencryption) doc(where string, c *resealed, owner string, doc json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(doc, []byte(sealedPrefix)) {
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc, nil // not a document: nothing of it was sealed
	}
	before := c.values
	if err := r.tree(where, c, ownerScope(owner), v); err != nil {
		return nil, err
	}
	if c.values == before {
		return doc, nil
	}
	return json.Marshal(v)
}

// spec returns the spec of session id of owner with its values resealed:
// its servers' for the session, its subagents' definitions for the owner;
// nil when none was. sp is not modified (it may be shared).
func (r *reencryption) spec(c *resealed, owner, id string, sp *spec) (*spec, error) {
	where := "session " + id
	out := *sp
	before := c.values
	out.MCPServers = slices.Clone(sp.MCPServers)
	for i := range out.MCPServers {
		srv := &out.MCPServers[i]
		for _, f := range []struct {
			name string
			vals *map[string]string
		}{{"env", &srv.Env}, {"headers", &srv.Headers}} {
			if len(*f.vals) == 0 {
				continue
			}
			vals := maps.Clone(*f.vals)
			for _, k := range slices.Sorted(maps.Keys(vals)) {
				v, err := r.value(where, c, sessionScope(id), srv.Name, f.name, k, vals[k])
				if err != nil {
					return nil, err
				}
				vals[k] = v
			}
			*f.vals = vals
		}
	}
	out.Subagents = slices.Clone(sp.Subagents)
	for i := range out.Subagents {
		raw, err := r.doc(where, c, owner, out.Subagents[i].Agent)
		if err != nil {
			return nil, err
		}
		out.Subagents[i].Agent = raw
	}
	if c.values == before {
		return nil, nil
	}
	return &out, nil
}

// entries reseals the registered agents and environments (and any entry
// holding a sealed value) of every owner.
func (r *reencryption) entries(ctx context.Context) error {
	p := r.params()
	for {
		page, err := r.m.st.EntriesSealed(ctx, p)
		if err != nil || len(page) == 0 {
			return err
		}
		for _, e := range page {
			p.AfterEntry = &store.Entry{Kind: e.Kind, Owner: e.Owner, Name: e.Name}
			if err := r.entry(ctx, e); err != nil {
				return err
			}
		}
	}
}

func (r *reencryption) entry(ctx context.Context, e *store.Entry) error {
	written, err := r.rewrite(ctx, e.Kind+" "+e.Name, e.Owner, e.Spec, store.ErrEntryNotFound,
		func(ctx context.Context, spec []byte) error {
			e.Spec = spec
			_, err := r.m.st.UpdateEntry(ctx, e)
			return err
		},
		func(ctx context.Context) ([]byte, error) {
			fresh, err := r.m.st.GetEntry(ctx, e.Kind, e.Owner, e.Name)
			if err != nil {
				return nil, err
			}
			e = fresh
			return e.Spec, nil
		})
	if written {
		r.out.Entries++
	}
	return err
}

// rewrite reseals one document of owner (an entry's or a schedule's
// spec) and writes it back through write, whose version check refuses it
// when the document changed meanwhile (store.ErrConflict): it is then
// read again through reread and resealed, up to reencryptTries times
// (then skipped, for the next start). A document deleted meanwhile
// (notFound) is left. It reports whether the document was written.
func (r *reencryption) rewrite(ctx context.Context, where, owner string, spec []byte, notFound error,
	write func(context.Context, []byte) error, reread func(context.Context) ([]byte, error)) (bool, error) {
	for try := 1; ; try++ {
		c := &resealed{}
		sealed, err := r.doc(where, c, owner, spec)
		if err != nil {
			return false, err
		}
		if c.values == 0 {
			r.failed(c)
			return false, nil
		}
		err = write(ctx, sealed)
		switch {
		case err == nil:
			r.out.Values += c.values
			r.failed(c)
			return true, nil
		case errors.Is(err, notFound):
			return false, nil // deleted meanwhile
		case !errors.Is(err, store.ErrConflict):
			return false, err
		case try == reencryptTries:
			r.out.Skipped++
			return false, nil
		}
		// Changed meanwhile: read it again.
		if spec, err = reread(ctx); errors.Is(err, notFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
}

// schedules reseals the templates of the schedules of every owner.
func (r *reencryption) schedules(ctx context.Context) error {
	p := r.params()
	for {
		page, err := r.m.st.SchedulesSealed(ctx, p)
		if err != nil || len(page) == 0 {
			return err
		}
		for _, sc := range page {
			p.After = sc.ID
			if err := r.schedule(ctx, sc); err != nil {
				return err
			}
		}
	}
}

func (r *reencryption) schedule(ctx context.Context, sc *store.Schedule) error {
	written, err := r.rewrite(ctx, "schedule "+sc.ID, sc.Owner, sc.Spec, store.ErrScheduleNotFound,
		func(ctx context.Context, spec []byte) error {
			sc.Spec = spec
			_, err := r.m.st.UpdateSchedule(ctx, sc)
			return err
		},
		func(ctx context.Context) ([]byte, error) {
			// Changed (or fired) meanwhile.
			fresh, err := r.m.st.GetSchedule(ctx, sc.Owner, sc.ID)
			if err != nil {
				return nil, err
			}
			sc = fresh
			return sc.Spec, nil
		})
	if written {
		r.out.Schedules++
	}
	return err
}

// sessions reseals the requests and states of the sessions of every
// owner, each through the commit path.
func (r *reencryption) sessions(ctx context.Context) error {
	p := r.params()
	for {
		ids, err := r.m.st.SessionsSealed(ctx, p)
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, id := range ids {
			p.After = id
			if err := r.session(ctx, id); err != nil {
				return err
			}
		}
	}
}

func (r *reencryption) session(ctx context.Context, id string) error {
	var c *resealed
	var sealErr error
	wrote, lost := false, false
	_, _, err := r.m.update(ctx, id, &store.UpdateOptions{WriteRequest: true}, func(s *store.Session, st *state) ([]store.Event, error) {
		// Made again on each attempt, on the session as committed.
		c, wrote, lost = &resealed{}, false, false
		if st.Spec.spec == nil {
			// An ended session whose state does not decode: a
			// commit would write an empty one over it.
			lost = true
			return nil, errNoChange
		}
		req, err := r.doc("session "+id, c, s.Owner, s.Request)
		if err != nil {
			sealErr = err
			return nil, err
		}
		sp, err := r.spec(c, s.Owner, id, st.Spec.spec)
		if err != nil {
			sealErr = err
			return nil, err
		}
		if c.values == 0 {
			return nil, errNoChange
		}
		s.Request = req
		if sp != nil {
			st.Spec = agentSpec{spec: sp}
		}
		wrote = true
		return nil, nil
	})
	if sealErr != nil {
		return sealErr
	}
	if c != nil {
		r.failed(c)
	}
	switch {
	case err == nil && lost:
		r.m.log.Error("MCP secrets re-encryption: a session's state cannot be read", "session", id)
		r.out.Skipped++
	case err == nil && wrote:
		r.out.Sessions++
		r.out.Values += c.values
	case errors.Is(err, store.ErrNotFound):
		// Deleted meanwhile.
	case err != nil && errors.As(err, new(*storeError)):
		return err
	case err != nil:
		// Its state does not decode: nothing of it can be resealed
		// (nor run); it is left as it is.
		r.m.log.Error("MCP secrets re-encryption: a session's state cannot be read", "session", id, "err", err)
		r.out.Skipped++
	}
	return nil
}
