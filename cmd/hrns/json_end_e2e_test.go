package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// endLine runs hrns run --json with env in dir and returns its end line.
func endLine(t *testing.T, dir string, env []string, args ...string) map[string]json.RawMessage {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), hrnsBin, append([]string{"run", "--json"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hrns run --json %q: %v\n%s", args, err, stderr.String())
	}
	var end map[string]json.RawMessage
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		if string(line["type"]) == `"end"` {
			end = line
		}
	}
	if end == nil {
		t.Fatalf("no end line:\n%s", stdout.String())
	}
	return end
}

// TestJSONEndCarriesCostAndSessionID: --json's end line says what the run
// cost (total_cost_usd, null at an unknown price) and the conversation's
// ID (session_id), which hrns run --resume continues.
func TestJSONEndCarriesCostAndSessionID(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{Text: "One.", Usage: &llm.Usage{InputTokens: 1_000_000, OutputTokens: 250_000}},
		openaitest.Reply{Text: "Two.", Usage: &llm.Usage{InputTokens: 10, OutputTokens: 10}},
		openaitest.Reply{Text: "Three.", Usage: &llm.Usage{InputTokens: 10, OutputTokens: 10}},
	)
	defer srv.Close()
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-4.1"}

	end := endLine(t, dir, env, "first question")
	// gpt-4.1: $2 per million input tokens, $8 per million output.
	if got := string(end["total_cost_usd"]); got != "4" {
		t.Errorf("total_cost_usd = %s, want 4", got)
	}
	var id string
	if err := json.Unmarshal(end["session_id"], &id); err != nil || id == "" {
		t.Fatalf("session_id = %s (%v)", end["session_id"], err)
	}

	end = endLine(t, dir, env, "--resume", id, "second question")
	var id2 string
	json.Unmarshal(end["session_id"], &id2)
	if id2 != id {
		t.Errorf("the resumed run's session_id = %q, want %q", id2, id)
	}
	reqs := srv.Requests()
	body := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{"first question", "One.", "second question"} {
		if !strings.Contains(body, want) {
			t.Errorf("the resumed request lacks %q: %s", want, body)
		}
	}

	// A model without a price: null, not a guess.
	env[len(env)-1] = "OPENAI_MODEL=my-local-model"
	end = endLine(t, dir, env, "third")
	if got, ok := end["total_cost_usd"]; !ok || string(got) != "null" {
		t.Errorf("total_cost_usd at an unknown price = %s (present: %v), want null", got, ok)
	}
}
