package skills

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/loop"
)

// ToolOptions configure the skill tools of [Tools]. A nil *ToolOptions,
// and the zero value of each field, mean the documented defaults.
type ToolOptions struct {
	// MaxReadBytes caps the text of one load_skill or read_skill call; a
	// longer file is cut, and the result says so. 0 means 100 KiB.
	MaxReadBytes int
	// MaxSearchHits caps the matching lines of one search_skills call.
	// 0 means 50.
	MaxSearchHits int
	// MaxFiles caps the files of a skill listed by load_skill and
	// read_skill. 0 means 100.
	MaxFiles int
}

func (o *ToolOptions) withDefaults() ToolOptions {
	var v ToolOptions
	if o != nil {
		v = *o
	}
	if v.MaxReadBytes <= 0 {
		v.MaxReadBytes = 100 << 10
	}
	if v.MaxSearchHits <= 0 {
		v.MaxSearchHits = 50
	}
	if v.MaxFiles <= 0 {
		v.MaxFiles = 100
	}
	return v
}

// maxSearchFileBytes: larger files are not searched.
const maxSearchFileBytes = 1 << 20

// Tools returns the skill tools over skills:
//
//   - list_skills lists the skills' names and descriptions;
//   - load_skill returns a skill's instructions (the body of its SKILL.md)
//     for the model to follow, with the list of its other files;
//   - read_skill reads one file of a skill, or lists a folder of it;
//   - search_skills finds a text in the skills' files, SKILL.md first,
//     case-insensitively, and returns the matching lines with file and
//     line number.
//
// Reading is confined to each skill's folder with an [os.Root]: `..`,
// absolute paths and symbolic links that leave the folder are refused. All
// the tools are read-only and Concurrent. When two skills share a name,
// the first in skills is used.
func Tools(skills []*Skill, opts *ToolOptions) *loop.Toolset {
	t := &skillTools{o: opts.withDefaults(), byName: map[string]*Skill{}}
	for _, s := range skills {
		if s == nil {
			continue
		}
		if _, dup := t.byName[s.Name]; !dup {
			t.byName[s.Name] = s
			t.skills = append(t.skills, s)
		}
	}
	defs := []*loop.ToolDef{t.listSkills(), t.loadSkill(), t.readSkill(), t.searchSkills()}
	for _, d := range defs {
		d.Concurrent = true
		d.Access = loop.AccessRead // they read skill files: plan mode runs them
	}
	return loop.MustToolset(defs...)
}

type skillTools struct {
	o      ToolOptions
	skills []*Skill
	byName map[string]*Skill
}

func (t *skillTools) lookup(name string) (*Skill, error) {
	if s, ok := t.byName[strings.TrimSpace(name)]; ok {
		return s, nil
	}
	if len(t.skills) == 0 {
		return nil, fmt.Errorf("there is no skill %q: no skills are installed", name)
	}
	names := make([]string, len(t.skills))
	for i, s := range t.skills {
		names[i] = s.Name
	}
	return nil, fmt.Errorf("there is no skill %q; the skills are: %s", name, strings.Join(names, ", "))
}

// list_skills

func (t *skillTools) listSkills() *loop.ToolDef {
	def := loop.NewTool("list_skills",
		"Lists the available skills: folders of instructions for particular tasks, each with a name and a "+
			"description of when to use it. Load one with load_skill before doing a task it describes.",
		func(ctx context.Context, _ struct{}) (string, error) {
			if len(t.skills) == 0 {
				return "(no skills are installed)", nil
			}
			var b strings.Builder
			for _, s := range t.skills {
				fmt.Fprintf(&b, "- %s: %s\n", s.Name, oneLine(s.Description))
			}
			return strings.TrimSuffix(b.String(), "\n"), nil
		})
	def.InputSchema = nil // no arguments: the loop's empty object schema
	return def
}

// load_skill

type loadSkillArgs struct {
	Name string `json:"name" jsonschema:"the skill's name, as list_skills gives it"`
}

