package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// FileName is the name of the file that makes a folder a skill.
const FileName = "SKILL.md"

// A Skill is a folder of instructions for a task: its SKILL.md front matter
// says what it is for, its body says how to do it, and the folder may hold
// more files (scripts, references, templates) that the body points to.
type Skill struct {
	// Name is the skill's name from its front matter; it is also the name
	// of its folder.
	Name string
	// Description says what the skill does and when to use it; it is what
	// a model reads to decide whether to load the skill.
	Description string
	// Body is the Markdown that follows the front matter: the
	// instructions.
	Body string
	// Dir is the skill's folder, as an absolute path.
	Dir string
	// FS, when not nil, is the skill's folder instead of Dir, which is
	// then only shown to the model: the skill tools read the skill's
	// files from FS. hrns serve gives the skills callers register this
	// way, from its store.
	FS fs.FS
	// Root is the folder the skill was found in: one of the roots given
	// to [Discover], or Dir itself for a path naming a single skill.
	Root string

	// License is the optional license field of the front matter.
	License string
	// Compatibility is the optional compatibility field: what the skill
	// needs of its environment.
	Compatibility string
	// AllowedTools is the optional allowed-tools field, as written (a
	// space-separated list). It is informational: the skill tools do not
	// enforce it.
	AllowedTools string
	// Metadata is the optional metadata map of the front matter.
	Metadata map[string]string
}

// Path returns the path of the skill's SKILL.md.
func (s *Skill) Path() string { return filepath.Join(s.Dir, FileName) }

// Errors wrapped by the [Problem]s of [Discover].
var (
	// ErrInvalid: a SKILL.md without front matter, with front matter that
	// is not YAML, or with a missing or invalid name or description. The
	// skill is skipped.
	ErrInvalid = errors.New("invalid skill")
	// ErrShadowed: a skill of the same name was found first, in a root
	// that takes precedence. The later one is skipped.
	ErrShadowed = errors.New("skill shadowed by another of the same name")
	// ErrNotFound: a path given to Discover does not exist.
	ErrNotFound = errors.New("skills path not found")
)

// A Problem is something [Discover] skipped, and why.
type Problem struct {
	// Path is the file or folder concerned.
	Path string
	// Err says what is wrong; it wraps ErrInvalid, ErrShadowed,
	// ErrNotFound or the error of reading the path.
	Err error
}

// Error returns the path and what is wrong with it.
func (p Problem) Error() string { return p.Path + ": " + p.Err.Error() }

// Unwrap returns p.Err.
func (p Problem) Unwrap() error { return p.Err }

// Options configure [Discover]. A nil *Options, and the zero value of each
// field, mean the documented defaults.
type Options struct {
	// NoDefaults searches only the paths given to Discover, not the
	// [DefaultRoots].
	NoDefaults bool
	// WorkDir is the directory of the project's ./.agents/skills. "" means
	// the current directory.
	WorkDir string
	// Home is the directory of the user's ~/.agents/skills. "" means
	// os.UserHomeDir; when it is unknown, that root is not searched.
	Home string
	// MaxFileBytes is the largest SKILL.md read; a larger one is reported
	// as a problem. 0 means 1 MiB.
	MaxFileBytes int64
}

// DefaultRoots returns the roots Discover searches after the paths it is
// given, in order of precedence: the project's ./.agents/skills and
// ./.claude/skills (Claude Code's), then the user's ~/.agents/skills and
// ~/.claude/skills.
func DefaultRoots(opts *Options) []string {
	project, user := defaultRoots(opts)
	return append(project, user...)
}

// defaultRoots returns the project's default roots and the user's.
func defaultRoots(opts *Options) (project, user []string) {
	var o Options
	if opts != nil {
		o = *opts
	}
	wd := o.WorkDir
	if wd == "" {
		wd, _ = os.Getwd()
	}
	if wd != "" {
		project = []string{filepath.Join(wd, ".agents", "skills"), filepath.Join(wd, ".claude", "skills")}
	}
	home := o.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home != "" {
		user = []string{filepath.Join(home, ".agents", "skills"), filepath.Join(home, ".claude", "skills")}
	}
	return project, user
}

