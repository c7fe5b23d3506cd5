package desktop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with the file testdata/name, or writes it with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// indent pretty-prints JSON for a golden file.
func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(out.Bytes(), '\n')
}

// fruitPlan is what the scripted model does on the fruit desktop, in view
// coordinates: a screenshot, a click on the dialog's Banana button, a
// click into the terminal, typing a name, Return, a screenshot.
type fruitPlan struct {
	banana, term []int
}

func planFor(t *testing.T, d *Desktop) fruitPlan {
	xm := waitWindow(t, d, "Xmessage")
	xt := waitWindow(t, d, "Term")
	p := func(x, y int) []int { return []int{toView(x, d.sw, d.vw), toView(y, d.sh, d.vh)} }
	return fruitPlan{banana: p(xm.Max.X-25, xm.Max.Y-12), term: p(xt.Min.X+40, xt.Min.Y+30)}
}

// checkFruit checks what the run did: the dialog printed the button, the
// terminal's script read the name, and the last screenshot the model got
// (in the last request) shows the green bar.
func checkFruit(t *testing.T, d *Desktop, typed string, lastBody []byte) {
	t.Helper()
	if got := waitFile(t, filepath.Join(d.Dir(), "app-0.log")); !strings.HasPrefix(got, "Banana\n") {
		t.Fatalf("the dialog printed %q", got)
	}
	if got := waitFile(t, typed); got != "Ada Lovelace\n" {
		t.Fatalf("the terminal read %q", got)
	}
	imgs := regexp.MustCompile(`data:image/png;base64,([A-Za-z0-9+/=]+)|"data":"([A-Za-z0-9+/=]+)"`).FindAllSubmatch(lastBody, -1)
	if len(imgs) == 0 {
		t.Fatal("no screenshot in the last request")
	}
	last := imgs[len(imgs)-1]
	b64 := string(last[1]) + string(last[2])
	img, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	if n := greenIn(t, img); n < 1000 {
		t.Fatalf("the last screenshot the model saw has %d green pixels", n)
	}
}

// TestAnthropicComputerUse: Claude's native computer tool drives the
// sandboxed desktop: the request offers computer_20250124 with the view's
// size and the beta flag, the model's tool_use blocks (Anthropic's wire
// format) click, type and press keys, and the screenshots go back as
// images in tool_result blocks.
func TestAnthropicComputerUse(t *testing.T) {
	d, typed := startFruit(t, Options{})
	plan := planFor(t, d)
	steps := []string{
		`{"action":"screenshot"}`,
		fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, plan.banana[0], plan.banana[1]),
		fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, plan.term[0], plan.term[1]),
		`{"action":"type","text":"Ada Lovelace"}`,
		`{"action":"key","text":"Return"}`,
		`{"action":"screenshot"}`,
	}
	var replies []anthropictest.Reply
	for i, s := range steps {
		replies = append(replies, anthropictest.Reply{ToolCalls: []llm.ToolCall{anthropictest.ToolCall(fmt.Sprintf("toolu_%02d", i), "computer", s)}})
	}
	replies = append(replies, anthropictest.Reply{Text: "I picked Banana and typed the name."})
	srv := anthropictest.NewServer(replies...)
	defer srv.Close()
	model := &anthropic.Client{BaseURL: srv.URL(), APIKey: "test", Model: "claude-sonnet-4-5", HTTPClient: srv.Client()}
	agent := loop.NewAgent(model, d.Tools(), nil)
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Pick Banana, then type Ada Lovelace into the terminal.")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "I picked Banana and typed the name." {
		t.Fatalf("answer %q", res.Answer)
	}
	reqs := srv.Requests()
	if len(reqs) != len(steps)+1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Anthropic-Beta"); got != "computer-use-2025-01-24" {
		t.Fatalf("anthropic-beta %q", got)
	}
	golden(t, "anthropic.request.json", indent(t, reqs[0].Body))
	// The first screenshot answers the first call as an image.
	if !bytes.Contains(reqs[1].Body, []byte(`"type":"tool_result","tool_use_id":"toolu_00"`)) ||
		!bytes.Contains(reqs[1].Body, []byte(`"type":"image","source":{"type":"base64","media_type":"image/png"`)) {
		t.Fatalf("second request:\n%.1500s", reqs[1].Body)
	}
	checkFruit(t, d, typed, reqs[len(reqs)-1].Body)
}