func (t *skillTools) loadSkill() *loop.ToolDef {
	return loop.NewTool("load_skill",
		"Loads a skill: returns the instructions of its SKILL.md, to follow for the task at hand, and the list "+
			"of the other files in its folder, which the instructions may tell you to read (with read_skill).",
		func(ctx context.Context, in loadSkillArgs) (string, error) {
			s, err := t.lookup(in.Name)
			if err != nil {
				return "", err
			}
			var b strings.Builder
			fmt.Fprintf(&b, "# Skill: %s\n\nFolder: %s\n", s.Name, s.Dir)
			files, more := t.files(s)
			if len(files) > 0 {
				fmt.Fprintf(&b, "Other files (read them with read_skill): %s", strings.Join(files, ", "))
				if more {
					b.WriteString(", ...")
				}
				b.WriteByte('\n')
			}
			b.WriteString("\n")
			body := s.Body
			if len(body) > t.o.MaxReadBytes {
				body = cutString(body, t.o.MaxReadBytes) + fmt.Sprintf("\n\n[instructions cut at %d of %d bytes; read the rest with read_skill]", t.o.MaxReadBytes, len(s.Body))
			}
			b.WriteString(body)
			return b.String(), nil
		})
}

// files lists the files of s other than SKILL.md, up to MaxFiles; more
// says there were others.
func (t *skillTools) files(s *Skill) (files []string, more bool) {
	fsys, done, err := folder(s)
	if err != nil {
		return nil, false
	}
	defer done()
	errStop := errors.New("stop")
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return nil
		}
		if p == FileName || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if len(files) == t.o.MaxFiles {
			more = true
			return errStop
		}
		files = append(files, p)
		return nil
	})
	return files, more
}

// folder opens the folder of s: its FS, or its Dir through an [os.Root],
// which refuses paths and links that lead outside. Call done when
// finished with it.
func folder(s *Skill) (fsys fs.FS, done func(), err error) {
	if s.FS != nil {
		return s.FS, func() {}, nil
	}
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, nil, err
	}
	return root.FS(), func() { root.Close() }, nil
}

// read_skill

type readSkillArgs struct {
	Name string `json:"name" jsonschema:"the skill's name"`
	Path string `json:"path,omitempty" jsonschema:"a file or folder of the skill, relative to its folder (default: the instructions of SKILL.md)"`
}

func (t *skillTools) readSkill() *loop.ToolDef {
	return loop.NewTool("read_skill",
		"Reads a file of a skill, given its path relative to the skill's folder (for example references/api.md), "+
			"or lists a folder of it. Without a path, returns the instructions of its SKILL.md. Only files inside "+
			"the skill's folder can be read.",
		func(ctx context.Context, in readSkillArgs) (string, error) {
			s, err := t.lookup(in.Name)
			if err != nil {
				return "", err
			}
			p := strings.TrimSpace(in.Path)
			if p == "" {
				return t.cut(s.Body, "the instructions"), nil
			}
			return t.read(s, p)
		})
}

func (t *skillTools) read(s *Skill, p string) (string, error) {
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be relative to the folder of skill %q", p, s.Name)
	}
	clean := path.Clean(filepath.ToSlash(p))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q is outside the folder of skill %q; access refused", p, s.Name)
	}
	fsys, done, err := folder(s)
	if err != nil {
		return "", fmt.Errorf("opening the folder of skill %q: %v", s.Name, err)
	}
	defer done()
	f, err := fsys.Open(clean)
	if err != nil {
		return "", explain(s, p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", explain(s, p, err)
	}
	if info.IsDir() {
		entries, err := fs.ReadDir(fsys, clean)
		if err != nil {
			return "", explain(s, p, err)
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		if len(names) == 0 {
			return fmt.Sprintf("(%s is empty)", p), nil
		}
		slices.Sort(names)
		if len(names) > t.o.MaxFiles {
			names = append(names[:t.o.MaxFiles], fmt.Sprintf("[... %d more]", len(names)-t.o.MaxFiles))
		}
		return strings.Join(names, "\n"), nil
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(t.o.MaxReadBytes)+1))
	if err != nil {
		return "", explain(s, p, err)
	}
	if looksBinary(data) {
		return "", fmt.Errorf("%s is a binary file (%d bytes); read_skill only shows text", p, info.Size())
	}
	if len(data) > t.o.MaxReadBytes {
		return cutString(string(data), t.o.MaxReadBytes) + fmt.Sprintf("\n\n[file cut at %d of %d bytes]", t.o.MaxReadBytes, info.Size()), nil
	}
	return string(data), nil
}

