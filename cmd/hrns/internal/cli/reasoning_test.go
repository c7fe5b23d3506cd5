package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// TestRunReasoningEffort: hrns run --reasoning-effort (and an agent
// file's reasoning_effort) reach the provider as its own setting; a
// level the model has no setting for is a usage error naming the model.
func TestRunReasoningEffort(t *testing.T) {
	srv := responsestest.NewServer(responsestest.Reply{Text: "a"}, responsestest.Reply{Text: "b"})
	defer srv.Close()
	getenv := func(k string) string {
		return map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": srv.URL()}[k]
	}
	agent := filepath.Join(t.TempDir(), "thinker.md")
	if err := os.WriteFile(agent, []byte("---\nmodel: o3\nreasoning_effort: low\n---\nThink.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--model", "gpt-5.2", "--reasoning-effort", "xhigh"},
		{"--agent", agent},
	} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append(append([]string{"run", "--provider", "openai-responses", "--tools", "none", "--no-skills"}, args...), "hi"),
			&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv})
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut.String())
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		var b struct {
			Model     string `json:"model"`
			Reasoning struct {
				Effort string `json:"effort"`
			} `json:"reasoning"`
		}
		json.Unmarshal(r.Body, &b)
		got = append(got, b.Model+":"+b.Reasoning.Effort)
	}
	if strings.Join(got, " ") != "gpt-5.2:xhigh o3:low" {
		t.Errorf("requests' model:effort = %v", got)
	}
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"run", "--provider", "openai-responses", "--model", "gpt-4o", "--reasoning-effort", "low", "--tools", "none", "--no-skills", "hi"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv})
	if code == ExitOK || !strings.Contains(errOut.String(), `model "gpt-4o" has no reasoning setting`) {
		t.Errorf("gpt-4o with low: exit %d: %s", code, errOut.String())
	}
}

// TestServeAgentReasoningEffort: an agent of --agents with
// reasoning_effort runs its sessions with it; a bad value stops hrns
// serve at start.
func TestServeAgentReasoningEffort(t *testing.T) {
	t.Parallel()
	model := openaitest.NewServer(openaitest.Reply{Text: "thought"})
	defer model.Close()
	agents := t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "deep.md"), []byte("---\nmodel: o4-mini\nreasoning_effort: medium\n---\nThink hard.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--agents", agents)
	resp, err := http.Post(s.url+"/api/v2/sessions", "application/json", strings.NewReader(`{"agent":"deep","messages":"go"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	for range 500 {
		if len(model.Requests()) > 0 {
			break
		}
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
	}
	reqs := model.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), `"reasoning_effort":"medium"`) {
		t.Fatalf("the agent's request: %v", reqs)
	}

	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.md"), []byte("---\nreasoning_effort: maximal\n---\nx\n"), 0o644)
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"serve", "--model", "m", "--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db"), "--agents", bad},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "k", "HOME": t.TempDir()}[k] }})
	if code == ExitOK || !strings.Contains(errOut.String(), "reasoning_effort") {
		t.Errorf("a bad reasoning_effort: exit %d: %s", code, errOut.String())
	}
}

// TestChatReasoningEffortChecked: hrns chat reads --reasoning-effort as
// hrns run does: a level the model has no setting for stops it at start.
func TestChatReasoningEffortChecked(t *testing.T) {
	term := func() bool { return true }
	home := t.TempDir()
	var errOut bytes.Buffer
	code := Run(t.Context(), []string{"chat", "--model", "gpt-4o", "--reasoning-effort", "low", "--no-skills"},
		&IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errOut, Interactive: term, OutTerminal: term,
			Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "k", "HOME": home}[k] }})
	if code != ExitUsage || !strings.Contains(errOut.String(), `model "gpt-4o" has no reasoning setting`) {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
}
