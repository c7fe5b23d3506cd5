package tools

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/loop"
)

// Config configures the tools that [ByName] builds. A nil *Config means
// the zero Config.
type Config struct {
	// Dir is the working directory of the file tools (their root) and of
	// run_command. "" means the current directory.
	Dir string
	// Files are the options of read_file, list_files, write_file and
	// edit_file; nil means the defaults.
	Files *FilesOptions
	// Shell are the options of run_command; nil means the defaults.
	Shell *ShellOptions
	// Web are the options of web_fetch; nil means the defaults.
	Web *WebOptions
	// Media are the options of upload_media, which reads from Dir; nil
	// means the defaults.
	Media *MediaOptions
	// Grep are the options of grep, which searches Dir; nil means the
	// defaults.
	Grep *GrepOptions
}

// toolFamily maps each built-in tool to its family.
var toolFamily = map[string]string{
	"read_file":    "files",
	"list_files":   "files",
	"write_file":   "files",
	"edit_file":    "files",
	"grep":         "grep",
	"run_command":  "shell",
	"web_fetch":    "web",
	"upload_media": "media",
	"todo_write":   "todo",
}

// Names returns the names of the built-in tools.
func Names() []string {
	return []string{"read_file", "list_files", "write_file", "edit_file", "grep", "run_command", "web_fetch", "upload_media", "todo_write"}
}

// ByName returns a toolset holding the built-in tools named in names, in
// that order, for a command line such as --tools read_file,list_files.
// Names are trimmed of spaces; empty names and repeats are ignored, so the
// result of strings.Split on a flag can be passed as it is. An unknown name
// is an error that lists the known ones. The file tools and upload_media
// share one [os.Root] opened on cfg.Dir, and so does grep, which stays open for the life of
// the program, so that the paths list_files and grep give can be passed
// to upload_media as they are.
func ByName(names []string, cfg *Config) (*loop.Toolset, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	dir := cfg.Dir
	if dir == "" {
		dir = "."
	}
	var want []string
	families := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || slices.Contains(want, n) {
			continue
		}
		fam, ok := toolFamily[n]
		if !ok {
			return nil, fmt.Errorf("tools: unknown tool %q; the built-in tools are %s", n, strings.Join(Names(), ", "))
		}
		want = append(want, n)
		families[fam] = true
	}
	built := map[string]*loop.Toolset{}
	var files *fileTools
	if families["files"] || families["media"] || families["grep"] {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("tools: opening the files root: %w", err)
		}
		if families["files"] {
			// Only the file tools asked for are built: each builds and
			// compiles its schema, which is most of what a command that
			// starts costs before its first request.
			files = &fileTools{c: newConfined(root), o: cfg.Files.withDefaults()}
		}
		if families["media"] {
			built["media"] = MediaIn(root, cfg.Media)
		}
		if families["grep"] {
			built["grep"] = GrepIn(root, cfg.Grep)
		}
	}
	if families["shell"] {
		ts, err := Shell(dir, cfg.Shell)
		if err != nil {
			return nil, err
		}
		built["shell"] = ts
	}
	if families["web"] {
		built["web"] = Web(cfg.Web)
	}
	if families["todo"] {
		built["todo"] = Todo()
	}
	out := &loop.Toolset{}
	for _, n := range want {
		var def *loop.ToolDef
		if toolFamily[n] == "files" {
			def = files.def(n)
		} else {
			d, _ := built[toolFamily[n]].Lookup(n)
			def = &d
		}
		if err := out.Add(def); err != nil {
			return nil, err
		}
	}
	return out, nil
}
