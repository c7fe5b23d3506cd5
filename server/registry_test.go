package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// The schemas of the registries, copied from the Agents API's document
// into testdata: every response body of these tests is validated against
// the schema the document gives it.
var (
	schemaOnce sync.Once
	schemaRoot map[string]any
	schemaErr  error
	schemaMu   sync.Mutex
	schemas    = map[string]*jsonschema.Resolved{}
)

func schema(t testing.TB, name string) *jsonschema.Resolved {
	t.Helper()
	schemaOnce.Do(func() {
		var data []byte
		if data, schemaErr = os.ReadFile("testdata/schemas/registry/registry.json"); schemaErr == nil {
			schemaErr = json.Unmarshal(data, &schemaRoot)
		}
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if rs, ok := schemas[name]; ok {
		return rs
	}
	root := map[string]any{}
	for k, v := range schemaRoot {
		root[k] = v
	}
	root["$ref"] = "#/$defs/" + name
	b, _ := json.Marshal(root)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolving schema %s: %v", name, err)
	}
	schemas[name] = rs
	return rs
}

// conform fails the test unless body validates against the named schema.
func conform(t testing.TB, name string, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("response is not JSON (%v): %s", err, body)
	}
	if err := schema(t, name).Validate(v); err != nil {
		t.Errorf("response does not conform to %s: %v\n%s", name, err, body)
	}
}

// TestRegistrySchemasCatch checks that the schema copies refuse what the
// document refuses, so that a passing validation means something.
func TestRegistrySchemasCatch(t *testing.T) {
	for _, tt := range []struct{ schema, body string }{
		{"Agent", `{"name":"a","description":"d"}`},
		{"Agent", `{"name":"a","description":"","environments":[]}`},
		{"Environment", `{"id":"x","kind":"desktop"}`},
		{"Environment", `{"id":"x","host":"user_device"}`},
		{"Skill", `{"name":"s","description":"d"}`},
		{"Page_Agent_", `{"items":[],"total":0}`},
		{"HTTPValidationError", `{"detail":[{"loc":["body"],"msg":"x"}]}`},
	} {
		var v any
		json.Unmarshal([]byte(tt.body), &v)
		if schema(t, tt.schema).Validate(v) == nil {
			t.Errorf("%s accepts %s", tt.schema, tt.body)
		}
	}
}

// regEnv is a server with configured agents, a catalog name and the web
// environment.
func regEnv(t *testing.T, replies ...openaitest.Reply) *env {
	return newEnv(t, &envOptions{session: &session.Options{
		Agents: map[string]*session.AgentConfig{
			"reviewer": {Description: "Reviews a diff.", Instructions: "Be terse.", Model: "review-model", Toolsets: []string{"web"}, MaxSteps: 7},
			"plain":    {},
		},
		Catalog:      map[string]string{"h/web-surfer-flash": "reviewer"},
		Environments: map[string]*loop.Toolset{"web": {}},
	}}, replies...)
}

// call sends a request and checks its status, and its body against the
// schema (the error schema for a 422).
func (e *env) call(method, path, key string, body any, status int, schemaName string) *response {
	e.t.Helper()
	r := e.do(method, path, key, body)
	if r.status != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, status, r.body)
	}
	switch {
	case status == http.StatusUnprocessableEntity:
		conform(e.t, "HTTPValidationError", r.body)
	case schemaName != "":
		conform(e.t, schemaName, r.body)
	case status >= 400:
		var d struct{ Detail string }
		if err := json.Unmarshal(r.body, &d); err != nil || d.Detail == "" {
			e.t.Errorf("%s %s: error body %s, want {\"detail\": \"...\"}", method, path, r.body)
		}
	}
	return r
}

