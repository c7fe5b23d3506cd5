package userdesktop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/client/userdesktop"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const key = "sk-user"

// needX skips a test on a machine without the X tools (.ci/run installs
// them).
func needX(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"Xvfb", "xdotool", "xwd", "xmessage"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// display is the test's stand-in for the user's display: an Xvfb of
// 1280x800 with a dialog whose buttons print their name (xmessage -print)
// to out.
type display struct {
	name   string
	out    string
	banana [2]int // the Banana button's centre, in screen pixels
}

func startDisplay(t *testing.T) *display {
	t.Helper()
	needX(t)
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
	d := &display{name: ":" + strings.TrimSpace(line), out: filepath.Join(t.TempDir(), "xmessage.out")}
	f, err := os.Create(d.out)
	if err != nil {
		t.Fatal(err)
	}
	xm := exec.Command("xmessage", "-print", "-buttons", "Apple,Banana", "-geometry", "+100+100", "Pick a fruit")
	xm.Env = []string{"DISPLAY=" + d.name, "PATH=" + os.Getenv("PATH")}
	xm.Stdout = f
	if err := xm.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { xm.Process.Kill(); xm.Wait() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	geo := exec.CommandContext(ctx, "xdotool", "search", "--sync", "--onlyvisible", "--class", "Xmessage", "getwindowgeometry", "--shell")
	geo.Env = xm.Env
	b, err := geo.Output()
	if err != nil {
		t.Fatalf("the dialog did not show: %v", err)
	}
	v := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(l, "="); ok {
			if _, seen := v[k]; !seen {
				v[k], _ = strconv.Atoi(val)
			}
		}
	}
	d.banana = [2]int{v["X"] + v["WIDTH"] - 25, v["Y"] + v["HEIGHT"] - 12}
	return d
}

// printed is what the dialog printed.
func (d *display) printed(t *testing.T) string {
	b, err := os.ReadFile(d.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// serve is hrns serve's sessions API on loopback over SQLite, its model
// the scripted Anthropic endpoint.
func serve(t *testing.T, replies ...anthropictest.Reply) (*client.Client, *anthropictest.Server) {
	t.Helper()
	model := anthropictest.NewServer(replies...)
	t.Cleanup(model.Close)
	return serveModel(t, &anthropic.Client{BaseURL: model.URL(), APIKey: "test", Model: "claude-sonnet-4-5", HTTPClient: model.Client()}), model
}

// serveModel is hrns serve's sessions API on loopback over SQLite, with
// the model.
func serveModel(t *testing.T, model llm.Model) *client.Client {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, model, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{key}}))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return client.New(srv.URL, key, nil)
}

func computer(id, args string) anthropictest.Reply {
	return anthropictest.Reply{ToolCalls: []llm.ToolCall{anthropictest.ToolCall(id, "computer", args)}}
}

// start creates a session whose agent has the user's desktop.
func start(t *testing.T, c *client.Client) *client.Handle {
	t.Helper()
	h, err := c.StartSession(t.Context(), &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "helper", Environments: []client.Environment{{ID: "desktop"}}}},
		Messages: client.Text("Pick Banana in the dialog on my screen."),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// approvals records what the person was shown, and answers as told.
type approvals struct {
	mu     sync.Mutex
	shown  []*userdesktop.Proposal
	answer bool
}

func (a *approvals) approve(_ context.Context, p *userdesktop.Proposal) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shown = append(a.shown, p)
	return a.answer, nil
}

