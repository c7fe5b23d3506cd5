package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
)

// TestServePublicURL: share URLs are made from --public-url; a value that
// is not an absolute http(s) URL stops the server.
func TestServePublicURL(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"}
	for _, bad := range []string{"hrns.example.com", "ftp://hrns.example.com", "https://hrns.example.com/?a=1", "https://u:p@hrns.example.com"} {
		if code, stderr := runServe(t, env, "--model", "m", "--public-url", bad, "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db")); code != ExitUsage || !strings.Contains(stderr, "--public-url") {
			t.Errorf("--public-url %s: exit %d, %s", bad, code, stderr)
		}
	}
	s := startServe(t, env, "--model", "m", "--public-url", "https://hrns.example.com/agents/", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	c := client.New(s.url, "sk-a", nil)
	h, err := c.StartSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	link, err := h.Share(t.Context())
	if err != nil || !strings.HasPrefix(link, "https://hrns.example.com/agents/api/v2/shared/"+h.ID()+".") {
		t.Errorf("share URL %q, %v", link, err)
	}
	if _, err := c.SharedEvents(t.Context(), link, 1, 10); err != nil {
		t.Errorf("SharedEvents(%s) = %v", link, err)
	}
}
