package session_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// TestCheckRequest: a request is validated and normalised as Create would,
// and nothing is stored.
func TestCheckRequest(t *testing.T) {
	st := openStore(t)
	m := session.New(st, llmtest.NewModel(), &session.Options{Agents: map[string]*session.AgentConfig{"reporter": {Description: "Reports."}}})
	var req session.Request
	if err := json.Unmarshal([]byte(`{"agent":"reporter","messages":"go"}`), &req); err != nil {
		t.Fatal(err)
	}
	norm, err := m.CheckRequest(t.Context(), owner, &req)
	if err != nil {
		t.Fatal(err)
	}
	if norm.Queue == nil || !*norm.Queue || len(norm.Messages) != 1 || norm.Agent.Name != "reporter" {
		t.Errorf("normalised = %+v", norm)
	}
	if req.Queue != nil {
		t.Error("CheckRequest changed the request it was given")
	}
	json.Unmarshal([]byte(`{"agent":"nobody"}`), &req)
	if _, err := m.CheckRequest(t.Context(), owner, &req); !errors.As(err, new(*session.ValidationError)) {
		t.Errorf("unknown agent: %v, want a validation error", err)
	}
	if _, n, _ := st.ListSessions(t.Context(), &store.ListParams{Owner: owner}); n != 0 {
		t.Errorf("CheckRequest stored %d sessions", n)
	}
}
