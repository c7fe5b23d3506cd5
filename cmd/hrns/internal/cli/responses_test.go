package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// hrns run --provider openai-responses, through the real command and the
// Responses wire format: the model lists the work directory with a tool,
// then answers; the second request carries the call, its output and the
// encrypted reasoning, statelessly.
func TestRunOpenAIResponses(t *testing.T) {
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := responsestest.NewServer(
		responsestest.Reply{Reasoning: "List first.", Encrypted: "gAAAA-e2e", ToolCalls: []llm.ToolCall{responsestest.ToolCall("call_1", "list_files", `{"path":"."}`)}},
		responsestest.Reply{Text: "There is one file, notes.txt."},
	)
	defer srv.Close()
	getenv := func(k string) string {
		return map[string]string{"OPENAI_API_KEY": "sk-e2e", "OPENAI_BASE_URL": srv.URL(), "OPENAI_MODEL": "gpt-5"}[k]
	}
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"run", "--provider", "openai-responses", "--tools", "list_files", "--no-skills", "--workdir", work, "what is here?"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if got := out.String(); got != "There is one file, notes.txt.\n" {
		t.Errorf("stdout = %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests\n%s", len(reqs), errOut.String())
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-e2e" {
		t.Errorf("Authorization = %q", got)
	}
	var second struct {
		Model string           `json:"model"`
		Store bool             `json:"store"`
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range second.Input {
		kinds = append(kinds, it["type"].(string))
	}
	if second.Model != "gpt-5" || second.Store || !strings.Contains(strings.Join(kinds, " "), "reasoning function_call function_call_output") {
		t.Errorf("second request: model %q, store %v, items %v", second.Model, second.Store, kinds)
	}
	if !bytes.Contains(reqs[1].Body, []byte(`"encrypted_content":"gAAAA-e2e"`)) || !bytes.Contains(reqs[1].Body, []byte("notes.txt")) {
		t.Errorf("second request lacks the reasoning or the tool output:\n%s", reqs[1].Body)
	}
}
