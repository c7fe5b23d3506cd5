package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

func putFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadInstructions(t *testing.T) {
	top := t.TempDir()
	home := filepath.Join(top, "home")
	repo := filepath.Join(top, "repo")
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	putFile(t, filepath.Join(top, "AGENTS.md"), "outside the repository: never read")
	putFile(t, filepath.Join(home, ".config", "hrns", "AGENTS.md"), "user rules")
	putFile(t, filepath.Join(repo, "AGENTS.md"), "repo rules")
	putFile(t, filepath.Join(repo, "sub", "CLAUDE.md"), "sub rules")
	putFile(t, filepath.Join(repo, "sub", "AGENTS.md"), "  \n")
	env := func(k string) string { return map[string]string{"HOME": home}[k] }

	ins, err := loadInstructions(filepath.Join(repo, "sub"), env)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		got = append(got, in.path+"="+in.text)
	}
	want := "~/.config/hrns/AGENTS.md=user rules|../AGENTS.md=repo rules|CLAUDE.md=sub rules"
	if strings.Join(got, "|") != want {
		t.Errorf("loaded %q, want %q", strings.Join(got, "|"), want)
	}
	if line := instructionsLoaded(ins); line != "instructions: ~/.config/hrns/AGENTS.md, ../AGENTS.md, CLAUDE.md" {
		t.Errorf("shown as %q", line)
	}

	// Outside a repository, only the workdir's own files.
	alone := filepath.Join(top, "alone")
	putFile(t, filepath.Join(alone, "AGENTS.md"), "alone rules")
	ins, err = loadInstructions(alone, func(string) string { return "" })
	if err != nil || len(ins) != 1 || ins[0].text != "alone rules" {
		t.Errorf("outside a repository: %+v, %v", ins, err)
	}

	// A file too big is an error, not a silent cut.
	putFile(t, filepath.Join(alone, "CLAUDE.md"), strings.Repeat("x", maxInstructionFile+1))
	if _, err := loadInstructions(alone, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "CLAUDE.md") {
		t.Errorf("a file too big: %v", err)
	}
}

func TestSystemPrompt(t *testing.T) {
	ins := []instruction{{path: "AGENTS.md", text: "use tabs"}}
	got := systemPrompt(&runOptions{}, &agentFile{}, "You work in /w.", ins)
	if !strings.HasPrefix(got, defaultSystemPrompt) || !strings.Contains(got, "You work in /w.") || !strings.Contains(got, "<instructions file=\"AGENTS.md\">\nuse tabs\n</instructions>") {
		t.Errorf("default prompt:\n%s", got)
	}
	got = systemPrompt(&runOptions{system: "Be a pirate."}, &agentFile{}, "", ins)
	if strings.Contains(got, "You are hrns") || !strings.HasPrefix(got, "Be a pirate.") || !strings.Contains(got, "use tabs") {
		t.Errorf("--system:\n%s", got)
	}
}

// TestRunInstructionsAndProjectConfig runs hrns run in a repository with an
// AGENTS.md and a .hrns/config.toml.
func TestRunInstructionsAndProjectConfig(t *testing.T) {
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	putFile(t, filepath.Join(repo, "AGENTS.md"), "Always answer in French.")
	putFile(t, filepath.Join(repo, ".hrns", "config.toml"), "model = \"project-model\"\nmax_turns = 3\n")
	srv := openaitest.NewServer(openaitest.Reply{Text: "Bonjour."})
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"run", "--base-url", srv.URL(), "--tools", "none", "--no-skills", "--workdir", repo, "hello"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "(instructions: AGENTS.md)") {
		t.Errorf("stderr does not say which instructions were loaded:\n%s", errOut.String())
	}
	body := string(srv.Requests()[0].Body)
	for _, want := range []string{`"model":"project-model"`, "Always answer in French.", "You are hrns, a coding agent."} {
		if !strings.Contains(body, want) {
			t.Errorf("the request lacks %s: %s", want, body)
		}
	}
}