func TestRegistryCRUD(t *testing.T) {
	e := regEnv(t)
	for _, tt := range []struct {
		path, name, item, page string
		create                 string
		put                    string
		patch                  string
		want                   map[string]any // fields of the patched entry
	}{
		{
			path: "/api/v2/agents", name: "acme/support", item: "Agent", page: "Page_Agent_",
			create: `{"name":"acme/support","description":"Answers order questions.","environments":["web"],
				"instructions":"Be kind.","tools":[{"name":"get_order","description":"Looks an order up.","input_schema":{"type":"object"}}],
				"answer_format":{"type":"object"},"max_steps":5}`,
			put:   `{"name":"acme/support","description":"Answers questions.","environments":[{"id":"inline-web","kind":"web"}],"model":"m1"}`,
			patch: `{"instructions":"Be brief.","model":null,"name":"ignored"}`,
			want:  map[string]any{"name": "acme/support", "description": "Answers questions.", "instructions": "Be brief.", "model": nil},
		},
		{
			path: "/api/v2/environments", name: "shop/checkout", item: "Environment", page: "EnvironmentPage",
			create: `{"id":"shop/checkout","kind":"web","start_url":"https://shop.example/","mode":{"type":"text","chunk_size":1000}}`,
			put:    `{"id":"shop/checkout","kind":"desktop","host":"user_device"}`,
			patch:  `{"session_id":"s-1"}`,
			want:   map[string]any{"id": "shop/checkout", "kind": "desktop", "host": "user_device", "session_id": "s-1"},
		},
		{
			path: "/api/v2/skills", name: "order-lookup", item: "Skill", page: "Page_Skill_",
			create: `{"name":"order-lookup","description":"Looking orders up.","body":"Read refs/api.md.","files":{"refs/api.md":"GET /orders/{id}"}}`,
			put:    `{"name":"order-lookup","description":"Looking orders up.","body":"v2","source":"https://docs.example/"}`,
			patch:  `{"body":"v3","source":null}`,
			want:   map[string]any{"name": "order-lookup", "body": "v3", "source": nil, "url_pattern": nil},
		},
	} {
		t.Run(tt.item, func(t *testing.T) {
			r := e.call("POST", tt.path, keyAlice, tt.create, http.StatusCreated, tt.item)
			if loc := r.header.Get("Location"); loc != tt.path+"/"+tt.name {
				t.Errorf("Location %q, want %s/%s", loc, tt.path, tt.name)
			}
			created := string(r.body)
			got := e.call("GET", tt.path+"/"+tt.name, keyAlice, nil, http.StatusOK, tt.item)
			if diff := cmp.Diff(jsonValue(t, created), jsonValue(t, string(got.body))); diff != "" {
				t.Errorf("GET differs from the creation's answer (-created +got):\n%s", diff)
			}
			e.call("POST", tt.path, keyAlice, tt.create, http.StatusConflict, "")

			page := e.call("GET", tt.path, keyAlice, nil, http.StatusOK, tt.page)
			var p struct {
				Items []map[string]any
				Total int
				Page  int
			}
			page.json(&p)
			if p.Page != 1 || len(p.Items) != p.Total || p.Total < 1 {
				t.Errorf("list = %s", page.body)
			}

			e.call("PUT", tt.path+"/"+tt.name, keyAlice, tt.put, http.StatusOK, tt.item)
			r = e.call("PATCH", tt.path+"/"+tt.name, keyAlice, tt.patch, http.StatusOK, tt.item)
			var patched map[string]any
			r.json(&patched)
			for k, want := range tt.want {
				if got, ok := patched[k]; !cmp.Equal(got, want) || want != nil && !ok {
					t.Errorf("after PATCH %s = %v, want %v (entry %s)", k, got, want, r.body)
				}
			}
			again := e.call("GET", tt.path+"/"+tt.name, keyAlice, nil, http.StatusOK, tt.item)
			if diff := cmp.Diff(patched, jsonValue(t, string(again.body))); diff != "" {
				t.Errorf("GET after PATCH (-patch answer +got):\n%s", diff)
			}

			e.call("DELETE", tt.path+"/"+tt.name, keyAlice, nil, http.StatusNoContent, "")
			e.call("GET", tt.path+"/"+tt.name, keyAlice, nil, http.StatusNotFound, "")
			e.call("DELETE", tt.path+"/"+tt.name, keyAlice, nil, http.StatusNotFound, "")
			e.call("PUT", tt.path+"/"+tt.name, keyAlice, tt.put, http.StatusNotFound, "")
			e.call("PATCH", tt.path+"/"+tt.name, keyAlice, tt.patch, http.StatusNotFound, "")
		})
	}
}

