package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

// runIn runs hrns with args, stdin and an empty environment.
func runIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(t.Context(), args, &IO{In: strings.NewReader(stdin), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

func TestRunStdin(t *testing.T) {
	srv := openaitest.NewServer(openaitest.Reply{Text: "Looks fine."}, openaitest.Reply{Text: "4"}, openaitest.Reply{Text: "ok"})
	defer srv.Close()
	base := []string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", t.TempDir()}

	code, _, stderr := runIn(t, "diff --git a/x b/x\n+new line\n", append(base, "review this")...)
	if code != ExitOK || !strings.Contains(stderr, "(stdin: 29 bytes added to the prompt)") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if body := string(srv.Requests()[0].Body); !strings.Contains(body, `review this\n\nThe input piped to this command (stdin):\n\u003cstdin\u003e\ndiff --git a/x b/x\n+new line\n\u003c/stdin\u003e`) &&
		!strings.Contains(body, "review this\\n\\nThe input piped to this command (stdin):\\n<stdin>\\ndiff --git a/x b/x\\n+new line\\n</stdin>") {
		t.Errorf("the diff is not in the prompt: %s", body)
	}

	if code, _, stderr := runIn(t, "what is 2+2?\n", append(base, "-")...); code != ExitOK {
		t.Fatalf("run -: exit %d: %s", code, stderr)
	}
	if body := string(srv.Requests()[1].Body); !strings.Contains(body, `"content":"what is 2+2?"`) {
		t.Errorf("run - did not send stdin as the prompt: %s", body)
	}

	if code, _, stderr := runIn(t, "", append(base, "-")...); code != ExitUsage || !strings.Contains(stderr, "nothing is piped") {
		t.Errorf("run - with nothing piped: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runIn(t, "\xff\xfe", append(base, "x")...); code != ExitUsage || !strings.Contains(stderr, "not UTF-8") {
		t.Errorf("binary stdin: exit %d: %s", code, stderr)
	}
}

func TestRunConnectionErrors(t *testing.T) {
	srv := openaitest.NewServer(openaitest.Reply{Text: "x"})
	defer srv.Close()
	noV1 := strings.TrimSuffix(srv.URL(), "/v1")
	tests := []struct {
		name, base string
		want       []string
	}{
		{"base URL without /v1", noV1, []string{"The server at " + noV1 + " answered 404 Not Found", "try --base-url " + noV1 + "/v1"}},
		{"connection refused", "http://127.0.0.1:1/v1", []string{"not reachable at http://127.0.0.1:1/v1 (connection refused)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runIn(t, "", "run", "--base-url", tt.base, "--model", "m", "--tools", "none", "--no-skills", "--workdir", t.TempDir(), "hi")
			if code != ExitFailed {
				t.Errorf("exit %d", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "retrying") {
				t.Errorf("retried:\n%s", stderr)
			}
		})
	}
}

func TestRunTimeoutSaysSo(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	code, _, stderr := runIn(t, "", "run", "--base-url", srv.URL+"/v1", "--model", "m", "--tools", "none", "--no-skills", "--workdir", t.TempDir(), "--timeout", "200ms", "hi")
	if code != ExitFailed || !strings.Contains(stderr, "--timeout 200ms was reached") || strings.Contains(stderr, "context deadline exceeded") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestSmallFrictions(t *testing.T) {
	for _, cmd := range []string{"tools", "skills", "run", "chat"} {
		if code, _, stderr := runIn(t, "", cmd, "-h"); code != ExitOK || !strings.Contains(stderr, "-") {
			t.Errorf("%s -h: exit %d: %s", cmd, code, stderr)
		}
	}
	code, _, stderr := runIn(t, "", "run", "--nope", "x")
	if code != ExitUsage || strings.Count(stderr, "flag provided but not defined: -nope") != 1 {
		t.Errorf("a wrong flag: exit %d, said %d times:\n%s", code, strings.Count(stderr, "not defined"), stderr)
	}

	dir := t.TempDir()
	putFile(t, filepath.Join(dir, ".agents", "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: Deploys.\n---\nSteps.\n")
	code, stdout, _ := runIn(t, "", "skills", "--json", "--workdir", dir)
	if code != ExitOK || !strings.Contains(stdout, `"name": "deploy"`) || strings.Contains(stdout, `"Name"`) {
		t.Errorf("skills --json: %s", stdout)
	}

	agent := filepath.Join(dir, "agent.md")
	putFile(t, agent, "---\ntool: read_file\n---\nYou review.\n")
	code, _, stderr = runIn(t, "", "run", "--agent", agent, "--model", "m", "--base-url", "http://127.0.0.1:1/v1", "x")
	if code != ExitUsage || !strings.Contains(stderr, `unknown key "tool" (the keys are name, description, model, provider, tools, max_turns)`) || strings.Contains(stderr, "cli.agentFile") {
		t.Errorf("agent file typo: %s", stderr)
	}

	cfg, err := parseConfig("c.toml", []byte("[agents.r]\nmax_turns = 7\n"))
	if err != nil || cfg.Agents["r"].MaxTurns != 7 {
		t.Errorf("max_turns in config agents: %+v %v", cfg, err)
	}
	if _, err := parseConfig("c.toml", []byte("[agents.r]\nmax_turns = 7\nmax_steps = 3\n")); err == nil {
		t.Error("max_turns with max_steps is accepted")
	}

	if code, stdout, _ := runIn(t, "", "version"); code != ExitOK || strings.Contains(stdout, "dev\n") || !strings.Contains(stdout, "go1.") {
		t.Errorf("version: %q", stdout)
	}
}
