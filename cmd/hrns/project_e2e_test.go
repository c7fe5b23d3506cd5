package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestClonedRepositoryCannotSendKeys (issue 32, finding 2) runs the
// binary in a cloned repository whose AGENTS.md is a symbolic link to
// /proc/self/environ and whose .hrns/config.toml enables web_fetch: the
// two together put the user's key in the system prompt and gave the model
// a way to send it out without a prompt. Now hrns run refuses the config
// without a terminal (before any model request) unless --trust-project;
// with it, refuses the instruction file; and with a plain AGENTS.md, a
// command reading hrns's own environment (/proc/$PPID/environ, run
// unsandboxed) finds no key, and no request to the model carries it.
func TestClonedRepositoryCannotSendKeys(t *testing.T) {
	const key = "sk-DECOY-user-key-9f3b27"
	repo := t.TempDir()
	for _, d := range []string{".git", ".hrns"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, ".hrns", "config.toml"), []byte("tools = [\"read_file\", \"web_fetch\", \"run_command\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agents := filepath.Join(repo, "AGENTS.md")
	if err := os.Symlink("/proc/self/environ", agents); err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer()
	defer srv.Close()
	home := t.TempDir()
	run := func(args ...string) (code int, stderr string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), hrnsBin, append([]string{"run"}, args...)...)
		cmd.Dir = repo
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
			"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=" + key, "OPENAI_MODEL=test-model"}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.Stdin = strings.NewReader("") // not a terminal
		err := cmd.Run()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, errOut.String()
	}

	code, stderr := run("say hi")
	if code != 2 || !strings.Contains(stderr, "web_fetch") || !strings.Contains(stderr, "--trust-project") {
		t.Errorf("the repository's web_fetch without a terminal: exit %d, stderr %q; want 2, naming web_fetch and --trust-project", code, stderr)
	}
	code, stderr = run("--trust-project", "say hi")
	if code != 2 || !strings.Contains(stderr, "AGENTS.md") || !strings.Contains(stderr, "refused") {
		t.Errorf("AGENTS.md linked to /proc/self/environ: exit %d, stderr %q; want 2, refusing it", code, stderr)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d model requests before the refusals", n)
	}

	// A plain AGENTS.md, the config agreed to: what can a command (run
	// without the sandbox, as hrns's child) read of hrns's environment?
	if err := os.Remove(agents); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agents, []byte("Be brief.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Push(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"tr '\\000' '\\n' < /proc/$PPID/environ; echo ENVIRON-READ; env"}`)}},
		openaitest.Reply{Text: "done"},
	)
	code, stderr = run("--trust-project", "--no-sandbox", "--yes", "read the environment")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	results := toolResults(t, reqs[1].Body)
	if len(results) != 1 || !strings.Contains(results[0], "ENVIRON-READ") {
		t.Fatalf("the command did not run: %q", results)
	}
	for i, r := range reqs {
		if strings.Contains(string(r.Body), key) {
			t.Errorf("model request %d carries the key:\n%s", i, r.Body)
		}
	}
	if strings.Contains(results[0], "OPENAI_API_KEY") {
		t.Errorf("the command read hrns's environment:\n%s", results[0])
	}
}

// TestInheritedDescriptorsNotPassedOn (issue 32, finding 4) starts the
// binary with two descriptors left open, as a careless launcher would: a
// 0600 file to read and a file outside the workdir to write. A command
// the model runs, sandboxed or not, can use neither.
func TestInheritedDescriptorsNotPassedOn(t *testing.T) {
	outside := t.TempDir()
	const secret = "DECOY-0600-contents-51e0"
	secretPath, targetPath := filepath.Join(outside, "secret"), filepath.Join(outside, "target")
	if err := os.WriteFile(secretPath, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := `for fd in 3 4 5 6 7 8 9; do (eval \"cat <&$fd\") 2>/dev/null; (eval \"echo WRITTEN >&$fd\") 2>/dev/null && echo wrote $fd; done; echo PROBED`
	for name, flags := range map[string][]string{"unsandboxed": {"--no-sandbox"}, "sandboxed": nil} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(targetPath, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			srv := openaitest.NewServer(
				openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"`+probe+`"}`)}},
				openaitest.Reply{Text: "done"},
			)
			defer srv.Close()
			r, err := os.Open(secretPath)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			w, err := os.OpenFile(targetPath, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			args := append([]string{"run", "--yes"}, flags...)
			cmd := exec.CommandContext(t.Context(), hrnsBin, append(args, "probe the descriptors")...)
			cmd.Dir = workdir(t)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
			cmd.ExtraFiles = []*os.File{r, w, r, w} // 3, 4, 5, 6
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			res := toolResults(t, reqs[1].Body)
			if len(res) != 1 || !strings.Contains(res[0], "PROBED") {
				t.Fatalf("the command did not run: %q", res)
			}
			if strings.Contains(res[0], secret) || strings.Contains(res[0], "wrote") {
				t.Errorf("the command used an inherited descriptor:\n%s", res[0])
			}
			if b, _ := os.ReadFile(targetPath); len(b) > 0 {
				t.Errorf("the file outside the workdir holds %q", b)
			}
		})
	}
}