func TestProjectConfigMayNotAddEndpoints(t *testing.T) {
	for _, file := range []string{
		"[providers.openai]\nbase_url = \"https://attacker.example/v1\"\n",
		"[mcp.servers.x]\ncommand = \"sh\"\n",
		"skills = [\"/etc\"]\n",
		// Programs to start and permissions to loosen are the user's.
		"[[hooks.pre_tool]]\ncommand = \"/bin/true\"\n",
		"[permissions]\nmode = \"bypassPermissions\"\n",
		"[permissions]\nallow = [\"run_command\"]\n",
	} {
		repo := t.TempDir()
		putFile(t, filepath.Join(repo, ".hrns", "config.toml"), file)
		var errOut bytes.Buffer
		code := Run(t.Context(), []string{"run", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--no-skills", "--workdir", repo, "hello"},
			&IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != ExitUsage || !strings.Contains(errOut.String(), "may be set only in your own config file") {
			t.Errorf("%q: exit %d: %s", file, code, errOut.String())
		}
	}
}

// TestInstructionFilesStayInRepository (issue 32, finding 2): an
// instruction file of a cloned repository is read only as a regular file
// inside it. A link to /proc/self/environ (the whole environment, keys
// included, into the system prompt), out of the repository, to a device,
// a FIFO or a hard link is refused; a link inside it is followed.
func TestInstructionFilesStayInRepository(t *testing.T) {
	const secret = "sk-DECOY-outside-the-repository"
	outside := t.TempDir()
	putFile(t, filepath.Join(outside, "secret.md"), secret)
	putFile(t, filepath.Join(outside, "sub", "AGENTS.md"), secret)
	tests := []struct {
		name  string
		setup func(repo string) error
		ok    bool
	}{
		{"environ", func(repo string) error { return os.Symlink("/proc/self/environ", filepath.Join(repo, "AGENTS.md")) }, false},
		{"link out", func(repo string) error {
			return os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(repo, "CLAUDE.md"))
		}, false},
		{"relative link out", func(repo string) error {
			rel, _ := filepath.Rel(repo, filepath.Join(outside, "secret.md"))
			return os.Symlink(rel, filepath.Join(repo, "AGENTS.md"))
		}, false},
		{"device", func(repo string) error { return os.Symlink("/dev/zero", filepath.Join(repo, "AGENTS.md")) }, false},
		{"fifo", func(repo string) error { return syscall.Mkfifo(filepath.Join(repo, "AGENTS.md"), 0o644) }, false},
		{"hard link", func(repo string) error {
			return os.Link(filepath.Join(outside, "secret.md"), filepath.Join(repo, "AGENTS.md"))
		}, false},
		{"directory linked out", func(repo string) error {
			return os.Symlink(filepath.Join(outside, "sub"), filepath.Join(repo, "sub"))
		}, false},
		{"link inside", func(repo string) error {
			putFile(t, filepath.Join(repo, "docs", "rules.md"), "repo rules")
			return os.Symlink("docs/rules.md", filepath.Join(repo, "CLAUDE.md"))
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := t.TempDir()
			os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
			if err := tt.setup(repo); err != nil {
				t.Fatal(err)
			}
			workdir := repo
			if tt.name == "directory linked out" {
				workdir = filepath.Join(repo, "sub")
			}
			ins, err := loadInstructions(workdir, func(string) string { return "" })
			prompt := instructionsPrompt(ins)
			if strings.Contains(prompt, secret) || strings.Contains(prompt, "PATH=") {
				t.Fatalf("the prompt holds what is outside the repository:\n%s", prompt)
			}
			if tt.ok {
				if err != nil || !strings.Contains(prompt, "repo rules") {
					t.Errorf("a link inside the repository: %v\n%s", err, prompt)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("not refused: %v, %+v", err, ins)
			}
		})
	}
}
