package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/BurntSushi/toml"

	"github.com/hrns-dev/hrns/loop"
)

// Remembered "always" answers: allow rules a person chose to keep for a
// project, in a file of the user's own (never the repository's, which a
// clone could fill):
//
//	# $XDG_CONFIG_HOME/hrns/remembered.toml (~/.config/hrns/remembered.toml)
//	[[project]]
//	dir = "/home/me/src/app"
//	allow = ["run_command(go test:*)", "edit_file"]
//
// A project is the repository holding the workdir (the nearest parent with
// .git), or the workdir outside any. hrns run and hrns chat add the
// project's rules to the policy's allow rules; the terminal's "r" answer
// and the chat's "A"/"P" write them.

// maxRememberedFile bounds the file read.
const maxRememberedFile = 1 << 20

type rememberedFile struct {
	Project []rememberedProject `toml:"project"`
}

type rememberedProject struct {
	Dir   string   `toml:"dir"`
	Allow []string `toml:"allow"`
}

// rememberedMu serialises the writes of one process.
var rememberedMu sync.Mutex

// rememberedPath is the file's path, or "" when neither XDG_CONFIG_HOME
// nor HOME is set.
func rememberedPath(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "hrns", "remembered.toml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "hrns", "remembered.toml")
	}
	return ""
}

// projectDir is the project of workdir: the repository's root, or workdir.
func projectDir(workdir string) (string, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return abs, nil
		}
	}
}

func readRemembered(path string) (*rememberedFile, error) {
	return readStateFile[rememberedFile](path, maxRememberedFile)
}

// rememberedRules returns the rules remembered for workdir's project.
func rememberedRules(workdir string, getenv func(string) string) ([]loop.Rule, error) {
	path := rememberedPath(getenv)
	if path == "" {
		return nil, nil
	}
	dir, err := projectDir(workdir)
	if err != nil {
		return nil, err
	}
	f, err := readRemembered(path)
	if err != nil {
		return nil, err
	}
	var out []loop.Rule
	for _, p := range f.Project {
		if p.Dir != dir {
			continue
		}
		for _, s := range p.Allow {
			r, err := loop.ParseRule(s)
			if err != nil {
				return nil, fmt.Errorf("%s: project %s: %w", path, dir, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// remember adds rule to workdir's project in the file, written whole to a
// temporary file (mode 0600) renamed over it.
func remember(workdir string, getenv func(string) string, rule loop.Rule) error {
	path := rememberedPath(getenv)
	if path == "" {
		return errors.New("neither XDG_CONFIG_HOME nor HOME is set")
	}
	dir, err := projectDir(workdir)
	if err != nil {
		return err
	}
	rememberedMu.Lock()
	defer rememberedMu.Unlock()
	f, err := readRemembered(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(f.Project, func(p rememberedProject) bool { return p.Dir == dir })
	if i < 0 {
		f.Project = append(f.Project, rememberedProject{Dir: dir})
		i = len(f.Project) - 1
	}
	if s := rule.String(); !slices.Contains(f.Project[i].Allow, s) {
		f.Project[i].Allow = append(f.Project[i].Allow, s)
	}
	return writeStateFile(path, "# Allow rules remembered from \"always\" answers, per project; written by hrns, yours to edit.\n", f)
}

// readStateFile reads the TOML file of hrns's own at path (at most max
// bytes); a missing file reads as the zero T.
func readStateFile[T any](path string, max int64) (*T, error) {
	var f T
	data, err := readBounded(path, max)
	if errors.Is(err, fs.ErrNotExist) {
		return &f, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := toml.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// writeStateFile writes v as TOML, after header, to path (mode 0600, its
// folder 0700), replacing the file at once: a reader sees the old file or
// the new one, never a part.
func writeStateFile(path, header string, v any) error {
	var buf bytes.Buffer
	buf.WriteString(header)
	if err := toml.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// addRemembered adds the rules remembered for workdir's project to perms'
// allow rules. A file that cannot be read is an error naming it: a rule
// the person kept is not dropped silently.
func addRemembered(perms *loop.Permissions, workdir string, stdio *IO) error {
	rules, err := rememberedRules(workdir, stdio.getenv)
	if err != nil {
		return usagef("remembered permissions: %v", err)
	}
	perms.Allow = append(perms.Allow, rules...)
	return nil
}

// rememberFunc keeps a rule for workdir's project; nil without a place.
func rememberFunc(workdir string, stdio *IO) func(loop.Rule) error {
	if rememberedPath(stdio.getenv) == "" {
		return nil
	}
	return func(r loop.Rule) error { return remember(workdir, stdio.getenv, r) }
}
