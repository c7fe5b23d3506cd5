package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestRegisteredSubagents: an agent a key registered is a subagent of
// that key's agents, registered or inline: the delegate call runs a child
// session with the registered definition (its instructions, its step
// budget). Another key cannot name it, cycles are refused, and the
// nesting is bounded.
func TestRegisteredSubagents(t *testing.T) {
	e := regEnv(t,
		calls(openaitest.ToolCall("call_1", "delegate", `{"agent":"helper","task":"Say hello in French."}`)),
		openaitest.Reply{Text: "Bonjour."},
		openaitest.Reply{Text: "The helper says Bonjour."},
		calls(openaitest.ToolCall("call_2", "delegate", `{"agent":"helper","task":"Again."}`)),
		openaitest.Reply{Text: "Bonjour encore."},
		openaitest.Reply{Text: "Done inline."},
	)
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"helper","description":"Speaks French.","instructions":"Answer in French only.","environments":[],"max_steps":4}`, http.StatusCreated, "Agent")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"lead","description":"Delegates.","environments":[],"subagents":["helper"]}`, http.StatusCreated, "Agent")

	id := e.create(keyAlice, `{"agent":"lead","messages":"Greet me."}`)
	c := e.follow(keyAlice, id).status(session.StatusCompleted)
	if string(c.Answer) != `"The helper says Bonjour."` {
		t.Errorf("answer = %s", c.Answer)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if first := string(reqs[0].Body); !strings.Contains(first, `"name":"delegate"`) || !strings.Contains(first, "helper: Speaks French.") {
		t.Errorf("the parent's request does not offer helper:\n%s", first)
	}
	if child := string(reqs[1].Body); !strings.Contains(child, "You are helper. Speaks French.") || !strings.Contains(child, "Answer in French only.") {
		t.Errorf("the child did not run helper's definition:\n%s", child)
	}
	var st session.StatusView
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if len(st.SubagentSessionIDs) != 1 {
		t.Fatalf("subagent_session_ids = %v", st.SubagentSessionIDs)
	}
	var child struct {
		Request struct {
			Agent    map[string]any `json:"agent"`
			MaxSteps int            `json:"max_steps"`
		} `json:"request"`
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+st.SubagentSessionIDs[0], keyAlice, nil), http.StatusOK).json(&child)
	if child.Request.Agent["name"] != "helper" || child.Request.Agent["instructions"] != "Answer in French only." || child.Request.MaxSteps != 4 {
		t.Errorf("the child's request = %+v, want helper's definition and max_steps 4", child.Request)
	}

	// An inline agent of the same key names it too.
	id = e.create(keyAlice, `{"agent":{"name":"boss","environments":[],"subagents":["helper"]},"messages":"Greet me again."}`)
	if c := e.follow(keyAlice, id).status(session.StatusCompleted); string(c.Answer) != `"Done inline."` {
		t.Errorf("inline answer = %s", c.Answer)
	}

	// Cycles and chains too deep: a key can make them with PATCH, a
	// session refuses them.
	for _, body := range []string{
		`{"name":"a1","description":"d","environments":[]}`,
		`{"name":"a2","description":"d","environments":[],"subagents":["a1"]}`,
		`{"name":"d5","description":"d","environments":[]}`,
		`{"name":"d4","description":"d","environments":[],"subagents":["d5"]}`,
		`{"name":"d3","description":"d","environments":[],"subagents":["d4"]}`,
		`{"name":"d2","description":"d","environments":[],"subagents":["d3"]}`,
		`{"name":"d1","description":"d","environments":[],"subagents":["d2"]}`,
	} {
		e.call("POST", "/api/v2/agents", keyAlice, body, http.StatusCreated, "Agent")
	}
	e.call("PATCH", "/api/v2/agents/a1", keyAlice, `{"subagents":["a2"]}`, http.StatusOK, "Agent")

	for _, tt := range []struct {
		name, key, body, loc, msg string
	}{
		{"another key's agent", keyBob, `{"agent":{"name":"boss","environments":[],"subagents":["helper"]},"messages":"hi"}`,
			"[body agent subagents 0]", `subagent "helper": unknown agent "helper": looked among the agents of this server (plain, reviewer), its catalog names (h/web-surfer-flash) and the agents registered with this API key`},
		{"another key's agent inline in a subagent", keyBob, `{"agent":{"name":"boss","environments":[],"subagents":[{"name":"mid","environments":[],"subagents":["helper"]}]},"messages":"hi"}`,
			"[body agent subagents 0 subagents 0]", `unknown agent "helper"`},
		{"a cycle", keyAlice, `{"agent":"a2","messages":"hi"}`,
			"[body agent subagents 0 subagents 0]", `subagent "a2": a cycle (a2 → a1 → a2)`},
		{"too deep", keyAlice, `{"agent":"d1","messages":"hi"}`,
			"[body agent subagents 0 subagents 0 subagents 0 subagents]", "subagents nest at most 3 deep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call("POST", "/api/v2/sessions", tt.key, tt.body, http.StatusUnprocessableEntity, "")
			var v struct{ Detail []session.FieldError }
			r.json(&v)
			if len(v.Detail) != 1 || fmt.Sprint(v.Detail[0].Loc) != tt.loc || !strings.Contains(v.Detail[0].Msg, tt.msg) {
				t.Errorf("%s, want one error at %s saying %s", r.body, tt.loc, tt.msg)
			}
		})
	}
	// Bob cannot register an agent that names it either.
	e.call("POST", "/api/v2/agents", keyBob, `{"name":"lead","description":"d","environments":[],"subagents":["helper"]}`, http.StatusUnprocessableEntity, "")
	if n := len(e.model.Requests()); n != 6 {
		t.Errorf("%d model requests, want 6: a refused session reached the model", n)
	}
}