// Discover finds the skills in paths and, unless opts.NoDefaults is set, in
// the [DefaultRoots]: ./.agents/skills, ./.claude/skills, ~/.agents/skills
// and ~/.claude/skills.
//
// Each path is either a root holding one folder per skill
// (<root>/<name>/SKILL.md, the Agent Skills layout) or a single skill's
// folder (holding SKILL.md itself). Folders whose names start with '.' and
// folders without a SKILL.md are passed over. Symbolic links to skill
// folders are followed.
//
// When two skills have the same name, the first one found wins: the paths
// given, in order, then ./.agents/skills, ./.claude/skills,
// ~/.agents/skills and ~/.claude/skills; so a skill
// given explicitly or kept in the project overrides the user's. The other
// is skipped and reported as a [Problem] wrapping [ErrShadowed].
//
// Skills are returned sorted by name. Problems (a malformed SKILL.md, a
// shadowed skill, a path given that does not exist) never stop discovery:
// each is reported, naming the file, and that skill is skipped. A default
// root that does not exist is not a problem.
func Discover(paths []string, opts *Options) ([]*Skill, []Problem) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 1 << 20
	}
	d := &discovery{o: o, byName: map[string]*Skill{}, seenRoots: map[string]bool{}}
	for _, p := range paths {
		d.root(p, true)
	}
	if !o.NoDefaults {
		// The project's skills come with the repository: a cloned one
		// must not read the user's files through them, so they stay
		// inside it (unless the project is the home, whose skills are the
		// user's). DefaultRoots gives the project's first when it has one.
		project := projectRoot(&o)
		if home := o.Home; project != "" {
			if home == "" {
				home, _ = os.UserHomeDir()
			}
			if home != "" && realPath(home) == project {
				project = ""
			}
		}
		projectRoots, userRoots := defaultRoots(&o)
		for _, p := range projectRoots {
			d.confine = project
			d.root(p, false)
			d.confine = ""
		}
		for _, p := range userRoots {
			d.root(p, false)
		}
	}
	slices.SortFunc(d.skills, func(a, b *Skill) int { return strings.Compare(a.Name, b.Name) })
	return d.skills, d.problems
}

type discovery struct {
	o Options
	// confine, when set, is the real path of the folder that the skills
	// of the root being searched must stay in (the project's): a skill
	// folder or SKILL.md whose links lead outside it is a problem.
	confine   string
	skills    []*Skill
	byName    map[string]*Skill
	problems  []Problem
	seenRoots map[string]bool
}

func (d *discovery) problem(path string, err error) {
	d.problems = append(d.problems, Problem{Path: path, Err: err})
}

// root searches one path; given says it came from the caller, so that its
// absence is a problem.
func (d *discovery) root(p string, given bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		d.problem(p, err)
		return
	}
	key := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		key = real
	}
	if d.seenRoots[key] {
		return // the same folder named twice, or the project in the home
	}
	d.seenRoots[key] = true
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if given {
			d.problem(abs, ErrNotFound)
		}
		return
	case err != nil:
		d.problem(abs, err)
		return
	case !info.IsDir():
		d.problem(abs, fmt.Errorf("%w: not a folder", ErrNotFound))
		return
	}
	if _, err := os.Stat(filepath.Join(abs, FileName)); err == nil {
		d.skill(abs, abs) // a single skill's folder
		return
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		d.problem(abs, err)
		return
	}
	for _, e := range entries { // sorted by name
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(abs, e.Name())
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue // a file, or a broken link
		}
		if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
			continue
		}
		d.skill(abs, dir)
	}
}

// skill reads the skill in dir, found under root.
func (d *discovery) skill(root, dir string) {
	path := filepath.Join(dir, FileName)
	if d.confine != "" {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			d.problem(path, err)
			return
		}
		if !within(d.confine, real) {
			d.problem(path, fmt.Errorf("%w: a skill of the project must stay inside it, and this one leads to %s", ErrInvalid, real))
			return
		}
	}
	s, err := parseFile(path, d.o.MaxFileBytes)
	if err != nil {
		d.problem(path, err)
		return
	}
	if want := filepath.Base(dir); s.Name != want {
		d.problem(path, fmt.Errorf("%w: name %q does not match its folder %q", ErrInvalid, s.Name, want))
		return
	}
	s.Dir, s.Root = dir, root
	if first, dup := d.byName[s.Name]; dup {
		d.problem(path, fmt.Errorf("%w: %q is already defined by %s, which takes precedence", ErrShadowed, s.Name, first.Path()))
		return
	}
	d.byName[s.Name] = s
	d.skills = append(d.skills, s)
}

