package session

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/loop"
)

// Skills of a session's agent. A skill is given inline ({name,
// description, body}) or by name: a skill of [Options.Skills] (the skills
// registry resolves names first when it is there: see resolveSkill). The
// agent sees each skill's name and description in its system prompt, and
// loads a skill's instructions with the load_skill tool, which the
// session's spec carries, so that a session runs with the same skills
// after a restart.

// maxSkills and maxSkillBytes bound the skills of one agent.
const (
	maxSkills     = 64
	maxSkillBytes = 256 << 10
)

var skillName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$`)
})

// resolveSkill returns the skill a reference names, or the inline one
// checked. It is where names are looked up.
func (m *Manager) resolveSkill(ref SkillRef) (*Skill, error) {
	if ref.Inline != nil {
		s := *ref.Inline
		switch {
		case !skillName().MatchString(s.Name):
			return nil, fmt.Errorf("skill name %q must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, with an optional 'org/' prefix", s.Name)
		case strings.TrimSpace(s.Description) == "":
			return nil, fmt.Errorf("skill %q has no description", s.Name)
		case strings.TrimSpace(s.Body) == "":
			return nil, fmt.Errorf("skill %q has no body", s.Name)
		}
		return &s, nil
	}
	if s := m.opts.Skills[ref.Name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("unknown skill %q (skills of this server: %s)", ref.Name, keys(m.opts.Skills))
}

// resolveSkills resolves the agent's skills for its spec.
func (m *Manager) resolveSkills(refs []SkillRef, v *validation) []Skill {
	if len(refs) > maxSkills {
		v.add(fmt.Sprintf("at most %d skills", maxSkills), "body", "agent", "skills")
		return nil
	}
	var out []Skill
	size := 0
	seen := map[string]bool{}
	for i, ref := range refs {
		s, err := m.resolveSkill(ref)
		if err != nil {
			v.add(err.Error(), "body", "agent", "skills", i)
			continue
		}
		if seen[s.Name] {
			v.add(fmt.Sprintf("skill %q is given twice", s.Name), "body", "agent", "skills", i)
			continue
		}
		seen[s.Name] = true
		size += len(s.Body) + len(s.Description)
		out = append(out, Skill{Name: s.Name, Description: s.Description, Body: s.Body})
	}
	if size > maxSkillBytes {
		v.add(fmt.Sprintf("the skills' text is %d bytes, more than %d", size, maxSkillBytes), "body", "agent", "skills")
	}
	return out
}

// skillsPrompt lists the skills for the system prompt.
func skillsPrompt(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Skills\n\nSkills are instructions for particular tasks. When a task matches the description of a skill below, call load_skill with its name before you start, and follow the instructions it returns.\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, strings.Join(strings.Fields(s.Description), " "))
	}
	return b.String()
}

// skillTools is the load_skill tool over the skills, nil without skills.
func skillTools(skills []Skill) (*loop.Toolset, error) {
	if len(skills) == 0 {
		return nil, nil
	}
	byName := map[string]string{}
	var names []string
	for _, s := range skills {
		byName[s.Name] = s.Body
		names = append(names, s.Name)
	}
	type in struct {
		Name string `json:"name" jsonschema:"the skill's name"`
	}
	load := loop.NewTool("load_skill", "Load a skill's instructions by name. Skills: "+strings.Join(names, ", ")+".",
		func(_ context.Context, a in) (string, error) {
			body, ok := byName[a.Name]
			if !ok {
				return "", fmt.Errorf("no skill %q (skills: %s)", a.Name, strings.Join(names, ", "))
			}
			return body, nil
		})
	return loop.NewToolset(load)
}