// openAIReply renders a computer_call of the Responses API, from the golden
// stream testdata/responses.computer_call.sse.
func openAIReply(t *testing.T, n int, action string, checks string) responsestest.Reply {
	t.Helper()
	tmpl := template.Must(template.ParseFiles(filepath.Join("testdata", "responses.computer_call.sse")))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]any{"N": n, "Action": action, "Checks": checks}); err != nil {
		t.Fatal(err)
	}
	return responsestest.Reply{Raw: b.String()}
}

// TestOpenAIComputerUse: OpenAI's computer-use model drives the same
// desktop through the Responses API: the request offers
// computer_use_preview (with truncation auto), the computer_call items
// become actions, the typing carries a pending safety check that only the
// approver (a person) acknowledges, and every computer_call_output carries
// its screenshot.
func TestOpenAIComputerUse(t *testing.T) {
	d, typed := startFruit(t, Options{})
	plan := planFor(t, d)
	check := `[{"id":"cu_sc_1","code":"sensitive_domain","message":"The page asks for a name: check that typing it here is what you want."}]`
	replies := []responsestest.Reply{
		openAIReply(t, 1, `{"type":"screenshot"}`, `[]`),
		openAIReply(t, 2, fmt.Sprintf(`{"type":"click","button":"left","x":%d,"y":%d}`, plan.banana[0], plan.banana[1]), `[]`),
		openAIReply(t, 3, fmt.Sprintf(`{"type":"click","button":"left","x":%d,"y":%d}`, plan.term[0], plan.term[1]), `[]`),
		openAIReply(t, 4, `{"type":"type","text":"Ada Lovelace"}`, check),
		openAIReply(t, 5, `{"type":"keypress","keys":["ENTER"]}`, `[]`),
		openAIReply(t, 6, `{"type":"screenshot"}`, `[]`),
		{Text: "I picked Banana and typed the name."},
	}
	srv := responsestest.NewServer(replies...)
	defer srv.Close()
	var mu sync.Mutex
	var asked []*loop.ApprovalRequest
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	model := &responses.Client{BaseURL: srv.URL(), APIKey: "test", Model: "computer-use-preview"}
	// Even in bypassPermissions, the safety check goes to the approver.
	agent := loop.NewAgent(model, d.Tools(), &loop.Options{Approver: approver, Permissions: &loop.Permissions{Mode: loop.ModeBypass}})
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Pick Banana, then type Ada Lovelace into the terminal.")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "I picked Banana and typed the name." {
		t.Fatalf("answer %q", res.Answer)
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Permission.Reason, "[sensitive_domain] The page asks for a name") {
		t.Fatalf("approvals asked: %d %+v", len(asked), asked)
	}
	reqs := srv.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d requests", len(reqs))
	}
	golden(t, "responses.request.json", indent(t, reqs[0].Body))
	// Each call goes back as its computer_call item, answered by a
	// computer_call_output with a screenshot; the typing's acknowledges
	// its check.
	var body struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(reqs[4].Body, &body); err != nil {
		t.Fatal(err)
	}
	var calls, outputs int
	for _, it := range body.Input {
		switch it["type"] {
		case "computer_call":
			calls++
		case "computer_call_output":
			outputs++
			out := it["output"].(map[string]any)
			if out["type"] != "computer_screenshot" || !strings.HasPrefix(out["image_url"].(string), "data:image/png;base64,iVBORw0KGgo") {
				t.Fatalf("output %v", it)
			}
			ack, _ := json.Marshal(it["acknowledged_safety_checks"])
			if it["call_id"] == "call_4" && string(ack) != `[{"id":"cu_sc_1"}]` {
				t.Fatalf("the typing's output acknowledges %s", ack)
			}
			if it["call_id"] != "call_4" && it["acknowledged_safety_checks"] != nil {
				t.Fatalf("%v acknowledges %s", it["call_id"], ack)
			}
		}
	}
	if calls != 4 || outputs != 4 {
		t.Fatalf("%d computer_call and %d computer_call_output items in the fifth request:\n%.3000s", calls, outputs, reqs[4].Body)
	}
	if !bytes.Contains(reqs[4].Body, []byte(`{"type":"computer_call","id":"cu_4","call_id":"call_4","action":{"type":"type","text":"Ada Lovelace"},"pending_safety_checks":[{"id":"cu_sc_1"`)) {
		t.Fatalf("the typing's call is not sent back as it came:\n%.3000s", reqs[4].Body)
	}
	checkFruit(t, d, typed, reqs[len(reqs)-1].Body)
}

