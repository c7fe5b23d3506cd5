package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/session"
)

// get sends method path to s with key as its bearer key ("" for none)
// and returns the status and body.
func (s *servingCmd) get(t *testing.T, method, path, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// writeSecret writes content to a new file of dir with mode.
func writeSecret(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeOperatorKeys runs hrns serve with a tenant's API key and
// operator keys from all three places (HRNS_OPERATOR_KEYS,
// --operator-keys-file, operator_keys in the config file): a tenant
// gets GET /api/v2/replicas as a route that does not exist and /healthz
// without the replica; each operator key gets both, and no tenant
// route.
func TestServeOperatorKeys(t *testing.T) {
	dir := t.TempDir()
	file := writeSecret(t, dir, "operators", "# the operators\nsk-op-file\n", 0o600)
	cfg := writeSecret(t, dir, "config.toml", "operator_keys = [\"sk-op-config\"]\n", 0o600)
	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-tenant", "HRNS_OPERATOR_KEYS": "sk-op-env"},
		"--model", "m", "--config", cfg, "--operator-keys-file", file, "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	if strings.Contains(s.logs.String(), "no operator key") {
		t.Errorf("the log says there is no operator key:\n%s", s.logs)
	}

	_, missing := s.get(t, "GET", "/api/v2/no-such-route", "sk-tenant")
	for _, key := range []string{"sk-tenant", "", "sk-wrong"} {
		if status, body := s.get(t, "GET", "/api/v2/replicas", key); status != http.StatusNotFound || body != missing {
			t.Errorf("GET /api/v2/replicas with key %q: %d %s; want what a route that does not exist answers, 404 %s", key, status, body, missing)
		}
		status, body := s.get(t, "GET", "/healthz", key)
		var h map[string]any
		if err := json.Unmarshal([]byte(body), &h); err != nil || status != http.StatusOK || len(h) != 1 || h["status"] != "ok" {
			t.Errorf("GET /healthz with key %q: %d %s; want the status alone", key, status, body)
		}
	}
	if status, body := s.get(t, "GET", "/api/v2/sessions", "sk-tenant"); status != http.StatusOK {
		t.Errorf("the tenant's key: %d %s", status, body)
	}

	host, _ := os.Hostname()
	for _, key := range []string{"sk-op-env", "sk-op-file", "sk-op-config"} {
		status, body := s.get(t, "GET", "/api/v2/replicas", key)
		var list struct{ Items []session.Replica }
		if err := json.Unmarshal([]byte(body), &list); err != nil || status != http.StatusOK || len(list.Items) != 1 {
			t.Fatalf("GET /api/v2/replicas with the operator key %s: %d %s", key, status, body)
		}
		if r := list.Items[0]; r.Host != host || r.PID != os.Getpid() || !r.Self || r.ID == "" {
			t.Errorf("the replica shown to the operator key %s: %+v; want this process (%s, %d)", key, r, host, os.Getpid())
		}
		status, body = s.get(t, "GET", "/healthz", key)
		var h struct {
			Status, Replica string
			MCPSecrets      *session.MCPSecretsHealth `json:"mcp_secrets"`
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || status != http.StatusOK || h.Status != "ok" || h.Replica != list.Items[0].ID || h.MCPSecrets == nil {
			t.Errorf("GET /healthz with the operator key %s: %d %s; want the replica %s", key, status, body, list.Items[0].ID)
		}
		// An operator key is no API key.
		for _, p := range []string{"/api/v2/sessions", "/api/v2/agents", "/api/v2/quota/tokens"} {
			if status, body := s.get(t, "GET", p, key); status != http.StatusUnauthorized {
				t.Errorf("GET %s with the operator key %s: %d %s, want 401", p, key, status, body)
			}
		}
		if status, body := s.get(t, "POST", "/api/v2/sessions", key); status != http.StatusUnauthorized {
			t.Errorf("POST /api/v2/sessions with the operator key %s: %d %s, want 401", key, status, body)
		}
	}
}

// TestServeWithoutOperatorKey: with API keys and no operator key, the
// replicas answer nobody, and the log says how to read them.
func TestServeWithoutOperatorKey(t *testing.T) {
	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-tenant"},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	for _, key := range []string{"sk-tenant", ""} {
		if status, body := s.get(t, "GET", "/api/v2/replicas", key); status != http.StatusNotFound {
			t.Errorf("GET /api/v2/replicas with key %q: %d %s, want 404", key, status, body)
		}
	}
	if !strings.Contains(s.logs.String(), "no operator key") || !strings.Contains(s.logs.String(), "HRNS_OPERATOR_KEYS") {
		t.Errorf("the log does not say that no operator key reads the replicas:\n%s", s.logs)
	}
}

// TestServeOperatorKeysRefused: the operator keys file is checked as the
// API keys file is; a key in both lists, or an empty key in the config
// file, stops hrns serve with a usage error that does not repeat a key.
func TestServeOperatorKeysRefused(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"group-readable file", nil, []string{"--operator-keys-file", writeSecret(t, dir, "g", "sk-op\n", 0o640)}, "chmod 600"},
		{"world-readable file", nil, []string{"--operator-keys-file", writeSecret(t, dir, "w", "sk-op\n", 0o604)}, "chmod 600"},
		{"empty file", nil, []string{"--operator-keys-file", writeSecret(t, dir, "e", "# none yet\n", 0o600)}, "no key"},
		{"a directory", nil, []string{"--operator-keys-file", dir}, "regular file"},
		{"missing file", nil, []string{"--operator-keys-file", filepath.Join(dir, "none")}, "no such file"},
		{"both lists, environment", map[string]string{"HRNS_API_KEYS": "sk-a,sk-shared", "HRNS_OPERATOR_KEYS": "sk-shared"}, nil, "both an API key and an operator key"},
		{"both lists, file and config", map[string]string{"HRNS_API_KEYS": "sk-a"},
			[]string{"--operator-keys-file", writeSecret(t, dir, "op", "sk-shared\n", 0o600), "--config", writeSecret(t, dir, "both.toml", "api_keys = [\"sk-shared\"]\n", 0o600)},
			"both an API key and an operator key"},
		{"config readable by others", nil, []string{"--config", writeSecret(t, dir, "open.toml", "operator_keys = [\"sk-op\"]\n", 0o644)}, "chmod 600"},
		{"empty operator key in the config", nil, []string{"--config", writeSecret(t, dir, "blank.toml", "operator_keys = [\" \"]\n", 0o600)}, "operator_keys[0] is empty"},
		{"empty API key in the config", nil, []string{"--config", writeSecret(t, dir, "blankapi.toml", "api_keys = [\"sk-a\", \"\"]\n", 0o600)}, "api_keys[1] is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServe(t, tt.env, append(tt.args, "--db", db)...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.want)
			}
			if strings.Contains(stderr, "sk-shared") || strings.Contains(stderr, "sk-op") {
				t.Errorf("the error repeats a key: %q", stderr)
			}
		})
	}
}

// TestProjectConfigRefusesOperatorKeys: a repository's .hrns/config.toml
// may not give hrns serve operator keys, as it may not give API keys.
func TestProjectConfigRefusesOperatorKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".hrns"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeSecret(t, filepath.Join(dir, ".hrns"), "config.toml", "operator_keys = [\"sk-repo\"]\n", 0o600)
	err := (&Config{}).mergeHrnsProject(dir)
	if err == nil || !strings.Contains(err.Error(), `"operator_keys" may be set only in your own config file`) {
		t.Errorf("a project config with operator_keys: %v; want it refused", err)
	}
}
