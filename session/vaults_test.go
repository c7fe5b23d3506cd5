package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

// vaultLog records what a VaultToolsFunc was asked, and answers like a
// vault service whose owner has the vaults of has.
type vaultLog struct {
	mu    sync.Mutex
	calls []string // "SESSION OWNER IDS"
	has   map[string]string
	fail  error
}

func (l *vaultLog) fn() session.VaultToolsFunc {
	return func(ctx context.Context, p *session.VaultParams) (*loop.Toolset, error) {
		l.mu.Lock()
		l.calls = append(l.calls, fmt.Sprintf("%s %s %s", p.Session, p.Owner, strings.Join(p.Vaults, ",")))
		l.mu.Unlock()
		if l.fail != nil {
			return nil, l.fail
		}
		for _, id := range p.Vaults {
			if l.has[id] != p.Owner {
				return nil, fmt.Errorf("%w: vault %s not found", session.ErrVaultRefused, id)
			}
		}
		owner := p.Owner
		return loop.MustToolset(loop.NewTool("one_time_code", "Codes.", func(_ context.Context, _ struct{}) (string, error) {
			return "code for " + owner, nil
		})), nil
	}
}

const (
	vaultA = "6f1c2a0e-1b2c-4d3e-8f90-123456789abc"
	vaultB = "7f1c2a0e-1b2c-4d3e-8f90-123456789abc"
)

// TestVaults: the vaults an agent's environments name are checked with
// the session's owner when the session is created, and given, with the
// owner, to the func when it runs; what is refused is a validation error.
func TestVaults(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("call_1", "one_time_code", `{}`), llmtest.Text("done"))
	l := &vaultLog{has: map[string]string{vaultA: owner, vaultB: "someone else"}}
	m := startManager(t, openStore(t), model, &session.Options{Environments: map[string]*loop.Toolset{"web": {}}, Vaults: l.fn()})

	for _, tt := range []struct{ name, body, msg, loc string }{
		{"another owner's", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + vaultB + `"}]},"messages":"go"}`, "not found", "[body agent environments]"},
		{"not a uuid", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"v1"}]},"messages":"go"}`, "valid UUID", "[body agent environments web vault_id]"},
		{"a client tool of the name", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + vaultA + `"}],"tools":[{"name":"one_time_code"}]},"messages":"go"}`, "tool of the agent's vaults", "[body agent tools 0 name]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var req session.Request
			json.Unmarshal([]byte(tt.body), &req)
			_, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req})
			var ve *session.ValidationError
			if !errorsAs(err, &ve) || len(ve.Fields) != 1 || !strings.Contains(ve.Fields[0].Msg, tt.msg) || fmt.Sprint(ve.Fields[0].Loc) != tt.loc {
				t.Fatalf("Create = %v (%+v), want %q at %s", err, ve, tt.msg, tt.loc)
			}
		})
	}

	// The vault is named in upper case: it is the same id.
	v := create(t, m, `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+strings.ToUpper(vaultA)+`"}]},"messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusCompleted)
	l.mu.Lock()
	calls := strings.Join(l.calls, "\n")
	l.mu.Unlock()
	if !strings.Contains(calls, v.ID+" "+owner+" "+vaultA) || !strings.Contains(calls, " "+owner+" "+vaultA) {
		t.Errorf("the func was asked:\n%s", calls)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if tm := last[len(last)-1]; tm.Role != llm.RoleTool || tm.Parts[0].ToolResult.Text() != "code for "+owner {
		t.Errorf("the last tool message: %+v", tm)
	}
}

// TestVaultsOff: without Options.Vaults a request naming a vault is
// refused; a func's error that is not a refusal fails the creation as it
// is.
func TestVaultsOff(t *testing.T) {
	m := startManager(t, openStore(t), llmtest.NewModel(), &session.Options{Environments: map[string]*loop.Toolset{"web": {}}})
	var req session.Request
	json.Unmarshal([]byte(`{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+vaultA+`"}]},"messages":"go"}`), &req)
	_, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req})
	var ve *session.ValidationError
	if !errorsAs(err, &ve) || !strings.Contains(ve.Error(), "no vaults") {
		t.Errorf("Create without vaults = %v", err)
	}
	// A null vault_id names none.
	create(t, m, `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":null}]},"messages":"go"}`)

	down := errors.New("the store is down")
	l := &vaultLog{fail: down}
	m = startManager(t, openStore(t), llmtest.NewModel(), &session.Options{Environments: map[string]*loop.Toolset{"web": {}}, Vaults: l.fn()})
	_, _, err = m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req})
	if !errors.Is(err, down) || errorsAs(err, &ve) {
		t.Errorf("Create with a failing func = %v, want its error as it is", err)
	}
}
