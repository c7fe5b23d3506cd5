package session_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/platform/registry"
	"github.com/hrns-dev/hrns/session"
)

// TestEnvironmentNamesListed: the 422 of an environment the caller cannot
// use lists every name it can: the kinds of the server, the user's own
// desktop and an enabled workstation included, and the ids of the key's
// registered environments.
func TestEnvironmentNamesListed(t *testing.T) {
	ws := func(*session.EnvironmentParams) (*loop.Toolset, func(bool), error) { return &loop.Toolset{}, nil, nil }
	m := session.New(openStore(t), llmtest.NewModel(), &session.Options{
		Environments:        map[string]*loop.Toolset{"web": {}},
		SessionEnvironments: map[string]session.EnvironmentFunc{"workstation": ws},
	})
	if _, err := registry.New(m).Create(t.Context(), registry.EntryEnvironment, owner, []byte(`{"id":"shop","kind":"web"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := m.ResolveAgent(t.Context(), owner, session.AgentRef{Inline: &session.Agent{Name: "a", Environments: []session.Environment{{ID: "mars"}}}})
	want := `body.agent.environments.0: unknown environment "mars": neither an environment kind of this server nor the id of an environment registered with this API key (kinds of this server: desktop, web, workstation; registered with this API key: "shop")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ResolveAgent = %v, want %q", err, want)
	}
	_, _, err = m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &session.Request{Agent: session.AgentRef{Inline: &session.Agent{Name: "a", Environments: []session.Environment{{Kind: "moon", Fields: map[string]json.RawMessage{"kind": json.RawMessage(`"moon"`)}}}}}, Messages: session.Messages{{Message: "x"}}}})
	if want := `environment kind "moon" is not provided by this server (available: desktop, web, workstation)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Create = %v, want %q", err, want)
	}
}
