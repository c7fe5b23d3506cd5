package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// userDisplay starts an Xvfb of 1280x800, as the user's display, with a
// dialog whose buttons print their name to the returned file; no window
// manager, so the dialog is 116x52 at (100, 100), Banana at (191, 140).
func userDisplay(t *testing.T) (display, printed string) {
	t.Helper()
	needDesktop(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	x := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp")
	x.ExtraFiles = []*os.File{w}
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { x.Process.Kill(); x.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Fatalf("Xvfb gave no display: %v", err)
	}
	display = ":" + strings.TrimSpace(line)
	printed = filepath.Join(t.TempDir(), "xmessage.out")
	f, err := os.Create(printed)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"DISPLAY=" + display, "PATH=" + os.Getenv("PATH")}
	xm := exec.Command("xmessage", "-print", "-buttons", "Apple,Banana", "-geometry", "+100+100", "Pick a fruit")
	xm.Env, xm.Stdout = env, f
	if err := xm.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { xm.Process.Kill(); xm.Wait() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	wait := exec.CommandContext(ctx, "xdotool", "search", "--sync", "--onlyvisible", "--class", "Xmessage")
	wait.Env = env
	if err := wait.Run(); err != nil {
		t.Fatalf("the dialog did not show: %v", err)
	}
	return display, printed
}

// TestDesktopConnect: hrns serve runs a session whose agent has the
// user's desktop (host user_device); hrns desktop connect, on "this
// machine's" display (the test's Xvfb), shows each computer action on the
// terminal and asks: the first click the person refuses (the model reads
// that), the second they allow, and the dialog prints Banana; the
// screenshot taken after it reaches the model's next request.
func TestDesktopConnect(t *testing.T) {
	display, printed := userDisplay(t)
	click := `{"action":"left_click","coordinate":[191,140]}`
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "computer", click)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_2", "computer", click)}},
		openaitest.Reply{Text: "I picked Banana."},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-desk"},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-desk", nil)
	h, err := c.StartSession(t.Context(), &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "helper", Environments: []client.Environment{{Kind: "desktop", ID: "my-laptop", Fields: map[string]json.RawMessage{"kind": json.RawMessage(`"desktop"`), "id": json.RawMessage(`"my-laptop"`), "host": json.RawMessage(`"user_device"`)}}}}},
		Messages: client.Text("Pick Banana in the dialog on my screen."),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	env := map[string]string{"HRNS_API_KEY": "sk-desk", "DISPLAY": display}
	code := Run(t.Context(), []string{"desktop", "connect", "--session", h.ID(), "--url", s.url},
		&IO{In: strings.NewReader("n\ny\n"), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }, Interactive: func() bool { return true }})
	if code != ExitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut.String())
	}
	stderr := errOut.String()
	if strings.Count(stderr, "Allow? [y/N]") != 2 || strings.Count(stderr, "left click at [191, 140]") < 2 ||
		!strings.Contains(stderr, "refused: the person did not allow this action") || !strings.Contains(stderr, "computer: left click at [191, 140]: ran") ||
		!strings.Contains(stderr, "ended completed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if out.String() != "I picked Banana.\n" {
		t.Errorf("stdout %q", out.String())
	}
	if b, _ := os.ReadFile(printed); string(b) != "Banana\n" {
		t.Fatalf("the dialog printed %q", b)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !bytes.Contains(reqs[1].Body, []byte(`refused: the person did not allow this action`)) {
		t.Errorf("the second request does not say the click was refused:\n%.2000s", reqs[1].Body)
	}
	if !bytes.Contains(reqs[2].Body, []byte(`"tool_call_id":"call_2"`)) || !bytes.Contains(reqs[2].Body, []byte(`data:image/png;base64,`)) {
		t.Errorf("the third request has no screenshot of call_2:\n%.2000s", reqs[2].Body)
	}
	got, err := h.Get(t.Context())
	if err != nil || got.Status.Status != session.StatusCompleted {
		t.Errorf("session %+v, %v", got, err)
	}
}

// TestDesktopConnectUsage: the bridge refuses to start without what it
// needs, saying what.
func TestDesktopConnectUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		tty  bool
		want string
	}{
		{[]string{"desktop", "connect"}, nil, true, "needs --session ID"},
		{[]string{"desktop", "connect", "--session", "s"}, nil, true, "$HRNS_API_KEY"},
		{[]string{"desktop", "connect", "--session", "s"}, map[string]string{"HRNS_API_KEY": "k"}, true, "$DISPLAY is not set"},
		{[]string{"desktop", "connect", "--session", "s"}, map[string]string{"HRNS_API_KEY": "k", "DISPLAY": ":9"}, false, "no terminal to ask on"},
		{[]string{"desktop", "bridge"}, nil, true, `unknown desktop subcommand "bridge"`},
	} {
		var errOut bytes.Buffer
		code := Run(t.Context(), tt.args, &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errOut,
			Getenv: func(k string) string { return tt.env[k] }, Interactive: func() bool { return tt.tty }})
		if code != ExitUsage || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %s; want a usage error saying %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}
