package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestServeWorkstation: hrns serve --workstation gives a caller's agent
// the workstation environment: the sandboxed shell and the file tools in
// the session's workspace (where the files of its messages are, and which
// the session files operations serve), and the browser; host user_device
// and android are refused, naming them.
func TestServeWorkstation(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_sh", "run_command", `{"command":"cat files/in.txt; echo made-here > made.txt"}`)}},
		openaitest.Reply{Text: "done"},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--workdir", wd, "--workstation", "--yes", "--browser-profiles", t.TempDir())
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
	in := base64.StdEncoding.EncodeToString([]byte("given-by-the-caller\n"))
	code, b := post("/api/v2/sessions", `{"agent":{"name":"worker","environments":[{"kind":"workstation"}]},
		"messages":{"message":"Work.","files":[{"source":"`+in+`","name":"in.txt"}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var v struct{ ID string }
	json.Unmarshal(b, &v)
	seen := 0
	for range 300 {
		resp, err := http.Get(s.url + "/api/v2/sessions/" + v.ID + "/changes?wait_for_seconds=5&from_index=" + strconv.Itoa(seen))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Status    string
			NewEvents []json.RawMessage `json:"new_events"`
		}
		json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		seen += len(c.NewEvents)
		if c.Status == "completed" || c.Status == "failed" {
			if c.Status != "completed" {
				t.Fatalf("session %s\n%s", c.Status, s.logs.String())
			}
			break
		}
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests\n%s", len(reqs), s.logs.String())
	}
	first := string(reqs[0].Body)
	want := []string{`"name":"run_command"`, `"name":"read_file"`, `"name":"write_file"`, `"name":"web_fetch"`}
	if _, err := browser.FindChromium(); err == nil {
		want = append(want, `"name":"browser_navigate"`)
	}
	for _, w := range want {
		if !strings.Contains(first, w) {
			t.Errorf("the workstation's tools lack %s", w)
		}
	}
	if !strings.Contains(string(reqs[1].Body), "given-by-the-caller") {
		t.Errorf("the shell did not read the message's file:\n%.2000s", reqs[1].Body)
	}
	hex := strings.ReplaceAll(v.ID, "-", "")
	if got, err := os.ReadFile(filepath.Join(wd, "sessions", hex, "made.txt")); err != nil || string(got) != "made-here\n" {
		t.Errorf("made.txt in the workspace: %q, %v", got, err)
	}
	code, b = post("/api/v2/sessions/"+v.ID+"/files/read_file", `{"path":"made.txt"}`)
	if code != http.StatusOK || !strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte("made-here\n"))) {
		t.Errorf("read_file made.txt: %d %s", code, b)
	}

	for body, msg := range map[string]string{
		`{"agent":{"name":"a","environments":[{"kind":"workstation","host":"user_device"}]},"messages":"x"}`: `host must be \"cloud\"`,
		`{"agent":{"name":"a","environments":[{"kind":"android"}]},"messages":"x"}`:                          `environment kind \"android\" is not available on this server`,
		`{"agent":{"name":"a","environments":["android"]},"messages":"x"}`:                                   `environment kind \"android\" is not available on this server`,
	} {
		code, b := post("/api/v2/sessions", body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(b), msg) || !strings.Contains(string(b), `"loc":["body","agent","environments",0]`) {
			t.Errorf("%s: %d %s, want 422 at body.agent.environments.0 saying %s", body, code, b, msg)
		}
	}
}

// TestServeWorkstationNeedsWorkdir: --workstation without --workdir is a
// usage error.
func TestServeWorkstationNeedsWorkdir(t *testing.T) {
	var out, errb strings.Builder
	code := Run(t.Context(), []string{"serve", "--workstation", "--model", "m", "--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db")},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "k", "HOME": t.TempDir()}[k] }})
	if code == 0 || !strings.Contains(errb.String(), "--workstation needs --workdir") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}
