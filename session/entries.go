package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/internal/rawjson"
	"github.com/hrns-dev/hrns/store"
)

// This file is the runtime's side of the registries of agents,
// environments and skills (package platform/registry holds their
// operations): what an entry means to a session. The registry asks it to
// validate a body as sessions will read it ([Manager.ParseEntry]), for
// the server's read-only entries, which come from [Options]
// ([Manager.BuiltinEntries]), and for the store the entries live in
// ([Manager.Entries]). Sessions resolve the names they give of entries in
// resolve.go.

// A BuiltinEntry is a read-only entry of the server, made from its
// [Options]: a configured agent or catalog name, an environment kind.
type BuiltinEntry struct {
	// Name is the entry's name (an environment's id); Type an
	// environment's kind; Description an agent's description.
	Name, Type, Description string
	// Doc is the entry as the API shows it.
	Doc json.RawMessage
}

// Entries is where the registered entries of the manager's store are
// kept (the store itself): package platform/registry reads and writes
// them, and sessions read the entries they name.
func (m *Manager) Entries() store.Registry { return m.st }

// Profiles is where the browser profiles of the manager's store are kept
// (the store itself): the server's /api/v2/browser-profiles operations
// use it, and sessions read the profiles their web environment names.
func (m *Manager) Profiles() store.Profiles { return m.st }