func jsonValue(t testing.TB, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

// A key never sees or changes another key's entries; both may use a name.
func TestRegistryScope(t *testing.T) {
	e := regEnv(t)
	for _, tt := range []struct{ path, name, body, patch string }{
		{"/api/v2/agents", "support", `{"name":"support","description":"Alice's.","environments":[]}`, `{"description":"x"}`},
		{"/api/v2/environments", "checkout", `{"id":"checkout","start_url":"https://alice.example/"}`, `{"headless":true}`},
		{"/api/v2/skills", "lookup", `{"name":"lookup","description":"Alice's.","body":"b"}`, `{"body":"x"}`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			e.call("POST", tt.path, keyAlice, tt.body, http.StatusCreated, "")
			e.call("GET", tt.path+"/"+tt.name, keyBob, nil, http.StatusNotFound, "")
			e.call("PUT", tt.path+"/"+tt.name, keyBob, tt.body, http.StatusNotFound, "")
			e.call("PATCH", tt.path+"/"+tt.name, keyBob, tt.patch, http.StatusNotFound, "")
			e.call("DELETE", tt.path+"/"+tt.name, keyBob, nil, http.StatusNotFound, "")
			for _, q := range []string{"", "?search=" + tt.name} {
				r := e.call("GET", tt.path+q, keyBob, nil, http.StatusOK, "")
				if strings.Contains(string(r.body), "alice") || strings.Contains(string(r.body), "Alice") {
					t.Errorf("bob's list shows alice's entry: %s", r.body)
				}
			}
			// Bob's entry of the same name is his own.
			e.call("POST", tt.path, keyBob, strings.ReplaceAll(strings.ReplaceAll(tt.body, "Alice", "Bob"), "alice", "bob"), http.StatusCreated, "")
			e.call("DELETE", tt.path+"/"+tt.name, keyBob, nil, http.StatusNoContent, "")
			r := e.call("GET", tt.path+"/"+tt.name, keyAlice, nil, http.StatusOK, "")
			if !strings.Contains(strings.ToLower(string(r.body)), "alice") {
				t.Errorf("bob's delete touched alice's entry: %s", r.body)
			}
			e.call("GET", tt.path, "", nil, http.StatusUnauthorized, "")
		})
	}
}

// The configuration's agents, catalog names and environment kinds are
// read-only entries every key sees.
func TestRegistryReadOnly(t *testing.T) {
	e := regEnv(t)
	r := e.call("GET", "/api/v2/agents", keyBob, nil, http.StatusOK, "Page_Agent_")
	var p struct {
		Items []session.AgentSpec
		Total int
	}
	r.json(&p)
	var names []string
	for _, a := range p.Items {
		names = append(names, a.Name)
		if !a.ReadOnly {
			t.Errorf("configured agent %s is not marked read_only", a.Name)
		}
	}
	if diff := cmp.Diff([]string{"h/web-surfer-flash", "plain", "reviewer"}, names); diff != "" || p.Total != 3 {
		t.Errorf("configured agents (-want +got):\n%s (total %d)", diff, p.Total)
	}
	r = e.call("GET", "/api/v2/agents/h/web-surfer-flash", keyAlice, nil, http.StatusOK, "Agent")
	var a session.AgentSpec
	r.json(&a)
	if a.Description != "Reviews a diff." || a.Model == nil || *a.Model != "review-model" || a.Instructions == nil ||
		a.MaxSteps == nil || *a.MaxSteps != 7 || len(a.Environments) != 1 || string(a.Environments[0]) != `"web"` {
		t.Errorf("catalog agent = %s", r.body)
	}
	e.call("GET", "/api/v2/agents/plain", keyAlice, nil, http.StatusOK, "Agent")
	e.call("GET", "/api/v2/environments/web", keyAlice, nil, http.StatusOK, "Environment")

	for _, path := range []string{"/api/v2/agents/reviewer", "/api/v2/agents/h/web-surfer-flash", "/api/v2/environments/web"} {
		e.call("PUT", path, keyAlice, `{"name":"reviewer","description":"mine","environments":[]}`, http.StatusForbidden, "")
		e.call("PATCH", path, keyAlice, `{"description":"mine"}`, http.StatusForbidden, "")
		e.call("DELETE", path, keyAlice, nil, http.StatusForbidden, "")
	}
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"reviewer","description":"mine","environments":[]}`, http.StatusConflict, "")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"web"}`, http.StatusConflict, "")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"h/mine","description":"mine","environments":[]}`, http.StatusForbidden, "")
	e.call("POST", "/api/v2/skills", keyAlice, `{"name":"h/mine","description":"mine","body":"b"}`, http.StatusForbidden, "")

	// Read-only entries come first, then the key's own.
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"mine","description":"Mine.","environments":[]}`, http.StatusCreated, "Agent")
	r = e.call("GET", "/api/v2/agents?size=2&page=2", keyAlice, nil, http.StatusOK, "Page_Agent_")
	r.json(&p)
	if len(p.Items) != 2 || p.Items[0].Name != "reviewer" || p.Items[1].Name != "mine" || p.Total != 4 {
		t.Errorf("page 2 of 2 = %s", r.body)
	}
}