// lastImage decodes the last base64 PNG of a request body.
func lastImage(t *testing.T, body []byte) image.Image {
	t.Helper()
	m := regexp.MustCompile(`"media_type":"image/png","data":"([A-Za-z0-9+/=]+)"`).FindAllSubmatch(body, -1)
	if len(m) == 0 {
		t.Fatalf("no screenshot in the request:\n%.2000s", body)
	}
	b, err := base64.StdEncoding.DecodeString(string(m[len(m)-1][1]))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestUserDesktopThroughTheSDK: a hrns serve session with a desktop on the
// user's device; the scripted model (Anthropic's wire format, its native
// computer tool) takes a screenshot and clicks the dialog's Banana button;
// the SDK runs both on the test's display after the person approves each,
// shown first; the dialog prints Banana, and the screenshots reach the
// model's next requests as images in tool_result blocks.
func TestUserDesktopThroughTheSDK(t *testing.T) {
	d := startDisplay(t)
	c, model := serve(t,
		computer("toolu_00", `{"action":"screenshot"}`),
		computer("toolu_01", fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, d.banana[0], d.banana[1])),
		anthropictest.Reply{Text: "I picked Banana."},
	)
	h := start(t, c)
	ap := &approvals{answer: true}
	var reports []string
	res, err := userdesktop.Run(t.Context(), h, &userdesktop.Options{Display: d.name, Approve: ap.approve,
		Report: func(p *userdesktop.Proposal, outcome string) { reports = append(reports, p.Summary+": "+outcome) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != api.StatusCompleted || res.Answer != "I picked Banana." {
		t.Fatalf("result %+v", res)
	}
	if got := d.printed(t); got != "Banana\n" {
		t.Fatalf("the dialog printed %q", got)
	}
	want := []string{"take a screenshot: ran", fmt.Sprintf("left click at [%d, %d]: ran", d.banana[0], d.banana[1])}
	if strings.Join(reports, "|") != strings.Join(want, "|") || len(ap.shown) != 2 {
		t.Fatalf("reports %q (want %q), %d approvals", reports, want, len(ap.shown))
	}
	if s := ap.shown[1].String(); !strings.Contains(s, "asks to use your desktop (call toolu_01)") || !strings.Contains(s, want[1][:len(want[1])-5]) {
		t.Errorf("the person was shown:\n%s", s)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"type":"computer_20250124"`)) || !bytes.Contains(reqs[0].Body, []byte(`"display_width_px":1280`)) {
		t.Fatalf("the first request does not offer the native computer tool:\n%.2000s", reqs[0].Body)
	}
	for i, id := range []string{"toolu_00", "toolu_01"} {
		body := reqs[i+1].Body
		if !bytes.Contains(body, []byte(`"type":"tool_result","tool_use_id":"`+id+`"`)) {
			t.Fatalf("request %d has no result of %s:\n%.2000s", i+1, id, body)
		}
		if img := lastImage(t, body); img.Bounds().Dx() != 1280 || img.Bounds().Dy() != 800 {
			t.Fatalf("request %d: the screenshot is %v", i+1, img.Bounds())
		}
	}
}

// TestUserDesktopRefused: an action the person refuses does not run, and
// the agent reads that it was refused; without an approver, nothing runs.
func TestUserDesktopRefused(t *testing.T) {
	d := startDisplay(t)
	click := fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, d.banana[0], d.banana[1])
	c, model := serve(t, computer("toolu_00", click), computer("toolu_01", click), anthropictest.Reply{Text: "You did not let me."})
	h := start(t, c)
	ap := &approvals{answer: false}
	res, err := userdesktop.Run(t.Context(), h, &userdesktop.Options{Display: d.name, Approve: ap.approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != api.StatusCompleted || len(ap.shown) != 2 {
		t.Fatalf("result %+v, %d approvals asked", res, len(ap.shown))
	}
	// A click on Banana would have printed it and closed the dialog
	// (xmessage -print exits), a model request before the session ended.
	if got := d.printed(t); got != "" {
		t.Fatalf("a refused click ran: the dialog printed %q", got)
	}
	still := exec.Command("xdotool", "search", "--onlyvisible", "--class", "Xmessage")
	still.Env = []string{"DISPLAY=" + d.name, "PATH=" + os.Getenv("PATH")}
	if out, err := still.Output(); err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("the dialog is gone (%v): a refused click ran", err)
	}
	reqs := model.Requests()
	for _, i := range []int{1, 2} {
		if !bytes.Contains(reqs[i].Body, []byte(`refused: the person did not allow this action on their desktop`)) || !bytes.Contains(reqs[i].Body, []byte(`"is_error":true`)) {
			t.Fatalf("request %d:\n%.2000s", i, reqs[i].Body)
		}
	}
	// ApproveAll without an approver still asks for safety checks: with
	// no one to ask, such an action is refused (package-level check of
	// the rule, through the same session machinery).
	c2, model2 := serve(t, computer("toolu_00", `{"action":"screenshot","safety_checks":[{"id":"sc_1","code":"malicious_instructions","message":"The page asks to\u202e do this"}]}`), anthropictest.Reply{Text: "ok"})
	if _, err := userdesktop.Run(t.Context(), start(t, c2), &userdesktop.Options{Display: d.name, ApproveAll: true}); err != nil {
		t.Fatal(err)
	}
	if body := model2.Requests()[1].Body; !bytes.Contains(body, []byte(`refused: no person approves the actions on this desktop`)) {
		t.Fatalf("a safety check ran without a person:\n%.2000s", body)
	}
}

// TestUserDesktopHostile: actions that are not what the desktop runs (an
// oversized text, coordinates beyond the screen, a key that is no key,
// arguments beyond the bound) are answered with an error the agent reads,
// without being shown or run; text that could disguise itself is shown
// escaped.
func TestUserDesktopHostile(t *testing.T) {
	d := startDisplay(t)
	c, model := serve(t,
		computer("toolu_00", `{"action":"type","text":"`+strings.Repeat("a", 4001)+`"}`),
		computer("toolu_01", `{"action":"left_click","coordinate":[5000,10]}`),
		computer("toolu_02", `{"action":"key","text":"ctrl+\u001b[2J"}`),
		computer("toolu_03", `{"action":"type","text":"`+strings.Repeat("é", 40000)+`"}`),
		computer("toolu_04", `{"action":"type","text":"invoice\u202Efdp.exe"}`),
		anthropictest.Reply{Text: "done"},
	)
	h := start(t, c)
	ap := &approvals{answer: true}
	mark := func(s string) string { return "«" + s + "»" }
	if _, err := userdesktop.Run(t.Context(), h, &userdesktop.Options{Display: d.name, Approve: ap.approve, Mark: mark}); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	for i, want := range []string{
		"the text is 4001 characters long; at most 4000",
		"outside the screen",
		"not run:",
		"bytes, more than 65536",
	} {
		body := reqs[i+1].Body
		if !bytes.Contains(body, []byte(want)) || !bytes.Contains(body, []byte(`"is_error":true`)) {
			t.Errorf("request %d lacks %q:\n%.1500s", i+1, want, body)
		}
	}
	if len(ap.shown) != 1 {
		t.Fatalf("the person was asked %d times, want once (the last action)", len(ap.shown))
	}
	p := ap.shown[0]
	s := p.String()
	if strings.ContainsRune(s, '\u202e') || !strings.Contains(s, `invoice«\u202e»fdp.exe`) || p.Escaped != 1 || !strings.Contains(s, "shown as escapes") {
		t.Errorf("the disguised text was shown as:\n%s", s)
	}
}

// openAIReply renders a computer_call of the Responses API from package
// desktop's golden stream.
func openAIReply(t *testing.T, n int, action, checks string) responsestest.Reply {
	t.Helper()
	tmpl := template.Must(template.ParseFiles(filepath.Join("..", "..", "desktop", "testdata", "responses.computer_call.sse")))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]any{"N": n, "Action": action, "Checks": checks}); err != nil {
		t.Fatal(err)
	}
	return responsestest.Reply{Raw: b.String()}
}

// TestUserDesktopOpenAISafetyCheck: OpenAI's computer-use model (the
// Responses API's computer_call, with a pending safety check) on the
// user's desktop: even with ApproveAll, the action goes to the person,
// shown with the check; once they allow it, it runs, and the next request
// answers the call with its screenshot, acknowledging the check.
func TestUserDesktopOpenAISafetyCheck(t *testing.T) {
	d := startDisplay(t)
	check := `[{"id":"cu_sc_1","code":"sensitive_domain","message":"The dialog asks for a choice\u202e: check it."}]`
	srv := responsestest.NewServer(
		openAIReply(t, 1, fmt.Sprintf(`{"type":"click","button":"left","x":%d,"y":%d}`, d.banana[0], d.banana[1]), check),
		responsestest.Reply{Text: "I picked Banana."},
	)
	t.Cleanup(srv.Close)
	c := serveModel(t, &responses.Client{BaseURL: srv.URL(), APIKey: "test", Model: "computer-use-preview"})
	ap := &approvals{answer: true}
	res, err := userdesktop.Run(t.Context(), start(t, c), &userdesktop.Options{Display: d.name, ApproveAll: true, Approve: ap.approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != api.StatusCompleted || len(ap.shown) != 1 {
		t.Fatalf("result %+v, %d approvals asked", res, len(ap.shown))
	}
	if s := ap.shown[0].String(); !strings.Contains(s, `Safety check: [sensitive_domain] The dialog asks for a choice\u202e: check it.`) {
		t.Errorf("the person was shown:\n%s", s)
	}
	if got := d.printed(t); got != "Banana\n" {
		t.Fatalf("the dialog printed %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"type":"computer_use_preview","display_width":1280,"display_height":800`)) {
		t.Errorf("the first request does not offer computer_use_preview on 1280x800:\n%.2000s", reqs[0].Body)
	}
	if !bytes.Contains(reqs[1].Body, []byte(`"type":"computer_call_output","call_id":"call_1"`)) ||
		!bytes.Contains(reqs[1].Body, []byte(`"acknowledged_safety_checks":[{"id":"cu_sc_1"}]`)) ||
		!bytes.Contains(reqs[1].Body, []byte(`"image_url":"data:image/png;base64,iVBORw0KGgo`)) {
		t.Errorf("the second request:\n%.3000s", reqs[1].Body)
	}
}

// newServer is server.New for a test's Options, which are valid.
func newServer(m *session.Manager, opts *server.Options) *server.Server {
	s, err := server.New(m, opts)
	if err != nil {
		panic(err)
	}
	return s
}
