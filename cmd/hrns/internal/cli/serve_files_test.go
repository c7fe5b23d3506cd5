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
)

// TestServeSessionFilesAndQuota: hrns serve serves each session's
// workspace from --workdir's sessions directory, the one its agent's file
// tools work in, and reports the token quota of --tokens-per-day.
func TestServeSessionFilesAndQuota(t *testing.T) {
	wd, agents := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "reader.md"), []byte("---\ntools: [read_file]\n---\nYou read files.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k"}, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"),
		"--workdir", wd, "--agents", agents, "--tokens-per-day", "5000")
	post := func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, agent := range []string{`"reader"`, `{"name":"inline"}`} {
		code, b := post("/api/v2/sessions", `{"agent":`+agent+`}`)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
		var v struct{ ID string }
		json.Unmarshal(b, &v)
		code, b = post("/api/v2/sessions/"+v.ID+"/files/write_file", `{"path":"notes.txt","content_base64":"aGk="}`)
		if code != http.StatusOK {
			t.Fatalf("write_file: %d %s", code, b)
		}
		hex := strings.ReplaceAll(v.ID, "-", "")
		found, _ := filepath.Glob(filepath.Join(wd, "sessions", "*", "notes.txt"))
		var dir string
		for _, f := range found {
			if b, _ := os.ReadFile(f); bytes.Equal(b, []byte("hi")) {
				dir = filepath.Base(filepath.Dir(f))
				os.Remove(f)
			}
		}
		switch {
		case dir == "":
			t.Errorf("agent %s: the file is not under %s/sessions", agent, wd)
		case agent == `"reader"` && dir == hex:
			t.Errorf("agent %s: the file is in the session's ID's directory, not its tools' workspace", agent)
		case agent != `"reader"` && dir != hex:
			t.Errorf("agent %s: the file is in %s, want the session's ID's directory", agent, dir)
		}
	}
	resp, err := http.Get(s.url + "/api/v2/quota/tokens")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var q struct{ Limit, Used, Remaining *int64 }
	json.NewDecoder(resp.Body).Decode(&q)
	if q.Limit == nil || *q.Limit != 5000 || *q.Used != 0 || *q.Remaining != 5000 {
		t.Errorf("quota/tokens = %+v", q)
	}
}

// TestServeQuotaOptions: the token quota's flags and config are checked.
func TestServeQuotaOptions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("[quota]\ntokens_per_day = 10\ntokens_per_month = 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--tokens-per-day", "-1"},
		{"--tokens-per-day", "10", "--tokens-per-month", "100"},
		{"--config", cfg},
	} {
		code, stderr := runServe(t, nil, append([]string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db")}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, "tokens") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}
