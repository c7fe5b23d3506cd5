package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

// envLog records what a session environment was asked.
type envLog struct {
	mu      sync.Mutex
	opened  []string // "SESSION CONFIG" of each run; "" session while validating
	closed  []bool   // ended, for each close
	running int      // environments open now
}

// waitClosed waits until n closes were called, for at most 10 s.
func (l *envLog) waitClosed(n int) {
	for range 1000 {
		l.mu.Lock()
		done := len(l.closed) >= n
		l.mu.Unlock()
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *envLog) env() session.EnvironmentFunc {
	return func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		var cfg struct {
			Color string `json:"color"`
		}
		if p.Config != nil {
			json.Unmarshal(p.Config, &cfg)
		}
		if cfg.Color == "red" {
			return nil, nil, errors.New("the paint environment: red is not available")
		}
		l.mu.Lock()
		l.opened = append(l.opened, fmt.Sprintf("%s %s", p.Session, p.Config))
		l.mu.Unlock()
		color := cfg.Color
		ts := loop.MustToolset(loop.NewTool("paint", "Paints.", func(_ context.Context, _ struct{}) (string, error) {
			return "painted " + color, nil
		}))
		if p.Session == "" {
			return ts, nil, nil
		}
		l.mu.Lock()
		l.running++
		l.mu.Unlock()
		return ts, func(ended bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.running--
			l.closed = append(l.closed, ended)
		}, nil
	}
}

// TestSessionEnvironment: an environment of the session's own is given
// the session and its entry each time the session runs, closed when the
// run stops (the session waits for a client tool) and told at the end that
// the session ended; a bad entry is a validation error of the entry.
func TestSessionEnvironment(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("call_1", "paint", `{}`),
		llmtest.Call("call_2", "ask", `{}`),
		llmtest.Call("call_3", "paint", `{}`),
		llmtest.Text("done"),
	)
	var l envLog
	m := startManager(t, openStore(t), model, &session.Options{SessionEnvironments: map[string]session.EnvironmentFunc{"paint": l.env()}})

	// A bad entry names itself.
	var req session.Request
	json.Unmarshal([]byte(`{"agent":{"name":"a","environments":["web",{"kind":"paint","color":"red"}]},"messages":"go"}`), &req)
	_, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req})
	var ve *session.ValidationError
	if !errorsAs(err, &ve) || len(ve.Fields) != 1 || !strings.Contains(ve.Fields[0].Msg, "kinds of this server: desktop, paint") ||
		fmt.Sprint(ve.Fields[0].Loc) != "[body agent environments 0]" {
		t.Fatalf("Create = %v (%+v)", err, ve)
	}
	req = session.Request{}
	json.Unmarshal([]byte(`{"agent":{"name":"a","environments":[{"kind":"paint","color":"red"}]},"messages":"go"}`), &req)
	_, _, err = m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req})
	if !errorsAs(err, &ve) || len(ve.Fields) != 1 || !strings.Contains(ve.Fields[0].Msg, "red is not available") ||
		fmt.Sprint(ve.Fields[0].Loc) != "[body agent environments 0]" {
		t.Fatalf("Create = %v (%+v)", err, ve)
	}

	v := create(t, m, `{"agent":{"name":"a","environments":[{"kind":"paint","color":"blue"}],"tools":[{"name":"ask","description":"Asks."}]},"messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	// The run stopped: its environment is closed (just after the wait is
	// committed: wait for it, bounded), the session not ended.
	l.waitClosed(1)
	l.mu.Lock()
	if l.running != 0 || fmt.Sprint(l.closed) != "[false]" {
		t.Errorf("while waiting: %d open, closes %v", l.running, l.closed)
	}
	l.mu.Unlock()
	req1 := session.ToolRequest{ToolName: "ask", Args: json.RawMessage(`{}`), ID: "call_2"}
	if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: req1, Result: json.RawMessage(`"yes"`)}}); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusCompleted)
	// The environment closes when the run stops, just after the end is
	// committed.
	l.waitClosed(2)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running != 0 || fmt.Sprint(l.closed) != "[false true]" {
		t.Errorf("at the end: %d open, closes %v, want [false true]", l.running, l.closed)
	}
	var runs []string
	for _, o := range l.opened {
		if !strings.HasPrefix(o, " ") {
			runs = append(runs, o)
		}
	}
	// The entry as normalised: its id is its kind.
	want := v.ID + ` {"color":"blue","id":"paint","kind":"paint"}`
	if len(runs) != 2 || runs[0] != want || runs[1] != want {
		t.Errorf("runs were given %q, want twice %q", runs, want)
	}
	// The tool the model called is the session's own.
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if tm := last[len(last)-1]; tm.Role != llm.RoleTool || tm.Parts[0].ToolResult.Text() != "painted blue" {
		t.Errorf("the last tool message: %+v", tm)
	}
}