// BuiltinEntries returns the server's read-only entries of the kind
// (store.KindAgent, store.KindEnvironment, store.KindSkill), by name:
// the agents of [Options.Agents] and their [Options.Catalog] names, and
// the environment kinds of [Options.Environments] and
// [Options.SessionEnvironments], and the user's own desktop (host
// user_device). There are no read-only skills.
func (m *Manager) BuiltinEntries(kind string) []BuiltinEntry {
	var out []BuiltinEntry
	switch kind {
	case store.KindAgent:
		for _, name := range slices.Sorted(maps.Keys(m.opts.Agents)) {
			out = append(out, m.configAgent(name, name))
		}
		for _, alias := range slices.Sorted(maps.Keys(m.opts.Catalog)) {
			if _, ok := m.opts.Agents[m.opts.Catalog[alias]]; ok {
				if _, shadowed := m.opts.Agents[alias]; !shadowed {
					out = append(out, m.configAgent(alias, m.opts.Catalog[alias]))
				}
			}
		}
	case store.KindEnvironment:
		for _, kind := range slices.Sorted(maps.Keys(m.opts.Environments)) {
			if kind == envWeb || kind == envDesktop {
				doc, _ := json.Marshal(EnvironmentSpec{ID: kind, Kind: kind, Host: map[string]string{envWeb: "cloud", envDesktop: "user_device"}[kind], ReadOnly: true})
				out = append(out, BuiltinEntry{Name: kind, Type: kind, Doc: doc})
			}
		}
		if _, ok := m.opts.Environments[envDesktop]; !ok {
			// The user's own desktop, which every server gives
			// (userdesktop.go): a name a registered agent may use, as a
			// session's agent does.
			doc, _ := json.Marshal(EnvironmentSpec{ID: envDesktop, Kind: envDesktop, Host: "user_device", ReadOnly: true})
			out = append(out, BuiltinEntry{Name: envDesktop, Type: envDesktop, Doc: doc})
		}
		if m.opts.SessionEnvironments[envWorkstation] != nil {
			doc, _ := json.Marshal(EnvironmentSpec{ID: envWorkstation, Kind: envWorkstation, Host: "cloud", ReadOnly: true})
			out = append(out, BuiltinEntry{Name: envWorkstation, Type: envWorkstation, Doc: doc})
		}
	}
	slices.SortFunc(out, func(a, b BuiltinEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// configAgent is the read-only entry of the configured agent target,
// under name.
func (m *Manager) configAgent(name, target string) BuiltinEntry {
	cfg := m.opts.Agents[target]
	a := AgentSpec{Name: name, Description: cfg.Description, Environments: []json.RawMessage{}, ReadOnly: true}
	if a.Description == "" {
		a.Description = fmt.Sprintf("The agent %s of this server.", target)
	}
	if cfg.Model != "" {
		a.Model = &cfg.Model
	}
	if cfg.Instructions != "" {
		a.Instructions = &cfg.Instructions
	}
	if cfg.ReasoningEffort != "" {
		a.ReasoningEffort = &cfg.ReasoningEffort
	}
	if cfg.MaxSteps > 0 {
		a.MaxSteps = &cfg.MaxSteps
	}
	for _, ts := range cfg.Toolsets {
		if m.hasEnvironment(ts) {
			a.Environments = append(a.Environments, json.RawMessage(fmt.Sprintf("%q", ts)))
		}
	}
	doc, _ := json.Marshal(a)
	return BuiltinEntry{Name: name, Description: a.Description, Doc: doc}
}

// ParseEntry validates a body of the kind (store.KindAgent,
// store.KindEnvironment, store.KindSkill) as sessions read it, and
// returns it as the owner's entry: its name, description or type, and
// its spec (a skill's files apart). The names the body gives of other
// entries are not looked up.
//
// Errors: a *[ValidationError] for an invalid body.
func (m *Manager) ParseEntry(kind, owner string, body []byte) (*store.Entry, error) {
	var v validation
	e := &store.Entry{Kind: kind, Owner: owner}
	switch kind {
	case store.KindAgent:
		var a AgentSpec
		if err := decodeObject(body, &a, "body"); err != nil {
			return nil, err
		}
		validateAgent(&v, &a, 0, "body")
		m.checkReasoning(&v, &a, 0, "body")
		m.checkAgentEnvironments(&v, &a, nil, 0, "body")
		e.Name, e.Description = a.Name, a.Description
		e.Spec, _ = json.Marshal(a)
	case store.KindEnvironment:
		var env EnvironmentSpec
		if err := decodeObject(body, &env, "body"); err != nil {
			return nil, err
		}
		validateEnvironment(&v, &env, "body")
		e.Name, e.Type = env.ID, env.Kind
		e.Spec, _ = json.Marshal(env)
	case store.KindSkill:
		var s SkillSpec
		if err := decodeObject(body, &s, "body"); err != nil {
			return nil, err
		}
		validateSkill(&v, &s, "body")
		e.Name, e.Description = s.Name, s.Description
		if len(s.Files) > 0 {
			e.Files, _ = json.Marshal(s.Files)
		}
		s.Files = nil
		e.Spec, _ = json.Marshal(s)
	default:
		return nil, fmt.Errorf("unknown registry %q", kind)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	// Stored with the MCP servers' secrets sealed for the owner
	// (mcpsecrets.go).
	var err error
	if e.Spec, err = m.sealDoc(owner, e.Spec); err != nil {
		return nil, err
	}
	return e, nil
}

// EntryDoc is the entry as the API returns it: its spec, with a skill's
// files.
func EntryDoc(e *store.Entry) json.RawMessage {
	if e.Kind != store.KindSkill || len(e.Files) == 0 {
		return e.Spec
	}
	var s SkillSpec
	if json.Unmarshal(e.Spec, &s) != nil || json.Unmarshal(e.Files, &s.Files) != nil {
		return e.Spec
	}
	out, _ := json.Marshal(s)
	return out
}

// DecodeObject decodes a JSON object into v, reporting a body that is not
// one, or a field of the wrong type, as a *[ValidationError] at loc, as
// the API's validation does.
func DecodeObject(raw []byte, v any, loc ...any) error { return decodeObject(raw, v, loc...) }

// checkReasoning refuses a reasoning_effort the agent's model (or the
// server's default model) has no setting for, and those of its inline
// subagents, so that a registered agent is refused when it is made, not
// when a session uses it. The effort's value is checked by validateAgent.
func (m *Manager) checkReasoning(v *validation, a *AgentSpec, depth int, loc ...any) {
	if a.ReasoningEffort != nil && checkReasoningEffort(*a.ReasoningEffort) == nil {
		model := firstNonEmpty(deref(a.Model), m.opts.DefaultModel)
		if _, err := reasoningConfig(firstNonEmpty(model, "(the provider's default model)"), *a.ReasoningEffort, m.reasoningSupport(model)); err != nil {
			v.add(err.Error(), at(loc, "reasoning_effort")...)
		}
	}
	if depth >= maxInlineDepth {
		return
	}
	for i, raw := range a.Subagents {
		if _, ok := rawjson.String(raw); ok {
			continue
		}
		var sub AgentSpec
		if json.Unmarshal(raw, &sub) == nil {
			m.checkReasoning(v, &sub, depth+1, at(loc, "subagents", i)...)
		}
	}
}
