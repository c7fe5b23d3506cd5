package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

// TestServeAgentRunCode: an agent of the config with run_code, todo_write
// and file tools. The program waits for the sessions API's approval, which
// shows its source; once approved it runs, its read-only capability works
// and its write_file, which requires approval, is refused (a running
// program cannot wait). The plan written with todo_write is in the events.
func TestServeAgentRunCode(t *testing.T) {
	work := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[agents.coder]\ninstructions = \"Code.\"\ntools = [\"todo_write\", \"run_code\", \"grep\", \"write_file\"]\n"), 0o600)
	program := "hits = grep(pattern=\"nothing here\")\nwrite_file(path=\"a.txt\", content=hits)\n"
	args, _ := json.Marshal(map[string]string{"code": program})
	plan := `{"todos":[{"content":"Search","status":"completed"},{"content":"Report","status":"in_progress"}]}`
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_code", string(args))}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c2", "todo_write", plan)}},
		openaitest.Reply{Text: "done"},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
		"--model", "test-model", "--config", cfg, "--workdir", work, "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-a", nil)
	h, err := c.StartSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: "coder"}, Messages: client.Text("go")})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the program's approval request.
	var cursor int64
	var pending []session.ToolRequest
	for deadline := time.Now().Add(time.Minute); len(pending) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no approval was asked for")
		}
		ch, err := h.Changes(t.Context(), &client.ChangesOptions{FromIndex: cursor, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ch == nil {
			continue
		}
		for _, e := range ch.NewEvents {
			cursor = e.Index + 1
			var st session.ActiveState
			if e.Type == session.EventActiveState && json.Unmarshal(e.Data, &st) == nil {
				pending = st.PendingApprovals
			}
		}
	}
	if len(pending) != 1 || pending[0].ToolName != "run_code" || !strings.Contains(string(pending[0].Args), `write_file(path=\"a.txt\"`) {
		t.Fatalf("pending approvals %+v, want the program", pending)
	}
	if err := h.Approve(t.Context(), pending[0].ID, true, ""); err != nil {
		t.Fatal(err)
	}
	res, err := h.WaitForCompletion(t.Context())
	if err != nil || res.Status != session.StatusCompleted {
		t.Fatalf("session: %v %+v", err, res)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if body := string(reqs[1].Body); !strings.Contains(body, "a program run by hrns serve cannot wait for an approval") {
		t.Errorf("the program's write_file was not refused:\n%s", body)
	}
	dirs, _ := os.ReadDir(filepath.Join(work, "sessions"))
	if len(dirs) != 1 {
		t.Fatalf("%d session directories", len(dirs))
	}
	if _, err := os.Stat(filepath.Join(work, "sessions", dirs[0].Name(), "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt was written (%v)", err)
	}
	// The plan, from the events, as a consumer reads it.
	ch, err := h.Changes(t.Context(), &client.ChangesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ch.NewEvents {
		var d session.AgentEventData
		if json.Unmarshal(e.Data, &d) != nil || d.Kind != session.KindToolResult || d.ToolReq == nil || d.ToolReq.ToolName != "todo_write" {
			continue
		}
		p, err := tools.ParsePlan(d.ToolReq.Args)
		if err != nil || len(p.Todos) != 2 || p.Todos[1].Status != tools.TodoInProgress {
			t.Errorf("plan %+v, %v", p, err)
		}
		found = true
	}
	if !found {
		t.Error("no todo_write result among the events")
	}
}
