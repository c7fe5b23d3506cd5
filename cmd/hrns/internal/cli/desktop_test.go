package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// needDesktop skips a test without the X tools, except in CI, where
// .ci/run installs them.
func needDesktop(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"Xvfb", "xdotool", "xwd", "xmessage"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must have %s (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// procsIn lists the processes whose command line or working folder is
// inside dir.
func procsIn(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if strings.Contains(string(cmd), dir) || strings.HasPrefix(cwd, dir) {
			out = append(out, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// TestRunDesktop: hrns run --desktop starts a sandboxed desktop with the
// app given; the model (Chat Completions: the computer tool as a plain
// function tool) takes a screenshot, sees it, and clicks the dialog's
// button, which the dialog prints; when the run ends, nothing of the
// desktop is left.
func TestRunDesktop(t *testing.T) {
	needDesktop(t)
	dir := filepath.Join(t.TempDir(), "desk")
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)}},
		// No window manager: the dialog is where it asked to be,
		// 116x52 at (100, 100), its second button at its bottom right.
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_2", "computer", `{"action":"left_click","coordinate":[191,140]}`)}},
		// The click's outcome is the dialog's to print, a moment after the
		// screenshot that answered it: the run's end closes the desktop,
		// so the last turn waits (boundedly) until the dialog has printed,
		// as an agent would look again before it answers.
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			for range 300 {
				if b, _ := os.ReadFile(filepath.Join(dir, "app-0.log")); len(b) > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			return openaitest.Reply{Text: "I picked Banana."}
		}},
	)
	defer model.Close()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"run", "--base-url", model.URL(), "--model", "m", "--tools", "none", "--no-skills",
		"--workdir", t.TempDir(), "--desktop", "--desktop-size", "1280x800", "--desktop-wm", "none", "--desktop-dir", dir,
		"--desktop-app", "xmessage -print -buttons Apple,Banana -geometry +100+100 'Pick a fruit'", "Pick a fruit."},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut.String())
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"name":"computer"`)) || !bytes.Contains(reqs[0].Body, []byte(`1280x800 pixels`)) {
		t.Fatalf("the computer tool is not offered:\n%.2000s", reqs[0].Body)
	}
	// The screenshot reaches the model as an image.
	if !bytes.Contains(reqs[1].Body, []byte(`data:image/png;base64,iVBORw0KGgo`)) {
		t.Fatalf("no screenshot in the second request:\n%.2000s", reqs[1].Body)
	}
	b, err := os.ReadFile(filepath.Join(dir, "app-0.log"))
	if err != nil || !strings.HasPrefix(string(b), "Banana\n") {
		t.Fatalf("the dialog printed %q (%v)\nstderr:\n%s", b, err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "desktop: a sandboxed display of 1280x800") {
		t.Fatalf("stderr:\n%s", errOut.String())
	}
	if p := procsIn(dir); len(p) != 0 {
		t.Fatalf("left after the run: %q", p)
	}

	// The flags are checked.
	for _, args := range [][]string{
		{"--desktop-size", "12x8"},
		{"--desktop", "--desktop-size", "wide"},
		{"--desktop", "--desktop-app", "'unclosed"},
	} {
		errOut.Reset()
		code := Run(t.Context(), append([]string{"run", "--base-url", model.URL(), "--model", "m", "--tools", "none", "--no-skills"}, append(args, "x")...),
			&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != ExitUsage {
			t.Errorf("%q: exit %d: %s", args, code, errOut.String())
		}
	}
}

// TestServeWorkstationDesktop: a hrns serve session (--workstation) whose
// agent names the workstation environment gets, besides its shell, files
// and browser, the computer tool on a sandboxed desktop of its own, which
// starts on the first call, answers with a screenshot the model sees, and
// is gone once the session ends.
func TestServeWorkstationDesktop(t *testing.T) {
	needDesktop(t)
	before := len(procsIn("/tmp/hrns-desktop-"))
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)}},
		openaitest.Reply{Text: "I see an empty desktop."},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workstation", "--workdir", t.TempDir())
	c := client.New(s.url, "", nil)
	var env client.Environment
	if err := json.Unmarshal([]byte(`{"kind":"workstation"}`), &env); err != nil {
		t.Fatal(err)
	}
	h, err := c.StartSession(t.Context(), &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "operator", Environments: []client.Environment{env}}},
		Messages: client.Text("What is on the screen?"),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.WaitForCompletion(t.Context())
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "I see an empty desktop." {
		t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !bytes.Contains(reqs[0].Body, []byte(`"name":"computer"`)) ||
		!bytes.Contains(reqs[1].Body, []byte(`data:image/png;base64,iVBORw0KGgo`)) {
		t.Fatalf("%d requests:\n%.2000s", len(reqs), reqs[len(reqs)-1].Body)
	}
	// The desktop ends when the run stops, just after the session's end
	// is committed: wait for it (bounded).
	var left []string
	for range 100 {
		if left = procsIn("/tmp/hrns-desktop-"); len(left) <= before {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > before {
		t.Fatalf("left after the session: %q", left)
	}
}
