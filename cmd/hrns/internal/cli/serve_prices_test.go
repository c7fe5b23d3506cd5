package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestServePrices: the config's [prices."MODEL"] prices the sessions of
// hrns serve (their metrics' costs); a model without a price has null
// costs.
func TestServePrices(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[prices.\"house-model\"]\ninput = 1.0\noutput = 4.0\n"), 0o600)
	usage := &llm.Usage{InputTokens: 1e6, OutputTokens: 5e5}
	model := openaitest.NewServer(openaitest.Reply{Text: "priced", Usage: usage}, openaitest.Reply{Text: "unpriced", Usage: usage})
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
		"--model", "house-model", "--config", cfg, "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-a", nil)
	for _, tc := range []struct {
		model string
		total float64 // -1: null
	}{{"house-model", 3}, {"llama-local", -1}} {
		res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "a", Model: tc.model}}, Messages: client.Text("go")})
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%s: %v %+v", tc.model, err, res)
		}
		ch, err := c.Session(res.SessionID).Changes(t.Context(), &client.ChangesOptions{ExcludeEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		got := ch.Metrics.TotalCost
		if tc.total < 0 && got != nil || tc.total >= 0 && (got == nil || *got != tc.total) {
			t.Errorf("%s: total cost %v, want %v", tc.model, got, tc.total)
		}
	}
}
