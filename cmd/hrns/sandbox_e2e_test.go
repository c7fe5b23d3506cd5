package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/sandbox"
)

// The red team's attack on hrns run's sandbox (issue 13, break 2): a
// command approved with --yes reads credentials in the user's home (a git
// extraheader token, a Hugging Face token) and writes into the shared Go
// module cache, which a later go build outside the sandbox would run.
// None of it may work.
func TestRunCommandCannotReachTheHome(t *testing.T) {
	if _, err := sandbox.Supported(); err != nil {
		t.Skip("no sandbox here:", err)
	}
	home := t.TempDir()
	files := map[string]string{
		".gitconfig":               "[http]\n\textraheader = AUTHORIZATION: basic gitsecret-1234\n",
		".cache/huggingface/token": "hf_secret_5678\n",
		"go/pkg/mod/cache/download/example.com/m/@v/list": "v1.0.0\n",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	attack := "cat " + home + "/.gitconfig; cat " + home + "/.cache/huggingface/token; " +
		"echo pwned > " + home + "/go/pkg/mod/cache/download/example.com/m/@v/list; " +
		"mkdir -p " + home + "/.cache/hrns/sandbox/other/home && echo pwned > " + home + "/.cache/hrns/sandbox/other/home/x; echo done"
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":`+quote(attack)+`}`)}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "--yes", "steal")
	cmd.Dir = workdir(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests\n%s", len(reqs), stderr.String())
	}
	out := toolResults(t, reqs[1].Body)[0]
	if !strings.Contains(out, "done") {
		t.Fatalf("the command did not run: %q", out)
	}
	for _, secret := range []string{"gitsecret-1234", "hf_secret_5678"} {
		if strings.Contains(out, secret) {
			t.Errorf("the command read %s:\n%s", secret, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, "go/pkg/mod/cache/download/example.com/m/@v/list")); string(b) != "v1.0.0\n" {
		t.Errorf("the command wrote into the shared module cache: %q", b)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache/hrns/sandbox/other/home/x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command wrote into another workdir's private home: %v", err)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
