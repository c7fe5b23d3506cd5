package server_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// newModelEnv is newEnv with another model than the scripted OpenAI
// server: a provider's client pointed at its own scripted server.
func newModelEnv(t *testing.T, model llm.Model, o *session.Options) *env {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, model, o)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, url: srv.URL, st: st}
}

// reasoningFields keeps, of a provider's request body, the fields that
// carry its reasoning setting (and max_tokens, which Anthropic's budget
// bounds).
func reasoningFields(t *testing.T, body []byte) []byte {
	t.Helper()
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, k := range []string{"model", "reasoning_effort", "reasoning", "thinking", "output_config", "max_tokens"} {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	if gc, ok := all["generationConfig"]; ok {
		var g map[string]json.RawMessage
		json.Unmarshal(gc, &g)
		if v, ok := g["thinkingConfig"]; ok {
			out["generationConfig.thinkingConfig"] = v
		}
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return append(b, '\n')
}

// TestReasoningEffortOnTheWire creates sessions whose agents set
// reasoning_effort, through the API, against each provider's scripted
// server, and checks the request the model got against golden files of
// testdata/reasoning: the effort in the provider's own terms.
func TestReasoningEffortOnTheWire(t *testing.T) {
	openaiChat := func() (llm.Model, func() [][]byte, func()) {
		s := openaitest.NewServer(openaitest.Reply{Text: "ok"})
		return &openai.Client{BaseURL: s.URL()}, func() [][]byte {
			var out [][]byte
			for _, r := range s.Requests() {
				out = append(out, r.Body)
			}
			return out
		}, s.Close
	}
	openaiResponses := func() (llm.Model, func() [][]byte, func()) {
		s := responsestest.NewServer(responsestest.Reply{Text: "ok"})
		return &responses.Client{BaseURL: s.URL()}, func() [][]byte {
			var out [][]byte
			for _, r := range s.Requests() {
				out = append(out, r.Body)
			}
			return out
		}, s.Close
	}
	claude := func() (llm.Model, func() [][]byte, func()) {
		s := anthropictest.NewServer(anthropictest.Reply{Text: "ok"})
		return &anthropic.Client{BaseURL: s.URL()}, func() [][]byte {
			var out [][]byte
			for _, r := range s.Requests() {
				out = append(out, r.Body)
			}
			return out
		}, s.Close
	}
	google := func() (llm.Model, func() [][]byte, func()) {
		s := geminitest.NewServer(geminitest.Reply{Text: "ok"})
		return &gemini.Client{BaseURL: s.URL()}, func() [][]byte {
			var out [][]byte
			for _, r := range s.Requests() {
				// The model is in the path: add it for the golden file.
				var body map[string]json.RawMessage
				json.Unmarshal(r.Body, &body)
				body["model"], _ = json.Marshal(r.Model)
				b, _ := json.Marshal(body)
				out = append(out, b)
			}
			return out
		}, s.Close
	}
	for _, tt := range []struct {
		golden string
		model  func() (llm.Model, func() [][]byte, func())
		agent  string // the agent's model
		effort string
	}{
		{"openai-o3-medium", openaiChat, "o3", "medium"},
		{"openai-gpt-5.1-disabled", openaiChat, "gpt-5.1", "disabled"},
		{"openai-local-xhigh", openaiChat, "qwen3:8b", "xhigh"},
		{"openai-gpt-4o-disabled", openaiChat, "gpt-4o", "disabled"},
		{"responses-gpt-5-xhigh", openaiResponses, "gpt-5", "xhigh"},
		{"responses-gpt-5.2-xhigh", openaiResponses, "gpt-5.2", "xhigh"},
		{"anthropic-sonnet-4-5-high", claude, "claude-sonnet-4-5", "high"},
		{"anthropic-sonnet-4-5-disabled", claude, "claude-sonnet-4-5", "disabled"},
		{"anthropic-opus-4-1-xhigh", claude, "claude-opus-4-1", "xhigh"},
		{"gemini-2.5-flash-low", google, "gemini-2.5-flash", "low"},
		{"gemini-2.5-flash-disabled", google, "gemini-2.5-flash", "disabled"},
		{"gemini-3-pro-medium", google, "gemini-3-pro-preview", "medium"},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			model, requests, stop := tt.model()
			defer stop()
			e := newModelEnv(t, model, nil)
			body := fmt.Sprintf(`{"agent":{"name":"thinker","environments":[],"model":%q,"reasoning_effort":%q},"messages":"think"}`, tt.agent, tt.effort)
			id := e.create(keyAlice, body)
			e.follow(keyAlice, id).status(session.StatusCompleted)
			// The stored request keeps the field as given.
			var v struct {
				Request struct {
					Agent struct {
						ReasoningEffort string `json:"reasoning_effort"`
					} `json:"agent"`
				} `json:"request"`
			}
			e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).json(&v)
			if v.Request.Agent.ReasoningEffort != tt.effort {
				t.Errorf("stored reasoning_effort %q, want %q", v.Request.Agent.ReasoningEffort, tt.effort)
			}
			reqs := requests()
			if len(reqs) != 1 {
				t.Fatalf("%d model requests, want 1", len(reqs))
			}
			golden(t, filepath.Join("testdata", "reasoning", tt.golden+".json"), reasoningFields(t, reqs[0]))
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestReasoningEffortRefused: an effort the model has no setting for is
// a 422 naming the model, for an inline agent, an override, a registered
// agent and its PATCH; nothing is created.
func TestReasoningEffortRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, tt := range []struct {
		name, body, loc, msg string
	}{
		{"no reasoning", `{"agent":{"name":"a","environments":[],"model":"gpt-4o","reasoning_effort":"low"},"messages":"hi"}`,
			"body.agent.reasoning_effort", `model "gpt-4o" has no reasoning setting`},
		{"cannot turn off", `{"agent":{"name":"a","environments":[],"model":"o3","reasoning_effort":"disabled"},"messages":"hi"}`,
			"body.agent.reasoning_effort", `model "o3" cannot turn its reasoning off`},
		{"unknown value", `{"agent":{"name":"a","environments":[],"model":"o3","reasoning_effort":"extreme"},"messages":"hi"}`,
			"body.agent.reasoning_effort", `Input should be 'disabled', 'low', 'medium', 'high' or 'xhigh'`},
		{"override", `{"agent":{"name":"a","environments":[],"model":"gpt-4.1"},"messages":"hi","overrides":{"agent.reasoning_effort":"medium"}}`,
			"body.agent.reasoning_effort", `model "gpt-4.1" has no reasoning setting`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, tt.body), http.StatusUnprocessableEntity)
			if !hasDetail(r.body, tt.loc, tt.msg) {
				t.Errorf("422 body %s, want %s: %s", r.body, tt.loc, tt.msg)
			}
		})
	}
	var page struct{ Total int }
	e.expect(e.do("GET", "/api/v2/sessions", keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 0 {
		t.Errorf("%d sessions made by refused requests", page.Total)
	}

	// Registered agents: refused when made or patched.
	r := e.expect(e.do("POST", "/api/v2/agents", keyAlice, `{"name":"flat","description":"d","environments":[],"model":"gpt-4o","reasoning_effort":"medium"}`), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.reasoning_effort", `model "gpt-4o" has no reasoning setting`) {
		t.Errorf("422 body %s", r.body)
	}
	e.expect(e.do("POST", "/api/v2/agents", keyAlice, `{"name":"flat","description":"d","environments":[],"model":"gpt-4o"}`), http.StatusCreated)
	r = e.expect(e.do("PATCH", "/api/v2/agents/flat", keyAlice, `{"reasoning_effort":"high"}`), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.reasoning_effort", `model "gpt-4o" has no reasoning setting`) {
		t.Errorf("422 body %s", r.body)
	}
	r = e.expect(e.do("PATCH", "/api/v2/agents/flat", keyAlice, `{"reasoning_effort":"hard"}`), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.reasoning_effort", "Input should be") {
		t.Errorf("422 body %s", r.body)
	}
	var a map[string]any
	e.expect(e.do("GET", "/api/v2/agents/flat", keyAlice, nil), http.StatusOK).json(&a)
	if _, ok := a["reasoning_effort"]; ok {
		t.Errorf("a refused PATCH changed the agent: %v", a)
	}
}

// TestReasoningEffortRegistered: a registered agent's reasoning_effort is
// kept, shown, changed by PATCH, and reaches the model of its sessions.
func TestReasoningEffortRegistered(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "one"}, openaitest.Reply{Text: "two"})
	r := e.call("POST", "/api/v2/agents", keyAlice, `{"name":"deep","description":"Thinks.","environments":[],"model":"o4-mini","reasoning_effort":"low"}`, http.StatusCreated, "Agent")
	var a struct {
		ReasoningEffort *string `json:"reasoning_effort"`
	}
	r.json(&a)
	if a.ReasoningEffort == nil || *a.ReasoningEffort != "low" {
		t.Fatalf("created agent %s", r.body)
	}
	id := e.create(keyAlice, `{"agent":"deep","messages":"go"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	e.call("PATCH", "/api/v2/agents/deep", keyAlice, `{"reasoning_effort":"xhigh"}`, http.StatusOK, "Agent")
	id = e.create(keyAlice, `{"agent":"deep","messages":"go"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	var got []string
	for _, req := range e.model.Requests() {
		var b struct {
			Model  string `json:"model"`
			Effort string `json:"reasoning_effort"`
		}
		json.Unmarshal(req.Body, &b)
		got = append(got, b.Model+":"+b.Effort)
	}
	if strings.Join(got, " ") != "o4-mini:low o4-mini:high" {
		t.Errorf("requests' model:reasoning_effort = %v, want o4-mini:low, then o4-mini:high (xhigh, o4-mini's highest)", got)
	}
	var cleared map[string]any
	e.call("PATCH", "/api/v2/agents/deep", keyAlice, `{"reasoning_effort":null}`, http.StatusOK, "Agent").json(&cleared)
	if v, ok := cleared["reasoning_effort"]; ok {
		t.Errorf("PATCH null left reasoning_effort %v", v)
	}
}

// hasDetail reports whether a 422 body has an error at loc (dotted)
// whose message contains msg.
func hasDetail(body []byte, loc, msg string) bool {
	var d struct {
		Detail []struct {
			Loc []any  `json:"loc"`
			Msg string `json:"msg"`
		} `json:"detail"`
	}
	if json.Unmarshal(body, &d) != nil {
		return false
	}
	for _, f := range d.Detail {
		var parts []string
		for _, p := range f.Loc {
			parts = append(parts, fmt.Sprint(p))
		}
		if strings.Join(parts, ".") == loc && strings.Contains(f.Msg, msg) {
			return true
		}
	}
	return false
}

// TestRegisteredBrowserModes: a registered web environment takes the
// multimodal mode (as a type or an object) and page_chars, validated
// against the schemas; bad ones are 422 at their field.
func TestRegisteredBrowserModes(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"mm","kind":"web","mode":"multimodal","page_chars":5000}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"mm2","kind":"web","mode":{"type":"multimodal","width":800,"height":600}}`, http.StatusCreated, "Environment")
	var got map[string]any
	e.call("PATCH", "/api/v2/environments/mm", keyAlice, `{"page_chars":100,"mode":{"type":"text","chunk_size":50}}`, http.StatusOK, "Environment").json(&got)
	if got["page_chars"] != float64(100) {
		t.Errorf("patched environment %v", got)
	}
	for body, loc := range map[string]string{
		`{"id":"b1","kind":"web","page_chars":0}`:           "body.page_chars",
		`{"id":"b2","kind":"web","page_chars":1000001}`:     "body.page_chars",
		`{"id":"b3","kind":"web","mode":"cinematic"}`:       "body.mode",
		`{"id":"b4","kind":"web","mode":{"type":"cinema"}}`: "body.mode.type",
	} {
		r := e.call("POST", "/api/v2/environments", keyAlice, body, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, loc, "") {
			t.Errorf("%s: %s, want an error at %s", body, r.body, loc)
		}
	}
}
