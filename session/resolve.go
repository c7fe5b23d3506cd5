package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/hrns-dev/hrns/internal/rawjson"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/skills"
	"github.com/hrns-dev/hrns/store"
)

// This file resolves the names a session request gives of registered
// agents, environments and skills (package platform/registry registers
// them): the runtime reads the entries from the store when a session is
// created or a subagent started, and a session's registered skills when
// it runs.

// A ResolvedAgent is the agent of a session request once the registries
// have resolved the names it gives.
type ResolvedAgent struct {
	// Ref is the agent: a configured agent's name (a catalog name is
	// replaced by its agent's), or an inline definition (a registered
	// agent's, or the request's), whose environments given by a
	// registered environment's id are replaced by its definition, and
	// whose skills given by name are moved to Skills.
	Ref AgentRef
	// MaxSteps is a registered agent's step budget; 0 when it has none.
	MaxSteps int
	// Skills are the registered skills the agent uses, as they are now.
	Skills []*skills.Skill
}

// skillToolNames are the names of the skill tools.
var skillToolNames = []string{"list_skills", "load_skill", "read_skill", "search_skills"}

// ResolveAgent resolves the agent ref of a session request of owner:
//
//   - a configured agent's name ([Options.Agents]) is kept;
//   - a catalog name ([Options.Catalog]) becomes its agent's name;
//   - another name must be one of the owner's registered agents, which
//     becomes an inline definition (it gets what an inline agent may
//     have, never an operator's toolsets);
//   - in an inline definition, each environment given as a string that is
//     not an environment kind of the server must be the id of one of the
//     owner's registered environments, and is replaced by its
//     definition; each skill given as a string must be one of the
//     owner's registered skills, which the session then uses through the
//     skill tools (list_skills, load_skill, read_skill, search_skills).
//
// Errors: a *[ValidationError] (loc "body", "agent", ...) naming an agent,
// environment or skill the owner cannot use.
func (m *Manager) ResolveAgent(ctx context.Context, owner string, ref AgentRef) (*ResolvedAgent, error) {
	out := &ResolvedAgent{Ref: ref}
	if ref.Inline == nil {
		if ref.Name == "" {
			return out, nil // resolve reports the missing agent
		}
		got, steps, err := m.lookupAgent(ctx, owner, ref.Name)
		if err != nil {
			return nil, err
		}
		out.Ref, out.MaxSteps = got, steps
		if got.Inline == nil {
			return out, nil // an agent of the server
		}
	} else {
		a := *ref.Inline
		out.Ref = AgentRef{Inline: &a}
	}
	a := out.Ref.Inline
	var v validation
	a.Environments = slices.Clone(a.Environments)
	for i, env := range a.Environments {
		if env.Fields != nil {
			continue // an inline definition
		}
		if m.hasEnvironment(env.ID) {
			continue // a kind of the server, named
		}
		e, err := m.st.GetEntry(ctx, store.KindEnvironment, owner, env.ID)
		if errors.Is(err, store.ErrEntryNotFound) && slices.Contains([]string{envDesktop, envAndroid, envWorkstation}, env.ID) {
			continue // a kind of the API this server lacks: resolve says so
		}
		if errors.Is(err, store.ErrEntryNotFound) {
			v.add(fmt.Sprintf("unknown environment %q: neither an environment kind of this server nor the id of an environment registered with this API key (%s)", env.ID, m.usableEnvironments(ctx, owner)), "body", "agent", "environments", i)
			continue
		}
		if err != nil {
			return nil, err
		}
		var def Environment
		if err := def.UnmarshalJSON(e.Spec); err != nil {
			return nil, err
		}
		a.Environments[i] = def
	}
	var kept []SkillRef
	for i, ref := range a.Skills {
		if ref.Inline != nil || m.opts.Skills[ref.Name] != nil {
			kept = append(kept, ref) // the request's own rules (skills.go)
			continue
		}
		e, err := m.st.GetEntry(ctx, store.KindSkill, owner, ref.Name)
		if errors.Is(err, store.ErrEntryNotFound) {
			v.add(fmt.Sprintf("unknown skill %q: neither a skill of this server (%s) nor one registered with this API key", ref.Name, keys(m.opts.Skills)), "body", "agent", "skills", i)
			continue
		}
		if err != nil {
			return nil, err
		}
		s, err := storedSkill(e)
		if err != nil {
			return nil, err
		}
		out.Skills = append(out.Skills, s)
	}
	a.Skills = kept
	if len(out.Skills) > 0 && len(kept) > 0 {
		// Both would offer a load_skill tool of their own.
		v.add("an agent's skills are either all registered with this API key or all inline or of this server, not both", "body", "agent", "skills")
	}
	if len(out.Skills) > 0 {
		for i, t := range a.Tools {
			if slices.Contains(skillToolNames, t.Name) {
				v.add(fmt.Sprintf("tool %q is a tool of the agent's skills", t.Name), "body", "agent", "tools", i, "name")
			}
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// lookupAgent finds the agent a name gives, for a session of owner:
// a configured agent's name is kept, a catalog name becomes its agent's
// name, and the name of one of the owner's registered agents becomes its
// definition (inline), with its step budget. Another key's agents are
// never looked at.
//
// Errors: a *[ValidationError] at ["body", "agent"] for a name found in
// none of them, which says where it looked.
func (m *Manager) lookupAgent(ctx context.Context, owner, name string) (AgentRef, int, error) {
	if _, ok := m.opts.Agents[name]; ok {
		return AgentRef{Name: name}, 0, nil
	}
	if target, ok := m.opts.Catalog[name]; ok {
		return AgentRef{Name: target}, 0, nil
	}
	e, err := m.st.GetEntry(ctx, store.KindAgent, owner, name)
	if errors.Is(err, store.ErrEntryNotFound) {
		return AgentRef{}, 0, invalid(fmt.Sprintf("unknown agent %q: looked among the agents of this server (%s), its catalog names (%s) and the agents registered with this API key", name, keys(m.opts.Agents), keys(m.opts.Catalog)), "body", "agent")
	}
	if err != nil {
		return AgentRef{}, 0, err
	}
	a, steps, err := inlineAgent(e.Spec)
	if err != nil {
		return AgentRef{}, 0, err
	}
	return AgentRef{Inline: a}, steps, nil
}

// inlineAgent is the inline definition of a registered agent, and its
// step budget.
func inlineAgent(spec json.RawMessage) (*Agent, int, error) {
	var s AgentSpec
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, 0, err
	}
	a := &Agent{Name: s.Name, Description: s.Description, Tools: s.Tools}
	if s.Model != nil {
		a.Model = *s.Model
	}
	if s.Instructions != nil {
		a.Instructions = *s.Instructions
	}
	a.ReasoningEffort = s.ReasoningEffort
	for _, raw := range s.Environments {
		var e Environment
		if err := e.UnmarshalJSON(raw); err != nil {
			return nil, 0, err
		}
		a.Environments = append(a.Environments, e)
	}
	for _, raw := range s.Skills {
		var ref SkillRef
		if err := ref.UnmarshalJSON(raw); err != nil {
			return nil, 0, err
		}
		a.Skills = append(a.Skills, ref)
	}
	for _, raw := range s.Subagents {
		var ref AgentRef
		if err := ref.UnmarshalJSON(raw); err != nil {
			return nil, 0, err
		}
		a.Subagents = append(a.Subagents, ref)
	}
	if !rawjson.IsNull(s.AnswerFormat) {
		a.AnswerFormat = s.AnswerFormat
	}
	steps := 0
	if s.MaxSteps != nil {
		steps = *s.MaxSteps
	}
	return a, steps, nil
}

// storedSkill is a registered skill for the skill tools: its folder is
// its SKILL.md and files, in memory.
func storedSkill(e *store.Entry) (*skills.Skill, error) {
	var s SkillSpec
	if err := json.Unmarshal(e.Spec, &s); err != nil {
		return nil, err
	}
	if len(e.Files) > 0 {
		if err := json.Unmarshal(e.Files, &s.Files); err != nil {
			return nil, err
		}
	}
	name, _ := json.Marshal(s.Name)
	desc, _ := json.Marshal(s.Description)
	fsys := fstest.MapFS{skills.FileName: {Data: fmt.Appendf(nil, "---\nname: %s\ndescription: %s\n---\n%s", name, desc, s.Body), Mode: 0o444}}
	for p, content := range s.Files {
		fsys[p] = &fstest.MapFile{Data: []byte(content), Mode: 0o444}
	}
	return &skills.Skill{Name: s.Name, Description: s.Description, Body: s.Body, Dir: "registered skill " + s.Name, FS: fsys}, nil
}

// registered is what a session gets from the registries besides its
// request: the skill tools, and their part of the system prompt.
type registered struct {
	toolsets []string
	system   string
}

// forSession resolves the agent of a request of owner (see
// [Manager.ResolveAgent]) and returns the request to validate in its
// place, and what the session gets besides.
func (m *Manager) forSession(ctx context.Context, owner string, req *Request) (*Request, *registered, error) {
	ra, err := m.ResolveAgent(ctx, owner, req.Agent)
	if err != nil {
		return nil, nil, err
	}
	out := *req
	out.Agent = ra.Ref
	if out.MaxSteps == nil && ra.MaxSteps > 0 {
		out.MaxSteps = &ra.MaxSteps
	}
	reg := &registered{}
	if raw, ok := req.Overrides["agent.tools"]; ok && len(ra.Skills) > 0 {
		var tools []ToolDefinition
		if json.Unmarshal(raw, &tools) == nil {
			for i, t := range tools {
				if slices.Contains(skillToolNames, t.Name) {
					return nil, nil, invalid(fmt.Sprintf("tool %q is a tool of the agent's skills", t.Name), "body", "overrides", "agent.tools", i, "name")
				}
			}
		}
	}
	if len(ra.Skills) > 0 {
		names := make([]string, len(ra.Skills))
		for i, s := range ra.Skills {
			names[i] = s.Name
		}
		reg.toolsets = []string{"skills:" + strings.Join(append([]string{owner}, names...), "\x00")}
		reg.system = skills.PromptSection(ra.Skills)
	}
	return &out, reg, nil
}

// apply adds what the registries give to a resolved session.
func (reg *registered) apply(sp *spec) {
	if reg == nil {
		return
	}
	sp.Toolsets = append(sp.Toolsets, reg.toolsets...)
	if reg.system != "" {
		sp.System = strings.TrimSpace(sp.System + "\n\n" + reg.system)
	}
}

// skillTools are the skill tools of a "skills:OWNER\x00NAME..." toolset
// reference: the owner's registered skills as they are when the session
// runs. A skill deleted since the session was created is left out.
func (m *Manager) skillTools(ref string) (*loop.Toolset, error) {
	parts := strings.Split(ref, "\x00")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var found []*skills.Skill
	for _, name := range parts[1:] {
		e, err := m.st.GetEntry(ctx, store.KindSkill, parts[0], name)
		if errors.Is(err, store.ErrEntryNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the skill %s: %w", name, err)
		}
		s, err := storedSkill(e)
		if err != nil {
			return nil, fmt.Errorf("the skill %s: %w", name, err)
		}
		found = append(found, s)
	}
	return skills.Tools(found, nil), nil
}

// maxListedEnvironments bounds the registered environments a message
// lists.
const maxListedEnvironments = 20

// usableEnvironments lists, for a message, the environments owner's
// sessions may name: the kinds this server offers and the ids of the
// owner's registered environments (the first maxListedEnvironments by
// id, saying how many more there are).
func (m *Manager) usableEnvironments(ctx context.Context, owner string) string {
	out := "kinds of this server: " + m.offeredKinds()
	got, total, err := m.st.ListEntries(ctx, &store.EntryListParams{Kind: store.KindEnvironment, Owner: owner, Sort: store.SortNameAsc, Limit: maxListedEnvironments})
	switch {
	case err != nil:
		return out // the message is still right without them
	case total == 0:
		return out + "; registered with this API key: none"
	}
	ids := make([]string, 0, len(got))
	for _, e := range got[:min(len(got), maxListedEnvironments)] {
		ids = append(ids, fmt.Sprintf("%q", e.Name))
	}
	out += "; registered with this API key: " + strings.Join(ids, ", ")
	if more := total - len(ids); more > 0 {
		out += fmt.Sprintf(" and %d more (GET /api/v2/environments)", more)
	}
	return out
}