// TestOpenAISafetyCheckRefused: a computer call with a pending safety check
// does not run without a person's approval: with no approver it is refused
// (the model is told, with a blank screenshot, as the output needs one),
// and nothing is typed.
func TestOpenAISafetyCheckRefused(t *testing.T) {
	d, typed := startFruit(t, Options{})
	plan := planFor(t, d)
	check := `[{"id":"cu_sc_9","code":"malicious_instructions","message":"Typing this looks like following instructions from the screen."}]`
	srv := responsestest.NewServer(
		openAIReply(t, 1, fmt.Sprintf(`{"type":"click","button":"left","x":%d,"y":%d}`, plan.term[0], plan.term[1]), `[]`),
		openAIReply(t, 2, `{"type":"type","text":"Ada Lovelace\n"}`, check),
		responsestest.Reply{Text: "I did not type."},
	)
	defer srv.Close()
	model := &responses.Client{BaseURL: srv.URL(), APIKey: "test", Model: "computer-use-preview"}
	agent := loop.NewAgent(model, d.Tools(), &loop.Options{Permissions: &loop.Permissions{Mode: loop.ModeBypass}})
	if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Type the name.")}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1].Body
	if !bytes.Contains(last, []byte(`no approver is configured`)) || bytes.Contains(last, []byte(`acknowledged_safety_checks`)) {
		t.Fatalf("last request:\n%.3000s", last)
	}
	if b, err := os.ReadFile(typed); err == nil {
		t.Fatalf("typed %q without approval", b)
	}
}

// TestOpenAIBatchedComputerUse: OpenAI's GA computer tool, offered to
// gpt-5.4 as {"type": "computer"}, whose one computer_call carries the
// whole plan as a list of actions (testdata/responses.computer_actions.sse):
// hrns does them in turn on the desktop and answers with one
// computer_call_output, the screenshot after the last.
func TestOpenAIBatchedComputerUse(t *testing.T) {
	d, typed := startFruit(t, Options{})
	plan := planFor(t, d)
	actions := fmt.Sprintf(`[{"type":"click","button":"left","x":%d,"y":%d},{"type":"click","button":"left","x":%d,"y":%d},{"type":"type","text":"Ada Lovelace"},{"type":"keypress","keys":["ENTER"]},{"type":"wait"}]`,
		plan.banana[0], plan.banana[1], plan.term[0], plan.term[1])
	tmpl := template.Must(template.ParseFiles(filepath.Join("testdata", "responses.computer_actions.sse")))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]any{"N": 1, "Actions": actions, "Checks": "[]"}); err != nil {
		t.Fatal(err)
	}
	srv := responsestest.NewServer(responsestest.Reply{Raw: b.String()}, responsestest.Reply{Text: "Done in one go."})
	defer srv.Close()
	model := &responses.Client{BaseURL: srv.URL(), APIKey: "test", Model: "gpt-5.4"}
	agent := loop.NewAgent(model, d.Tools(), nil)
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Pick Banana, then type Ada Lovelace into the terminal.")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Done in one go." {
		t.Fatalf("answer %q", res.Answer)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"tools":[{"type":"computer"}]`)) {
		t.Fatalf("first request:\n%.2000s", reqs[0].Body)
	}
	last := reqs[1].Body
	if n := bytes.Count(last, []byte(`"type":"computer_call_output"`)); n != 1 || !bytes.Contains(last, []byte(`"actions":[{"type":"click"`)) {
		t.Fatalf("%d outputs in the second request:\n%.2000s", n, last)
	}
	checkFruit(t, d, typed, last)
}