// Parse reads a SKILL.md: its YAML front matter and its body. It checks
// the front matter's name and description but not the name's folder,
// which it does not know.
func Parse(data []byte) (*Skill, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the file is not UTF-8 text", ErrInvalid)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return nil, fmt.Errorf("%w: no front matter: the file must start with a line '---', then YAML with name and description, then a line '---'", ErrInvalid)
	}
	var front, body string
	switch {
	case strings.HasPrefix(rest, "---\n") || rest == "---":
		front, body = "", strings.TrimPrefix(rest, "---")
	default:
		i := strings.Index(rest, "\n---\n")
		if i < 0 {
			if !strings.HasSuffix(rest, "\n---") {
				return nil, fmt.Errorf("%w: the front matter has no closing '---' line", ErrInvalid)
			}
			i = len(rest) - len("\n---")
		}
		front, body = rest[:i], rest[i+len("\n---"):]
	}
	var fm struct {
		Name          string            `yaml:"name"`
		Description   string            `yaml:"description"`
		License       string            `yaml:"license"`
		Compatibility string            `yaml:"compatibility"`
		AllowedTools  string            `yaml:"allowed-tools"`
		Metadata      map[string]string `yaml:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return nil, fmt.Errorf("%w: front matter: %s", ErrInvalid, yamlError(err))
	}
	s := &Skill{
		Name:          strings.TrimSpace(fm.Name),
		Description:   strings.TrimSpace(fm.Description),
		Body:          strings.TrimSpace(body),
		License:       fm.License,
		Compatibility: fm.Compatibility,
		AllowedTools:  fm.AllowedTools,
		Metadata:      fm.Metadata,
	}
	if err := checkName(s.Name); err != nil {
		return nil, err
	}
	switch n := utf8.RuneCountInString(s.Description); {
	case n == 0:
		return nil, fmt.Errorf("%w: the front matter has no description", ErrInvalid)
	case n > 1024:
		return nil, fmt.Errorf("%w: the description is %d characters, more than 1024", ErrInvalid, n)
	}
	return s, nil
}

var yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bline (\d+)\b`) })

// yamlError rewrites a YAML error for the file: line numbers count from
// the file's first line (the front matter starts on its second), and the
// usual mistake of an unquoted ": " gets a hint.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	msg = yamlLineRE().ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+1)
	})
	if strings.Contains(msg, "mapping values are not allowed") {
		msg += ` (a value that contains ": " must be quoted)`
	}
	return msg
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the front matter has no name", ErrInvalid)
	case len(name) > 64:
		return fmt.Errorf("%w: name %q is longer than 64 characters", ErrInvalid, name)
	case !nameRE().MatchString(name):
		return fmt.Errorf("%w: name %q must be lowercase letters, digits and single hyphens, not starting or ending with one", ErrInvalid, name)
	}
	return nil
}

// projectRoot returns the real path of the project whose
// ./.agents/skills Discover searches, or "" if there is none.
func projectRoot(o *Options) string {
	wd := o.WorkDir
	if wd == "" {
		wd, _ = os.Getwd()
	}
	if wd == "" {
		return ""
	}
	return realPath(wd)
}

// realPath returns p made absolute with its links resolved, or "" if that
// cannot be done.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return ""
	}
	return real
}

// within reports whether the real path p is dir or inside it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// parseFile reads and parses the SKILL.md at path, which must be a
// regular file: it is opened without blocking, so that a FIFO or a device
// a repository names SKILL.md neither hangs discovery nor is read.
func parseFile(path string, max int64) (*Skill, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrInvalid)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: the file is larger than %d bytes", ErrInvalid, max)
	}
	return Parse(data)
}
