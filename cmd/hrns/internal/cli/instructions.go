package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hrns-dev/hrns/internal/safetext"
)

// defaultSystemPrompt is the system prompt of a run or a chat that names
// none (--system, --agent): how to work in a code repository with the
// built-in tools.
const defaultSystemPrompt = `You are hrns, a coding agent. You work in a code repository on the user's behalf, with the tools you are given.

How to work:
- Understand before you change anything: list and read the files that matter first, and never edit a file you have not read in this conversation.
- Make the smallest change that does the job, in the style of the code around it. Change existing files with edit_file (an old_string that occurs exactly once, with enough context); create new files with write_file.
- After a change, build and run the project's tests with run_command when you can (go test ./..., npm test, pytest, cargo test, make test...), read the failures and fix them. Say so when you could not run them.
- Run only the commands the task needs. Do not delete what you did not create, push, publish, or install system packages unless the user asks.
- When the user refuses a call, do not make it again: take the reason into account, or ask.
- If the task is unclear, ask one short question rather than guess.

How to answer: be concise. Say what you did and what you found, naming files (path:line) and commands; no filler, no repetition of the code you wrote unless asked. Use Markdown.`

// instructionNames are the files of project instructions, read in this
// order in each directory.
var instructionNames = []string{"AGENTS.md", "CLAUDE.md"}

// Bounds on instructions: each file, and all of them together.
const (
	maxInstructionFile  = 64 << 10
	maxInstructionTotal = 256 << 10
)

// An instruction is a file of instructions added to the system prompt.
type instruction struct {
	path string // as shown to the person: relative to the workdir, or with ~
	text string
}

// loadInstructions reads the instruction files: the user's
// (~/.config/hrns/AGENTS.md), then those of each directory from the
// repository's root (the nearest parent holding .git) down to workdir. A
// workdir outside any repository reads its own only.
func loadInstructions(workdir string, getenv func(string) string) ([]instruction, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for d := abs; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if isDir(filepath.Join(d, ".git")) || isFile(filepath.Join(d, ".git")) {
			break
		}
		if filepath.Dir(d) == d {
			dirs = dirs[:1] // no repository: the workdir alone
			break
		}
	}
	// The repository's files are read inside it (its root, or the
	// workdir outside any): a link out of it, a device, a FIFO or a file
	// of /proc is refused (issue 32: AGENTS.md linked to
	// /proc/self/environ put hrns's environment in the prompt).
	repo, err := os.OpenRoot(dirs[len(dirs)-1])
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	var out []instruction
	total := 0
	add := func(path, shown string, inRepo bool) error {
		var text string
		var err error
		if inRepo {
			text, err = readInRoot(repo, path, maxInstructionFile)
		} else {
			text, err = readBounded(path, maxInstructionFile)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("instructions %s: %w", shown, err)
		}
		if total += len(text); total > maxInstructionTotal {
			return fmt.Errorf("instructions %s: the instruction files hold more than %d KiB together", shown, maxInstructionTotal>>10)
		}
		if strings.TrimSpace(text) != "" {
			out = append(out, instruction{path: shown, text: text})
		}
		return nil
	}
	if dir := userConfigDir(getenv); dir != "" {
		for _, n := range instructionNames {
			home := getenv("HOME")
			shown := filepath.Join(dir, n)
			if rel, err := filepath.Rel(home, shown); home != "" && err == nil && !strings.HasPrefix(rel, "..") {
				shown = filepath.Join("~", rel)
			}
			if err := add(filepath.Join(dir, n), shown, false); err != nil {
				return nil, err
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		for _, n := range instructionNames {
			p := filepath.Join(dirs[i], n)
			shown, err := filepath.Rel(abs, p)
			if err != nil {
				shown = p
			}
			inRepo, err := filepath.Rel(dirs[len(dirs)-1], p)
			if err != nil {
				return nil, err
			}
			if err := add(inRepo, shown, true); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// userConfigDir is hrns's directory in the user's config directory.
func userConfigDir(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hrns")
}

func isDir(p string) bool  { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
func isFile(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > limit {
		return "", fmt.Errorf("longer than %d KiB", limit>>10)
	}
	return string(b), nil
}

// errNotInRepository is the error of a project file that is not a regular
// file of the repository's own.
var errNotInRepository = errors.New("refused: not a regular file inside the repository (a symbolic link out of it, a hard link, a device, a FIFO or a socket)")

// readInRoot reads the file name of root, a file of the repository: a
// regular file of at most limit bytes, with one name, reached without
// leaving root (symbolic links inside it are followed).
func readInRoot(root *os.Root, name string, limit int64) (string, error) {
	if _, err := root.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return "", err
	} else if err != nil {
		return "", fmt.Errorf("%w: %v", errNotInRepository, err)
	}
	// Non-blocking: a FIFO is refused below, not waited on.
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: it leads nowhere", errNotInRepository)
		}
		return "", fmt.Errorf("%w: %v", errNotInRepository, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || linkCount(fi) > 1 {
		return "", errNotInRepository
	}
	if fi.Size() > limit {
		return "", fmt.Errorf("longer than %d KiB", limit>>10)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > limit {
		return "", fmt.Errorf("longer than %d KiB", limit>>10)
	}
	return string(b), nil
}

// instructionsPrompt is the part of the system prompt that holds the
// instruction files.
func instructionsPrompt(ins []instruction) string {
	if len(ins) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("The user and the project give these instructions; follow them (the later, more specific ones win).")
	for _, in := range ins {
		fmt.Fprintf(&b, "\n\n<instructions file=%q>\n%s\n</instructions>", in.path, strings.TrimSpace(in.text))
	}
	return b.String()
}

// instructionsLoaded says which instruction files were loaded, for a
// person: "instructions: AGENTS.md, ~/.config/hrns/AGENTS.md".
func instructionsLoaded(ins []instruction) string {
	if len(ins) == 0 {
		return ""
	}
	paths := make([]string, len(ins))
	for i, in := range ins {
		paths[i] = safetext.Escape(in.path)
	}
	return "instructions: " + strings.Join(paths, ", ")
}

// systemPrompt composes the system prompt: the agent file's, --system, or
// the default; then what the tools and skills add; then the instruction
// files.
func systemPrompt(o *runOptions, a *agentFile, toolsPrompt string, ins []instruction) string {
	base := defaultSystemPrompt
	switch {
	case a.System != "":
		base = a.System
	case o.system != "":
		base = o.system
	}
	return joinPrompts(joinPrompts(base, toolsPrompt), instructionsPrompt(ins))
}
