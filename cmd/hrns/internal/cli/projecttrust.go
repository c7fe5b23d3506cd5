package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/internal/safetext"
)

// A project's .hrns/config.toml comes with the repository: whoever wrote
// the repository chose its tools. Tools it selects beyond those the user
// would have anyway (web_fetch, which reaches the network without asking,
// the browser, run_code, upload_media...) are offered only once the
// person agreed to that file, once per project and per content:
//
//	# $XDG_STATE_HOME/hrns/trusted-projects.toml (~/.local/state/hrns/trusted-projects.toml)
//	[[project]]
//	config = "/home/me/src/app/.hrns/config.toml"
//	sha256 = "…"              # of the file agreed to: a changed file asks again
//	enables = ["web_fetch"]
//
// hrns run and hrns chat ask on the terminal; without one (or with --json)
// they refuse such a file unless --trust-project says so.

// maxTrustedFile bounds the file read.
const maxTrustedFile = 1 << 20

type trustedFile struct {
	Project []trustedProject `toml:"project"`
}

type trustedProject struct {
	Config  string   `toml:"config"`
	SHA256  string   `toml:"sha256"`
	Enables []string `toml:"enables"`
}

// trustedMu serialises the writes of one process.
var trustedMu sync.Mutex

// trustedPath is the file's path in the user's state directory, or ""
// when neither XDG_STATE_HOME nor HOME is set.
func trustedPath(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "hrns", "trusted-projects.toml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "hrns", "trusted-projects.toml")
	}
	return ""
}

func readTrusted(path string) (*trustedFile, error) {
	return readStateFile[trustedFile](path, maxTrustedFile)
}

// projectTrusted reports whether the person agreed to the project file at
// config with content hash sum.
func projectTrusted(config, sum string, getenv func(string) string) (bool, error) {
	path := trustedPath(getenv)
	if path == "" {
		return false, nil
	}
	f, err := readTrusted(path)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(f.Project, func(p trustedProject) bool { return p.Config == config && p.SHA256 == sum }), nil
}

// rememberTrust records the agreement to the project file at config with
// content hash sum, replacing an older one for the same file; the file is
// written whole to a temporary file (mode 0600) renamed over it.
func rememberTrust(config, sum string, enables []string, getenv func(string) string) error {
	path := trustedPath(getenv)
	if path == "" {
		return errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	trustedMu.Lock()
	defer trustedMu.Unlock()
	f, err := readTrusted(path)
	if err != nil {
		return err
	}
	f.Project = slices.DeleteFunc(f.Project, func(p trustedProject) bool { return p.Config == config })
	f.Project = append(f.Project, trustedProject{Config: config, SHA256: sum, Enables: enables})
	return writeStateFile(path, "# Project config files whose tools you agreed to, by content; written by hrns, yours to edit.\n", f)
}

// whatToolDoes says, for the person deciding, what a tool a project file
// enables can do.
func whatToolDoes(name string) string {
	switch {
	case name == "web_fetch":
		return "fetches any public web address the model chooses, without asking: what the model read can be sent to a server of the repository's choosing"
	case strings.HasPrefix(name, "browser_"):
		return "drives a browser that loads any public web page, without asking for most actions"
	case name == runCodeName:
		return "runs programs the model writes, calling the other tools"
	case name == "upload_media":
		return "gives the model images and documents of the working directory"
	}
	return "a tool you did not select"
}

// trustProject checks that the person agreed to what the project file
// enables beyond their own tools: remembered for this file's content,
// --trust-project, or asked now on the terminal (and remembered). Without
// a terminal, or with --json, such a file is refused.
func (c *Config) trustProject(o *runOptions, stdio *IO) error {
	if err := c.trustHrnsProject(o, stdio); err != nil {
		return err
	}
	return c.trustClaude(o, stdio)
}

// trustHrnsProject is trustProject for the project's .hrns/config.toml.
func (c *Config) trustHrnsProject(o *runOptions, stdio *IO) error {
	if len(c.projectEnables) == 0 || o.trustProject {
		return nil
	}
	ok, err := projectTrusted(c.project, c.projectHash, stdio.getenv)
	if err != nil {
		return usagef("trusted projects: %v", err)
	}
	if ok {
		return nil
	}
	names := make([]string, len(c.projectEnables))
	for i, n := range c.projectEnables {
		names[i] = safetext.Escape(n)
	}
	config := safetext.Escape(c.project)
	if o.json || !stdio.interactive() {
		return usagef("the project config %s (the repository's, not yours) enables %s, which you have not agreed to for this project: "+
			"run hrns in a terminal here to review it and agree once (remembered until the file changes), or pass --trust-project",
			config, strings.Join(names, ", "))
	}
	w := stdio.Err
	fmt.Fprintf(w, "The project config %s comes with the repository, not from you. It enables tools you did not select:\n", config)
	for i, n := range c.projectEnables {
		fmt.Fprintf(w, "  %s: %s\n", names[i], whatToolDoes(n))
	}
	fmt.Fprint(w, "Agree to this config for this project (remembered until the file changes)? [y/N] ")
	line, err := readAnswer(stdio.In)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
	default:
		return usagef("the project config %s was not agreed to: remove the tools it enables from it, or run again and agree", config)
	}
	if err := rememberTrust(c.project, c.projectHash, c.projectEnables, stdio.getenv); err != nil {
		fmt.Fprintf(w, "(agreed for this run; it could not be remembered: %v)\n", err)
	}
	return nil
}

// readAnswer reads one line from r a byte at a time, so that nothing after
// it is consumed (the approvals read the rest of the input later).
func readAnswer(r io.Reader) (string, error) {
	var b []byte
	var c [1]byte
	for len(b) < 1024 {
		n, err := r.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				return string(b), nil
			}
			b = append(b, c[0])
		}
		if err != nil {
			return string(b), err
		}
	}
	return string(b), nil
}
