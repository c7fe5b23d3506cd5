package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestProjectConfigNeedsAgreement (issue 32, finding 2): a repository's
// .hrns/config.toml that selects a tool beyond the user's (web_fetch,
// which reaches the network without asking) makes hrns run ask the person
// once per project and file content; without a terminal, or with --json,
// the run is refused before any model request unless --trust-project.
func TestProjectConfigNeedsAgreement(t *testing.T) {
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	configPath := filepath.Join(repo, ".hrns", "config.toml")
	putFile(t, configPath, "tools = [\"read_file\", \"web_fetch\"]\n")
	home, state := t.TempDir(), t.TempDir()
	userConfig := filepath.Join(home, "config.toml")
	putFile(t, userConfig, "")

	srv := openaitest.NewServer()
	defer srv.Close()
	run := func(terminal bool, input string, args ...string) (int, string, []string) {
		t.Helper()
		srv.Push(openaitest.Reply{Text: "done"})
		before := len(srv.Requests())
		env := map[string]string{"HOME": home, "XDG_STATE_HOME": state, "HRNS_CONFIG": userConfig}
		var out, errOut bytes.Buffer
		args = append([]string{"run", "--base-url", srv.URL(), "--model", "m", "--no-skills", "--workdir", repo}, args...)
		code := Run(t.Context(), append(args, "hello"), &IO{
			In: strings.NewReader(input), Out: &out, Err: &errOut,
			Getenv:      func(k string) string { return env[k] },
			Interactive: func() bool { return terminal },
		})
		var bodies []string
		for _, r := range srv.Requests()[before:] {
			bodies = append(bodies, string(r.Body))
		}
		return code, errOut.String(), bodies
	}
	// refused and offered say what is wrong with a run's outcome, or "".
	refused := func(code int, stderr string, bodies []string) string {
		if code != ExitUsage || !strings.Contains(stderr, "web_fetch") || !strings.Contains(stderr, "--trust-project") {
			return fmt.Sprintf("exit %d, stderr %q; want %d naming web_fetch and --trust-project", code, stderr, ExitUsage)
		}
		if len(bodies) > 0 {
			return fmt.Sprintf("the model was asked anyway: %s", bodies)
		}
		return ""
	}
	offered := func(code int, stderr string, bodies []string) string {
		if code != ExitOK || len(bodies) != 1 || !strings.Contains(bodies[0], `"web_fetch"`) {
			return fmt.Sprintf("exit %d, stderr %q, requests %q; want web_fetch offered", code, stderr, bodies)
		}
		return ""
	}

	t.Run("no terminal", func(t *testing.T) {
		if msg := refused(run(false, "")); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("json", func(t *testing.T) {
		if msg := refused(run(true, "y\n", "--json")); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("declined", func(t *testing.T) {
		code, stderr, bodies := run(true, "n\n")
		if code != ExitUsage || !strings.Contains(stderr, "web_fetch: fetches any public web address") || !strings.Contains(stderr, "not agreed") || len(bodies) > 0 {
			t.Errorf("exit %d, stderr %q, %d requests", code, stderr, len(bodies))
		}
	})
	t.Run("trust-project", func(t *testing.T) {
		if msg := offered(run(false, "", "--trust-project")); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("agreed", func(t *testing.T) {
		if msg := offered(run(true, "y\n")); msg != "" {
			t.Error(msg)
		}
		fi, err := os.Stat(filepath.Join(state, "hrns", "trusted-projects.toml"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the agreement is not kept in a private file: %v, %v", fi, err)
		}
	})
	t.Run("remembered", func(t *testing.T) {
		if msg := offered(run(false, "")); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("changed file asks again", func(t *testing.T) {
		putFile(t, configPath, "tools = [\"read_file\", \"web_fetch\"]\nmax_turns = 4\n")
		if msg := refused(run(false, "")); msg != "" {
			t.Error(msg)
		}
	})
	t.Run("default tools only", func(t *testing.T) {
		putFile(t, configPath, "tools = [\"read_file\", \"run_command\"]\n")
		if code, stderr, bodies := run(false, ""); code != ExitOK || len(bodies) != 1 {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("the user's own tools", func(t *testing.T) {
		putFile(t, configPath, "tools = [\"web_fetch\"]\nmax_turns = 5\n")
		putFile(t, userConfig, "tools = [\"read_file\", \"web_fetch\"]\n")
		defer putFile(t, userConfig, "")
		if msg := offered(run(false, "")); msg != "" {
			t.Error(msg)
		}
	})
}