func (t *skillTools) cut(text, what string) string {
	if len(text) <= t.o.MaxReadBytes {
		return text
	}
	return cutString(text, t.o.MaxReadBytes) + fmt.Sprintf("\n\n[%s cut at %d of %d bytes]", what, t.o.MaxReadBytes, len(text))
}

// explain rewrites an error of the os.Root for the model.
func explain(s *Skill, p string, err error) error {
	switch {
	case strings.Contains(err.Error(), "path escapes from parent"):
		return fmt.Errorf("path %q leads outside the folder of skill %q (through `..` or a symbolic link); access refused", p, s.Name)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("skill %q has no file %s", s.Name, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", p, pe.Err)
	}
	return err
}

// search_skills

type searchSkillsArgs struct {
	Query string `json:"query" jsonschema:"the text to look for, case-insensitively"`
}

func (t *skillTools) searchSkills() *loop.ToolDef {
	return loop.NewTool("search_skills",
		fmt.Sprintf("Searches the skills for a text, ignoring case: their SKILL.md files (names, descriptions and "+
			"instructions) and the other text files in their folders. Returns up to %d matching lines as "+
			"skill/path:line: text.", t.o.MaxSearchHits),
		func(ctx context.Context, in searchSkillsArgs) (string, error) {
			return t.search(ctx, in.Query)
		})
}

func (t *skillTools) search(ctx context.Context, query string) (string, error) {
	q := strings.ToLower(strings.TrimSpace(query))
	if q == "" {
		return "", errors.New("query is empty")
	}
	var hits []string
	full := false
	add := func(h string) bool {
		if len(hits) == t.o.MaxSearchHits {
			full = true
			return false
		}
		hits = append(hits, h)
		return true
	}
	for _, s := range t.skills {
		if full {
			break
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		t.searchSkill(s, q, add)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("(no skill mentions %q)", query), nil
	}
	out := strings.Join(hits, "\n")
	if full {
		out += fmt.Sprintf("\n[search stopped at %d matches; use a more specific query]", t.o.MaxSearchHits)
	}
	return out, nil
}

// searchSkill searches the text files of s, SKILL.md first, calling add
// for each matching line until it returns false.
func (t *skillTools) searchSkill(s *Skill, q string, add func(string) bool) {
	fsys, done, err := folder(s)
	if err != nil {
		return
	}
	defer done()
	errStop := errors.New("stop")
	searchFile := func(p string) error {
		f, err := fsys.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() || info.Size() > maxSearchFileBytes {
			return nil
		}
		data, err := io.ReadAll(f)
		if err != nil || looksBinary(data) {
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), maxSearchFileBytes)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.Contains(strings.ToLower(line), q) {
				if !add(fmt.Sprintf("%s/%s:%d: %s", s.Name, p, n, clip(strings.TrimSpace(line), 200))) {
					return errStop
				}
			}
		}
		return nil
	}
	if searchFile(FileName) != nil {
		return
	}
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || p == FileName || d.Type()&fs.ModeSymlink != 0 {
			return nil // links are not followed: inside they repeat, outside they are refused
		}
		return searchFile(p)
	})
}

// looksBinary reports whether data holds a NUL byte or invalid UTF-8 in its
// first 8 KiB.
func looksBinary(data []byte) bool {
	head := data[:min(len(data), 8<<10)]
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if len(head) < len(data) {
		// Drop a rune cut by the end of the sample.
		for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
			if utf8.RuneStart(head[i]) {
				if !utf8.FullRune(head[i:]) {
					head = head[:i]
				}
				break
			}
		}
	}
	return !utf8.Valid(head)
}

// cutString returns at most n bytes of s, ending on a whole rune.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutString(s, n) + "..."
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
