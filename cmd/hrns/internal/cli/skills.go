package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/skills"
)

// discoverSkills finds the skills of the config, the extra paths, and the
// default roots (./.agents/skills and ./.claude/skills under workdir, the
// same under the home).
func discoverSkills(extra []string, cfg *Config, workdir string, getenv func(string) string) ([]*skills.Skill, []skills.Problem) {
	paths := append(append([]string(nil), cfg.Skills...), extra...)
	return skills.Discover(paths, &skills.Options{WorkDir: workdir, Home: getenv("HOME")})
}

// loadSkills discovers skills and returns their tools and the text that
// introduces them in the system prompt; nil tools when there are none.
// Skipped skills are reported on stderr and do not stop the run.
func loadSkills(o *runOptions, cfg *Config, stdio *IO) (*loop.Toolset, string, error) {
	if o.noSkills {
		return nil, "", nil
	}
	found, problems := discoverSkills(o.skills, cfg, o.workdir, stdio.getenv)
	for _, p := range problems {
		if errors.Is(p.Err, skills.ErrShadowed) {
			// Shadowing is how a project overrides a user's skill, on
			// purpose: hrns skills says which, not every run.
			continue
		}
		fmt.Fprintf(stdio.Err, "hrns: skill skipped: %v\n", p)
	}
	if len(found) == 0 {
		return nil, "", nil
	}
	return skills.Tools(found, nil), skills.PromptSection(found), nil
}

// serverSkills are the skills callers of hrns serve may name in an inline
// agent's skills: those of the config's skills paths only (a server does
// not read the default roots of whoever runs it). A skill whose folder
// holds more files than its SKILL.md is offered by its instructions only.
// Skipped skills are reported on stderr.
func serverSkills(cfg *Config, stdio *IO) map[string]*session.Skill {
	if len(cfg.Skills) == 0 {
		return nil
	}
	found, problems := skills.Discover(cfg.Skills, &skills.Options{NoDefaults: true})
	for _, p := range problems {
		fmt.Fprintf(stdio.Err, "hrns: skill skipped: %v\n", p)
	}
	out := map[string]*session.Skill{}
	for _, s := range found {
		out[s.Name] = &session.Skill{Name: s.Name, Description: s.Description, Body: s.Body}
	}
	return out
}

// skillsCommand lists the skills hrns discovers.
func skillsCommand(_ context.Context, args []string, stdio *IO) error {
	fs := flag.NewFlagSet("hrns skills", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	asJSON := fs.Bool("json", false, "print the skills as JSON")
	workdir := fs.String("workdir", ".", "the project whose ./.agents/skills to search")
	config := fs.String("config", "", "config file")
	var extra stringList
	fs.Var(&extra, "skills", "a folder of skills to add (repeatable)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	cfg, err := loadConfig(*config, stdio.getenv)
	if err != nil {
		return &usageError{err.Error()}
	}
	found, problems := discoverSkills(extra, cfg, *workdir, stdio.getenv)
	if *asJSON {
		type problem struct {
			Path  string `json:"path"`
			Error string `json:"error"`
		}
		// One naming style for every key, as the other --json outputs.
		type skill struct {
			Name          string            `json:"name"`
			Description   string            `json:"description"`
			Dir           string            `json:"dir"`
			Root          string            `json:"root"`
			License       string            `json:"license,omitempty"`
			Compatibility string            `json:"compatibility,omitempty"`
			AllowedTools  string            `json:"allowed_tools,omitempty"`
			Metadata      map[string]string `json:"metadata,omitempty"`
		}
		out := struct {
			Skills   []skill   `json:"skills"`
			Problems []problem `json:"problems"`
		}{Skills: []skill{}, Problems: []problem{}}
		for _, s := range found {
			out.Skills = append(out.Skills, skill{s.Name, s.Description, s.Dir, s.Root, s.License, s.Compatibility, s.AllowedTools, s.Metadata})
		}
		for _, p := range problems {
			out.Problems = append(out.Problems, problem{p.Path, p.Err.Error()})
		}
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(found) == 0 {
		fmt.Fprintln(stdio.Out, "No skills found. hrns looks in ./.agents/skills, ./.claude/skills, ~/.agents/skills, ~/.claude/skills, the config's skills and --skills folders;\na skill is a folder holding a SKILL.md with name and description in its front matter.")
	} else {
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SKILL\tDESCRIPTION\tFOLDER")
		for _, s := range found {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, clip(s.Description, 70), s.Dir)
		}
		tw.Flush()
	}
	for _, p := range problems {
		fmt.Fprintf(stdio.Err, "skipped: %v\n", p)
	}
	return nil
}