func TestRegistryList(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"gamma", "alpha", "beta-news", "delta"} {
		e.call("POST", "/api/v2/skills", keyAlice, fmt.Sprintf(`{"name":%q,"description":"About %s.","body":"b","files":{"a.md":"x"}}`, name, strings.ToUpper(name)), http.StatusCreated, "Skill")
	}
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"d1","kind":"desktop","host":"user_device"}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"w1"}`, http.StatusCreated, "Environment")
	names := func(query string) ([]string, int) {
		t.Helper()
		path := "/api/v2/skills"
		if strings.HasPrefix(query, "env:") {
			path, query = "/api/v2/environments", strings.TrimPrefix(query, "env:")
		}
		r := e.call("GET", path+query, keyAlice, nil, http.StatusOK, map[bool]string{true: "EnvironmentPage", false: "Page_Skill_"}[strings.Contains(path, "env")])
		var p struct {
			Items []map[string]any
			Total int
		}
		r.json(&p)
		var out []string
		for _, it := range p.Items {
			if _, has := it["files"]; has {
				t.Errorf("a listed skill has its files: %v", it)
			}
			out = append(out, fmt.Sprint(it["name"], it["id"]))
		}
		return out, p.Total
	}
	for _, tt := range []struct {
		query string
		want  []string
		total int
	}{
		{"", []string{"delta<nil>", "beta-news<nil>", "alpha<nil>", "gamma<nil>"}, 4},
		{"?sort=name", []string{"alpha<nil>", "beta-news<nil>", "delta<nil>", "gamma<nil>"}, 4},
		{"?sort=-name&size=2&page=2", []string{"beta-news<nil>", "alpha<nil>"}, 4},
		{"?sort=created_at&size=3", []string{"gamma<nil>", "alpha<nil>", "beta-news<nil>"}, 4},
		{"?name=NEWS", []string{"beta-news<nil>"}, 1},
		{"?search=about+al", []string{"alpha<nil>"}, 1},
		{"?page=9", nil, 4},
		{"env:?kind=desktop", []string{"<nil>desktop", "<nil>d1"}, 2}, // the user's desktop, read-only, first
		{"env:?id=W&sort=id", []string{"<nil>w1"}, 1},
	} {
		got, total := names(tt.query)
		if diff := cmp.Diff(tt.want, got); diff != "" || total != tt.total {
			t.Errorf("GET %s: total %d, want %d; (-want +got):\n%s", tt.query, total, tt.total, diff)
		}
	}
	for _, q := range []string{"?page=0", "?size=1001", "?size=x", "?sort=size", "?sort=name&sort=-name"} {
		e.call("GET", "/api/v2/skills"+q, keyAlice, nil, http.StatusUnprocessableEntity, "")
	}
	e.call("GET", "/api/v2/environments?kind=phone", keyAlice, nil, http.StatusUnprocessableEntity, "")
	e.call("GET", "/api/v2/agents?sort=name", keyAlice, nil, http.StatusUnprocessableEntity, "")
	e.call("GET", "/api/v2/agents?sort=-agent_name", keyAlice, nil, http.StatusOK, "Page_Agent_")
}

// Bodies the document refuses, and those hrns bounds, are 422 naming the
// field.
func TestRegistryValidation(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/skills", keyAlice, `{"name":"ref","description":"d","body":"b"}`, http.StatusCreated, "Skill")
	big := strings.Repeat("x", 256<<10+1)
	for _, tt := range []struct {
		path, body string
		loc        string // the loc of the first error, dotted
	}{
		{"/api/v2/agents", `[]`, "body"},
		{"/api/v2/agents", `{"description":"d","environments":[]}`, "body.name"},
		{"/api/v2/agents", `{"name":"Support","description":"d","environments":[]}`, "body.name"},
		{"/api/v2/agents", `{"name":"a/b/c","description":"d","environments":[]}`, "body.name"},
		{"/api/v2/agents", `{"name":"-a","description":"d","environments":[]}`, "body.name"},
		{"/api/v2/agents", `{"name":"` + strings.Repeat("a", 64) + `","description":"d","environments":[]}`, "body.name"},
		{"/api/v2/agents", `{"name":"a","environments":[]}`, "body.description"},
		{"/api/v2/agents", `{"name":"a","description":"d"}`, "body.environments"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":"web"}`, "body.environments"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":["nowhere"]}`, "body.environments.0"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[{"id":"x"},{"id":"y"}]}`, "body.environments.1"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[{"id":"x","kind":"tv"}]}`, "body.environments.0.kind"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"skills":["missing"]}`, "body.skills.0"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"skills":[{"name":"s","description":"d"}]}`, "body.skills.0.body"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"subagents":["a"]}`, "body.subagents.0"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"subagents":["missing"]}`, "body.subagents.0"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"subagents":[{"name":"b","description":"d","environments":[],"subagents":[{"name":"c","description":"d","environments":[],"subagents":[{"name":"d","description":"d","environments":[],"subagents":[{"name":"e","description":"d","environments":[]}]}]}]}]}`, "body.subagents.0.subagents.0.subagents.0.subagents.0"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"answer_format":[1]}`, "body.answer_format"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"tools":[{"name":"1x","description":"d"}]}`, "body.tools.0.name"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"tools":[{"name":"x","description":"d"},{"name":"x","description":"d"}]}`, "body.tools.1.name"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"tools":[{"name":"x"}]}`, "body.tools.0.description"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"max_steps":0}`, "body.max_steps"},
		{"/api/v2/agents", `{"name":"a","description":"d","environments":[],"model":5}`, "body.model"},
		{"/api/v2/environments", `{"kind":"web"}`, "body.id"},
		{"/api/v2/environments", `{"id":" x"}`, "body.id"},
		{"/api/v2/environments", `{"id":"a\u0007b"}`, "body.id"},
		{"/api/v2/environments", `{"id":"/x"}`, "body.id"},
		{"/api/v2/environments", `{"id":"x/"}`, "body.id"},
		{"/api/v2/environments", `{"id":"a//b"}`, "body.id"},
		{"/api/v2/environments", `{"id":"a/../b"}`, "body.id"},
		{"/api/v2/environments", `{"id":"x","kind":"desktop"}`, "body.host"},
		{"/api/v2/environments", `{"id":"x","kind":"desktop","host":"cloud"}`, "body.host"},
		{"/api/v2/environments", `{"id":"x","host":"moon"}`, "body.host"},
		{"/api/v2/environments", `{"id":"x","headless":"yes"}`, "body.headless"},
		{"/api/v2/environments", `{"id":"x","mode":{"type":"visual","width":0}}`, "body.mode.width"},
		{"/api/v2/environments", `{"id":"x","mode":{"type":"audio"}}`, "body.mode.type"},
		{"/api/v2/environments", `{"id":"x","vault_id":"not-a-uuid"}`, "body.vault_id"},
		{"/api/v2/environments", `{"id":"x","use_default_browser_profile":true,"browser_profile_id":"3f0e6a2c-8a5b-4c1e-9d7f-0a1b2c3d4e5f"}`, "body.use_default_browser_profile"},
		{"/api/v2/environments", `{"id":"x","persist_browser_profile":true}`, "body.persist_browser_profile"},
		{"/api/v2/environments", `{"id":"x","network":{"proxy_url":"http://p:1","managed_proxy":{}}}`, "body.network"},
		{"/api/v2/environments", `{"id":"x","network":{"managed_proxy":{"pool":"moon"}}}`, "body.network.managed_proxy.pool"},
		{"/api/v2/skills", `{"name":"s","description":"d"}`, "body.body"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","url_pattern":""}`, "body.url_pattern"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"../x":"y"}}`, "body.files.../x"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"/etc/passwd":"y"}}`, "body.files./etc/passwd"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a/./b":"y"}}`, "body.files.a/./b"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a\nb":"y"}}`, "body.files.a\nb"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"C:x":"y"}}`, "body.files.C:x"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a\\b":"y"}}`, "body.files.a\\b"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{".git/config":"y"}}`, "body.files..git/config"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"SKILL.md":"y"}}`, "body.files.SKILL.md"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a":"y","a/b":"z"}}`, "body.files.a/b"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a":"` + big + `"}}`, "body.files.a"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":{"a":"\u0000"}}`, "body.files.a"},
		{"/api/v2/skills", `{"name":"s","description":"d","body":"b","files":` + manyFiles(101) + `}`, "body.files"},
	} {
		t.Run(tt.loc, func(t *testing.T) {
			r := e.call("POST", tt.path, keyAlice, tt.body, http.StatusUnprocessableEntity, "")
			var v struct{ Detail []session.FieldError }
			r.json(&v)
			var locs []string
			for _, f := range v.Detail {
				var parts []string
				for _, l := range f.Loc {
					parts = append(parts, fmt.Sprint(l))
				}
				locs = append(locs, strings.Join(parts, "."))
				if f.Msg == "" || f.Type == "" {
					t.Errorf("error without msg or type: %+v", f)
				}
			}
			if len(locs) == 0 || locs[0] != tt.loc {
				t.Errorf("errors at %q, want first at %q: %s", locs, tt.loc, r.body)
			}
		})
	}
	// Nothing of a refused body was stored.
	r := e.call("GET", "/api/v2/skills", keyAlice, nil, http.StatusOK, "Page_Skill_")
	if strings.Contains(string(r.body), `"s"`) {
		t.Errorf("a refused skill was stored: %s", r.body)
	}
	// Renames are refused.
	e.call("PUT", "/api/v2/skills/ref", keyAlice, `{"name":"other","description":"d","body":"b"}`, http.StatusUnprocessableEntity, "")
	// A required field cannot be patched to null.
	e.call("PATCH", "/api/v2/skills/ref", keyAlice, `{"body":null}`, http.StatusUnprocessableEntity, "")
	e.call("PATCH", "/api/v2/skills/ref", keyAlice, `"body"`, http.StatusUnprocessableEntity, "")
}

