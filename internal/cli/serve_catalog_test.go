package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The config's catalog gives configured agents more names; hrns serve lists
// them as read-only agents, and refuses a catalog naming no agent.
func TestServeCatalog(t *testing.T) {
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const agent = "[agents.surfer]\ndescription = \"Browses.\"\ntools = [\"web\"]\n"
	for _, tt := range []struct{ name, config, want string }{
		{"unknown agent", agent + "[catalog]\n\"h/web-surfer-flash\" = \"nobody\"\n", `"h/web-surfer-flash" names agent "nobody", which is not defined (agents: surfer)`},
		{"an agent's own name", agent + "[catalog]\nsurfer = \"surfer\"\n", `"surfer" is already the name of an agent`},
		{"empty name", agent + "[catalog]\n\"\" = \"surfer\"\n", `"" is not a name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServe(t, nil, "--config", write(tt.config), "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}

	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k"}, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"),
		"--config", write(agent+"[catalog]\n\"h/web-surfer-flash\" = \"surfer\"\n"))
	resp, err := http.Get(s.url + "/api/v2/agents/h/web-surfer-flash")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Name, Description string
		Environments      []string
		ReadOnly          bool `json:"read_only"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the catalog agent: %d, %v", resp.StatusCode, err)
	}
	if a.Name != "h/web-surfer-flash" || a.Description != "Browses." || len(a.Environments) != 1 || a.Environments[0] != "web" || !a.ReadOnly {
		t.Errorf("catalog agent = %+v", a)
	}
}
