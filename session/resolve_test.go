package session_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/platform/registry"
	"github.com/hrns-dev/hrns/session"
)

// registryManager is a manager with configured agents, a catalog name, the
// web environment, and entries registered by alice.
func registryManager(t *testing.T) *session.Manager {
	t.Helper()
	m := session.New(openStore(t), llmtest.NewModel(), &session.Options{
		Agents:       map[string]*session.AgentConfig{"reviewer": {Description: "Reviews."}},
		Catalog:      map[string]string{"h/web-surfer-flash": "reviewer"},
		Environments: map[string]*loop.Toolset{"web": {}},
	})
	reg := registry.New(m)
	for _, e := range []struct {
		kind registry.EntryKind
		body string
	}{
		{registry.EntryEnvironment, `{"id":"shop","start_url":"https://shop.example/"}`},
		{registry.EntryEnvironment, `{"id":"pc","kind":"desktop","host":"user_device"}`},
		{registry.EntrySkill, `{"name":"lookup","description":"Looks orders up.","body":"Read refs/api.md.","files":{"refs/api.md":"GET /orders/{id}"}}`},
		{registry.EntryAgent, `{"name":"support","description":"Answers.","instructions":"Be kind.","model":"m2","environments":["shop"],"skills":["lookup"],"max_steps":4,
			"tools":[{"name":"get_order","description":"d"}]}`},
		{registry.EntryAgent, `{"name":"plain","description":"Plain.","environments":[]}`},
	} {
		if _, err := reg.Create(t.Context(), e.kind, owner, []byte(e.body)); err != nil {
			t.Fatalf("registering %s: %v", e.body, err)
		}
	}
	return m
}

func TestResolveAgent(t *testing.T) {
	m := registryManager(t)
	for _, tt := range []struct {
		name    string
		owner   string
		ref     string // the request's agent, as JSON
		want    string // the resolved ref, as JSON
		steps   int
		skills  []string
		wantErr string // the loc and message of the 422
	}{
		{name: "configured agent", ref: `"reviewer"`, want: `"reviewer"`},
		{name: "catalog name", ref: `"h/web-surfer-flash"`, want: `"reviewer"`},
		{name: "registered agent", ref: `"support"`, steps: 4, skills: []string{"lookup"},
			want: `{"name":"support","description":"Answers.","instructions":"Be kind.","model":"m2",` +
				`"environments":[{"id":"shop","kind":"web","start_url":"https://shop.example/"}],"tools":[{"name":"get_order","description":"d"}]}`},
		{name: "registered agent without extras", ref: `"plain"`, want: `{"name":"plain","description":"Plain.","environments":null}`},
		{name: "inline agent with an environment id and a skill", ref: `{"name":"x","environments":["shop","web"],"skills":["lookup"]}`, skills: []string{"lookup"},
			want: `{"name":"x","environments":[{"id":"shop","kind":"web","start_url":"https://shop.example/"},"web"]}`},
		// Each kind of skill brings its own load_skill tool.
		{name: "registered and inline skills", ref: `{"name":"x","skills":["lookup",{"name":"inline"}]}`, wantErr: `body.agent.skills: an agent's skills are either all registered`},
		{name: "inline agent with a desktop", ref: `{"name":"x","environments":["pc"]}`,
			want: `{"name":"x","environments":[{"id":"pc","kind":"desktop","host":"user_device"}]}`},
		{name: "unknown agent", ref: `"nope"`, wantErr: `body.agent: unknown agent "nope": looked among the agents of this server (reviewer), its catalog names (h/web-surfer-flash) and the agents registered with this API key`},
		{name: "another key's agent", owner: "bob", ref: `"support"`, wantErr: `body.agent: unknown agent "support"`},
		{name: "unknown environment", ref: `{"name":"x","environments":["web","mars"]}`, wantErr: `body.agent.environments.1: unknown environment "mars"`},
		{name: "another key's environment", owner: "bob", ref: `{"name":"x","environments":["shop"]}`, wantErr: `body.agent.environments.0: unknown environment "shop"`},
		{name: "unknown skill", ref: `{"name":"x","skills":["nope"]}`, wantErr: `body.agent.skills.0: unknown skill "nope"`},
		{name: "a tool named like a skill tool", ref: `{"name":"x","skills":["lookup"],"tools":[{"name":"load_skill","description":"d"}]}`, wantErr: `body.agent.tools.0.name: tool "load_skill" is a tool of the agent's skills`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ref session.AgentRef
			if err := json.Unmarshal([]byte(tt.ref), &ref); err != nil {
				t.Fatal(err)
			}
			o := owner
			if tt.owner != "" {
				o = tt.owner
			}
			got, err := m.ResolveAgent(t.Context(), o, ref)
			if tt.wantErr != "" {
				var ve *session.ValidationError
				if !errors.As(err, &ve) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolveAgent = %v, want a validation error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got.Ref)
			if !jsonEqual(string(b), tt.want) {
				t.Errorf("resolved to %s, want %s", b, tt.want)
			}
			var names []string
			for _, s := range got.Skills {
				names = append(names, s.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.skills) || got.MaxSteps != tt.steps {
				t.Errorf("skills %v, steps %d; want %v, %d", names, got.MaxSteps, tt.skills, tt.steps)
			}
		})
	}
	// The caller's request is not changed.
	var ref session.AgentRef
	json.Unmarshal([]byte(`{"name":"x","environments":["shop"]}`), &ref)
	if _, err := m.ResolveAgent(t.Context(), owner, ref); err != nil || ref.Inline.Environments[0].ID != "shop" || ref.Inline.Environments[0].Fields != nil {
		t.Errorf("ResolveAgent changed the request's agent: %+v, %v", ref.Inline.Environments, err)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// A session names a registered agent: it runs with the agent's
// definition, its environment and its skills through the skill tools.
func TestSessionOfRegisteredAgent(t *testing.T) {
	m := registryManager(t)
	v := create(t, m, `{"agent":"support","messages":"Where is order 4242?"}`)
	if v.Request == nil {
		t.Fatal("no request")
	}
	_, _, err := m.Create(t.Context(), &session.CreateParams{Owner: "bob", Request: &session.Request{Agent: session.AgentRef{Name: "support"}, Messages: session.Messages{{Message: "hi"}}}, Raw: json.RawMessage(`{}`)})
	var ve *session.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("bob's session of alice's agent: %v, want a validation error", err)
	}
}