func manyFiles(n int) string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("f%d.md", i)] = "x"
	}
	b, _ := json.Marshal(files)
	return string(b)
}

// GET with resolve=true replaces names by definitions.
func TestRegistryResolve(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"shop","start_url":"https://shop.example/"}`, http.StatusCreated, "")
	e.call("POST", "/api/v2/skills", keyAlice, `{"name":"lookup","description":"d","body":"b"}`, http.StatusCreated, "")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"helper","description":"Helps.","environments":["shop"],"skills":["lookup"]}`, http.StatusCreated, "")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"boss","description":"Delegates.","environments":[],"subagents":["helper","reviewer"]}`, http.StatusCreated, "")

	r := e.call("GET", "/api/v2/agents/boss", keyAlice, nil, http.StatusOK, "Agent")
	if !strings.Contains(string(r.body), `"subagents":["helper","reviewer"]`) {
		t.Errorf("without resolve: %s", r.body)
	}
	r = e.call("GET", "/api/v2/agents/boss?resolve=true", keyAlice, nil, http.StatusOK, "Agent")
	var a struct {
		Subagents []struct {
			Name         string
			Environments []map[string]any
			Skills       []map[string]any
		}
	}
	r.json(&a)
	if len(a.Subagents) != 2 || a.Subagents[0].Name != "helper" || a.Subagents[1].Name != "reviewer" ||
		len(a.Subagents[0].Environments) != 1 || a.Subagents[0].Environments[0]["start_url"] != "https://shop.example/" ||
		len(a.Subagents[0].Skills) != 1 || a.Subagents[0].Skills[0]["body"] != "b" {
		t.Errorf("resolved = %s", r.body)
	}
	e.call("GET", "/api/v2/agents/boss?resolve=maybe", keyAlice, nil, http.StatusUnprocessableEntity, "")
	// A deleted reference stays a name.
	e.call("DELETE", "/api/v2/skills/lookup", keyAlice, nil, http.StatusNoContent, "")
	r = e.call("GET", "/api/v2/agents/helper?resolve=true", keyAlice, nil, http.StatusOK, "Agent")
	if !strings.Contains(string(r.body), `"skills":["lookup"]`) {
		t.Errorf("a dangling reference: %s", r.body)
	}
	// Bob's view: alice's environment is not his.
	e.call("POST", "/api/v2/agents", keyBob, `{"name":"helper","description":"Helps.","environments":["shop"]}`, http.StatusUnprocessableEntity, "")
}

// Sessions name registered agents, catalog names and environments by id;
// a registered agent's skills reach the model through the skill tools.
func TestRegistrySessions(t *testing.T) {
	e := regEnv(t,
		calls(openaitest.ToolCall("call_1", "load_skill", `{"name":"acme/lookup"}`)),
		calls(openaitest.ToolCall("call_2", "read_skill", `{"name":"acme/lookup","path":"refs/api.md"}`)),
		openaitest.Reply{Text: "Order 4242 shipped."},
		openaitest.Reply{Text: "Reviewed."},
		openaitest.Reply{Text: "Inline."},
	)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"shop","start_url":"https://shop.example/"}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/skills", keyAlice, `{"name":"acme/lookup","description":"Looks orders up.","body":"Read refs/api.md, then call it.","files":{"refs/api.md":"GET /orders/{id} returns the order."}}`, http.StatusCreated, "Skill")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"acme/support","description":"Answers order questions.","instructions":"Be kind.","environments":["shop"],"skills":["acme/lookup"],"max_steps":5}`, http.StatusCreated, "Agent")

	id := e.create(keyAlice, `{"agent":"acme/support","messages":"Where is order 4242?"}`)
	c := e.follow(keyAlice, id).status(session.StatusCompleted)
	if string(c.Answer) != `"Order 4242 shipped."` {
		t.Errorf("answer = %s", c.Answer)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	first, second, third := string(reqs[0].Body), string(reqs[1].Body), string(reqs[2].Body)
	for _, want := range []string{"You are acme/support. Answers order questions.", "Be kind.", "<name>acme/lookup</name>", `"name":"load_skill"`, `"name":"read_skill"`} {
		if !strings.Contains(first, want) {
			t.Errorf("the first model request lacks %s:\n%s", want, first)
		}
	}
	if !strings.Contains(second, "Read refs/api.md, then call it.") || !strings.Contains(third, "GET /orders/{id} returns the order.") {
		t.Errorf("the skill's body and file did not reach the model:\n%s\n%s", second, third)
	}
	var sess struct {
		Request map[string]any
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).json(&sess)
	if sess.Request["agent"] != "acme/support" {
		t.Errorf("the session's request = %v, want the agent's name as given", sess.Request)
	}

	// A catalog name runs the configured agent it maps to.
	id = e.create(keyBob, `{"agent":"h/web-surfer-flash","messages":"Review this."}`)
	e.follow(keyBob, id).status(session.StatusCompleted)
	if body := string(e.model.Requests()[3].Body); !strings.Contains(body, "You are reviewer. Reviews a diff.") || !strings.Contains(body, `"model":"review-model"`) {
		t.Errorf("the catalog agent's request:\n%s", body)
	}
	// An inline agent names a registered environment by id.
	id = e.create(keyAlice, `{"agent":{"name":"x","environments":["shop"]},"messages":"Go."}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)

	// Names nobody may use: 422 in the document's error shape.
	for _, tt := range []struct{ key, body, loc string }{
		{keyAlice, `{"agent":"h/unknown","messages":"hi"}`, "[body agent]"},
		{keyBob, `{"agent":"acme/support","messages":"hi"}`, "[body agent]"},
		{keyBob, `{"agent":{"name":"x","environments":["shop"]},"messages":"hi"}`, "[body agent environments 0]"},
		{keyAlice, `{"agent":{"name":"x","skills":["nope"]},"messages":"hi"}`, "[body agent skills 0]"},
		{keyAlice, `{"agent":"acme/support","messages":"hi","overrides":{"agent.tools":[{"name":"read_skill","description":"d"}]}}`, "[body overrides agent.tools 0 name]"},
		{keyAlice, `{"agent":{"name":"x","environments":["shop"],"skills":["acme/lookup"],"tools":[{"name":"list_skills","description":"d"}]},"messages":"hi"}`, "[body agent tools 0 name]"},
	} {
		r := e.call("POST", "/api/v2/sessions", tt.key, tt.body, http.StatusUnprocessableEntity, "")
		var v struct{ Detail []session.FieldError }
		r.json(&v)
		if len(v.Detail) != 1 || fmt.Sprint(v.Detail[0].Loc) != tt.loc {
			t.Errorf("%s: %s, want one error at %s", tt.body, r.body, tt.loc)
		}
	}
}
