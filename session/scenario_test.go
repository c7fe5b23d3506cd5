package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

var update = flag.Bool("update", false, "rewrite the expected events of testdata/scenarios/*.txtar")

// TestScenarios runs the sessions described by testdata/scenarios/*.txtar
// through a real manager on a SQLite file, and compares the events they
// log with the expected ones. Each archive holds:
//
//   - request.json: the body of POST /api/v2/sessions;
//   - model.jsonl: the scripted model, one reply a line: {"text": ...,
//     "calls": [{"id", "name", "arguments"}]};
//   - actions: what the caller does, one action a line (see act);
//   - events: the events the session logs, one a line (type and data;
//     only the steps of MetricsUpdateEvent), and its status at the end. go test -run TestScenarios -update
//     rewrites this file from what the session did.
//
// The agent "worker" offers the server's tools "echo" (runs at once) and
// "delete" (requires approval); requests may also declare client-side
// tools.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runScenario(t, file)
		})
	}
}

type scenarioReply struct {
	Text  string `json:"text"`
	Calls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
}

func runScenario(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]byte{}
	for _, f := range ar.Files {
		sections[f.Name] = f.Data
	}
	for _, name := range []string{"request.json", "model.jsonl", "actions"} {
		if _, ok := sections[name]; !ok {
			t.Fatalf("%s has no %s", file, name)
		}
	}
	var replies []llmtest.Reply
	for i, line := range lines(sections["model.jsonl"]) {
		var r scenarioReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("model.jsonl line %d: %v", i+1, err)
		}
		reply := llmtest.Reply{Text: r.Text}
		for _, c := range r.Calls {
			reply.ToolCalls = append(reply.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: llm.Arguments(c.Arguments)})
		}
		replies = append(replies, reply)
	}
	echo := loop.NewTool("echo", "Says the text back.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return "echo: " + in.Text, nil
	})
	del := loop.NewTool("delete", "Deletes a file.", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		return "deleted " + in.Path, nil
	})
	del.RequiresApproval = true
	m := startManager(t, openStore(t), llmtest.NewModel(replies...), &session.Options{
		Agents:   map[string]*session.AgentConfig{"worker": {Description: "works", Toolsets: []string{"tools"}}},
		Toolsets: map[string]*loop.Toolset{"tools": loop.MustToolset(echo, del)},
	})
	v := create(t, m, string(sections["request.json"]))
	f := &follower{t: t, m: m, id: v.ID}
	mark := 0 // the events logged before the caller's last action
	for i, line := range lines(sections["actions"]) {
		if err := act(t, m, f, line, &mark); err != nil {
			t.Fatalf("actions line %d (%s): %v", i+1, line, err)
		}
	}
	// Every event the session has logged by now.
	for {
		c, _, err := m.Changes(t.Context(), owner, v.ID, &session.ChangesParams{From: int64(len(f.events))})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		f.events = append(f.events, c.NewEvents...)
	}
	got := describeEvents(t, f.events, m, v.ID)
	if *update {
		replaced := false
		for i := range ar.Files {
			if ar.Files[i].Name == "events" {
				ar.Files[i].Data, replaced = got, true
			}
		}
		if !replaced {
			ar.Files = append(ar.Files, txtar.File{Name: "events", Data: got})
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, ok := sections["events"]
	if !ok {
		t.Fatalf("%s has no events; run go test -run TestScenarios -update", file)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("events differ from %s (-update rewrites it)\nwant:\n%s\ngot:\n%s", file, want, got)
	}
}

// act does one caller action:
//
//	wait STATUS                 until the session has the status (as of the last event read)
//	wait_event TYPE             until an event of the type (or AgentEvent kind) is
//	                            logged after the caller's last action
//	result CALL_ID JSON         posts a client-side tool's result
//	error CALL_ID TEXT          posts a client-side tool's failure
//	approve CALL_ID             approves a call
//	reject CALL_ID REASON       rejects a call
//	message TEXT                sends a user message
//	pause, resume, force_answer, cancel
func act(t *testing.T, m *session.Manager, f *follower, line string, mark *int) error {
	ctx := t.Context()
	verb, rest, _ := strings.Cut(line, " ")
	arg, more, _ := strings.Cut(rest, " ")
	if verb != "wait" && verb != "wait_event" {
		*mark = len(f.events)
	}
	switch verb {
	case "wait":
		if f.last == nil || f.last.Status != session.Status(rest) {
			f.status(session.Status(rest))
		}
		return nil
	case "wait_event":
		logged := func() bool {
			for _, k := range kinds(f.events[*mark:]) {
				if k == rest || strings.HasPrefix(k, rest+"/") || strings.HasSuffix(k, "/"+rest) {
					return true
				}
			}
			return false
		}
		if !logged() {
			f.until(func(*session.Changes) bool { return logged() })
		}
		*mark = len(f.events)
		return nil
	case "result":
		return m.PostToolResults(ctx, owner, f.id, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: session.ToolRequest{ID: arg}, Result: json.RawMessage(more)}})
	case "error":
		return m.PostToolResults(ctx, owner, f.id, []session.ToolResult{{Kind: session.KindError, ToolReq: session.ToolRequest{ID: arg}, Error: more, Origin: "custom_tools"}})
	case "approve":
		return m.Decide(ctx, owner, f.id, []session.Decision{{ID: arg, Approved: true}})
	case "reject":
		return m.Decide(ctx, owner, f.id, []session.Decision{{ID: arg, Reason: more}})
	case "message":
		return m.SendMessages(ctx, owner, f.id, []session.UserMessage{{Type: "user_message", Message: rest}})
	case "pause":
		return m.Pause(ctx, owner, f.id)
	case "resume":
		return m.Resume(ctx, owner, f.id)
	case "force_answer":
		return m.ForceAnswer(ctx, owner, f.id)
	case "cancel":
		return m.Cancel(ctx, owner, f.id)
	}
	return fmt.Errorf("unknown action %q", verb)
}

// describeEvents renders the events one a line, type and data, then the
// session's status and error code.
func describeEvents(t *testing.T, events []session.Event, m *session.Manager, id string) []byte {
	var b bytes.Buffer
	for _, e := range events {
		if e.Type == session.EventMetricsUpdate {
			// Usage and costs are the metrics' own business: the
			// scenarios follow the steps.
			var d struct {
				Metrics session.Metrics `json:"metrics"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s steps=%d\n", e.Type, d.Metrics.Steps)
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, e.Data); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n", e.Type, compact.Bytes())
	}
	v, err := m.Get(t.Context(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "status: %s", v.Status.Status)
	if v.Status.ErrorCode != nil {
		fmt.Fprintf(&b, " (%s)", *v.Status.ErrorCode)
	}
	b.WriteString("\n")
	return b.Bytes()
}

// lines returns the non-empty lines of b that are not comments (#).
func lines(b []byte) []string {
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
