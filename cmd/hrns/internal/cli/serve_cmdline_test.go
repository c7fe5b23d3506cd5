package cli

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestServeRulesJudgedAsTheShellReadsIt: issue 32, finding 1, through
// hrns serve. run_command runs its line with /bin/sh (dash here), which
// reads "git status &>/dev/null touch pwned" as "git status &" and
// "touch pwned"; bash's reading is one git command. Neither the allow rule
// run_command(git status:*) nor the bypass mode past the deny rule
// run_command(touch:*) may run it.
func TestServeRulesJudgedAsTheShellReadsIt(t *testing.T) {
	const line = "git status &>/dev/null touch pwned"
	tests := []struct {
		name, config string
		args         []string
		waits        bool // the call waits for a decision, which is no
	}{
		{"allow rule", "[permissions]\nallow = [\"run_command(git status:*)\"]\n", nil, true},
		{"deny rule", "[permissions]\ndeny = [\"run_command(touch:*)\"]\n", []string{"--yes"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			cfg := filepath.Join(t.TempDir(), "config.toml")
			os.WriteFile(cfg, []byte(tt.config+"[agents.shell]\ninstructions = \"Run commands.\"\ntools = [\"run_command\"]\n"), 0o600)
			args, _ := json.Marshal(map[string]string{"command": line})
			model := openaitest.NewServer(
				openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_command", string(args))}},
				openaitest.Reply{Text: "done"},
			)
			defer model.Close()
			s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
				append([]string{"--model", "test-model", "--config", cfg, "--workdir", work, "--db", "sqlite:" + filepath.Join(t.TempDir(), "hrns.db")}, tt.args...)...)
			c := client.New(s.url, "sk-a", nil)
			h, err := c.StartSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: "shell"}, Messages: client.Text("go")})
			if err != nil {
				t.Fatal(err)
			}
			waited := false
			var cursor int64
			for deadline := time.Now().Add(time.Minute); ; {
				if time.Now().After(deadline) {
					t.Fatal("the session neither waited nor ended")
				}
				v, err := h.Get(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if v.Status.Status == session.StatusCompleted || v.Status.Status == session.StatusFailed {
					break
				}
				ch, err := h.Changes(t.Context(), &client.ChangesOptions{FromIndex: cursor, Wait: time.Second})
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
						for _, p := range st.PendingApprovals {
							waited = true
							if err := h.Approve(t.Context(), p.ID, false, "no"); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			if waited != tt.waits {
				t.Errorf("the call waited for a decision: %v, want %v", waited, tt.waits)
			}
			filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "pwned" {
					t.Errorf("the line ran: %s", p)
				}
				return nil
			})
		})
	}
}
