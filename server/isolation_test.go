package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestEveryRouteIsolatesKeys goes through every route of the server
// that names an object of a key (a session and all its sub-resources, a
// share link, a schedule, a webhook, a vault, a browser profile, an
// agent, an environment, a skill) with another key: each answer must be
// the answer that key gets for an object that does not exist (same
// status, same body but for the ID), never a success, so that another
// key's objects can be neither read nor changed nor told to exist; and
// at the end every object of the first key is as it was. The operator's
// key opens none of these routes (401, as no key), and the operator's
// routes answer the tenants' keys as routes that do not exist.
func TestEveryRouteIsolatesKeys(t *testing.T) {
	model := openaitest.NewServer(calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)))
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ring, err := vault.ParseKeys(testVaultKey)
	if err != nil {
		t.Fatal(err)
	}
	vaults := vault.New(st, ring, &vault.Options{})
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		Vaults:       vaults.SessionTools(),
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hooks := webhook.New(st, &webhook.Options{Allow: func(a netip.AddrPort) bool { return a.Addr().IsLoopback() }})
	sch := schedule.New(m, st, &schedule.Options{Owner: "replica-1"})
	frame := func(context.Context, string) ([]byte, time.Time, error) { return []byte{0xff, 0xd8}, time.Now(), nil }
	srv := httptest.NewServer(newServer(m, &server.Options{
		APIKeys: []string{keyAlice, keyBob}, OperatorKeys: []string{keyOperator}, Workspaces: t.TempDir(), Webhooks: hooks, Schedules: sch, Vaults: vaults,
		LiveFrame: frame, LiveDesktopFrame: frame,
	}))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL, st: st}

	// Alice's objects.
	sid := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, sid).status(session.StatusAwaitingToolResults)
	base := "/api/v2/sessions/" + sid
	e.expect(e.do("POST", base+"/files/write_file", keyAlice, `{"path":"notes.txt","content_base64":"aGk="}`), http.StatusOK)
	e.expect(e.do("POST", base+"/feedback", keyAlice, `{"success":true}`), http.StatusNoContent)
	var share struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", base+"/share", keyAlice, nil), http.StatusOK).json(&share)
	token := share.ShareURL[strings.LastIndex(share.ShareURL, "/")+1:]
	_, secret, _ := strings.Cut(token, ".")
	var obj struct {
		ID string `json:"id"`
	}
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, `{"name":"n","timing":{"type":"cron","expression":"0 9 * * *","timezone":"UTC"},"session_request":`+orderAgent+`}`), http.StatusCreated).json(&obj)
	scheduleID := obj.ID
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, `{"url":"https://hooks.example.com/x"}`), http.StatusCreated).json(&obj)
	hookID := obj.ID
	e.expect(e.do("POST", "/api/v2/vaults", keyAlice, map[string]any{"name": "v", "provider_config": map[string]any{"op_vault_id": "ops"}, "token": testSeed}), http.StatusCreated).json(&obj)
	vaultID := obj.ID
	var prof struct {
		ProfileID string `json:"profile_id"`
	}
	e.expect(e.do("POST", "/api/v2/browser-profiles/initiate-upload", keyAlice, nil), http.StatusOK).json(&prof)
	e.expect(e.do("POST", "/api/v2/agents", keyAlice, `{"name":"team/mine","description":"Mine.","environments":[]}`), http.StatusCreated)
	e.expect(e.do("POST", "/api/v2/environments", keyAlice, `{"id":"team/env","kind":"web"}`), http.StatusCreated)
	e.expect(e.do("POST", "/api/v2/skills", keyAlice, `{"name":"team/skill","description":"Mine.","body":"b"}`), http.StatusCreated)

	// Each route, with Alice's object and with one that does not exist.
	const missing = "00000000-0000-4000-8000-00000000abcd"
	type route struct{ method, path, body, accept string }
	routes := []route{
		{"GET", "/api/v2/sessions/{s}", "", ""},
		{"DELETE", "/api/v2/sessions/{s}", "", ""},
		{"GET", "/api/v2/sessions/{s}/status", "", ""},
		{"GET", "/api/v2/sessions/{s}/changes", "", ""},
		{"GET", "/api/v2/sessions/{s}/changes?wait_for_seconds=1", "", ""},
		{"GET", "/api/v2/sessions/{s}/events", "", ""},
		{"GET", "/api/v2/sessions/{s}/events?from_index=0", "", ""},
		{"GET", "/api/v2/sessions/{s}/events", "", "text/event-stream"},
		{"GET", "/api/v2/sessions/{s}/resources/events/0", "", ""},
		{"GET", "/api/v2/sessions/{s}/resources/files/notes.txt", "", ""},
		{"POST", "/api/v2/sessions/{s}/files/list_files", `{}`, ""},
		{"POST", "/api/v2/sessions/{s}/files/read_file", `{"path":"notes.txt"}`, ""},
		{"POST", "/api/v2/sessions/{s}/files/write_file", `{"path":"notes.txt","content_base64":"eA=="}`, ""},
		{"POST", "/api/v2/sessions/{s}/messages", `{"message":"hi"}`, ""},
		{"POST", "/api/v2/sessions/{s}/tool_results", `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_1"},"result":"x"}`, ""},
		{"POST", "/api/v2/sessions/{s}/approvals", `{"id":"call_1","approved":true}`, ""},
		{"POST", "/api/v2/sessions/{s}/pause", "", ""},
		{"POST", "/api/v2/sessions/{s}/resume", "", ""},
		{"POST", "/api/v2/sessions/{s}/force_answer", "", ""},
		{"POST", "/api/v2/sessions/{s}/feedback", `{"success":false}`, ""},
		{"PUT", "/api/v2/sessions/{s}/events/0/feedback", `{"success":false}`, ""},
		{"GET", "/api/v2/sessions/{s}/feedback", "", ""},
		{"POST", "/api/v2/sessions/{s}/share", "", ""},
		{"DELETE", "/api/v2/sessions/{s}/share", "", ""},
		{"GET", "/api/v2/sessions/{s}/live", "", ""},
		{"GET", "/api/v2/sessions/{s}/live/desktop", "", ""},
		{"GET", "/api/v2/schedules/{sch}", "", ""},
		{"PATCH", "/api/v2/schedules/{sch}", `{"name":"bob's"}`, ""},
		{"DELETE", "/api/v2/schedules/{sch}", "", ""},
		{"POST", "/api/v2/schedules/{sch}/pause", "", ""},
		{"POST", "/api/v2/schedules/{sch}/resume", "", ""},
		{"POST", "/api/v2/schedules/{sch}/trigger", "", ""},
		{"GET", "/api/v2/schedules/{sch}/runs", "", ""},
		{"GET", "/api/v2/webhooks/{hook}", "", ""},
		{"PATCH", "/api/v2/webhooks/{hook}", `{"description":"bob's"}`, ""},
		{"DELETE", "/api/v2/webhooks/{hook}", "", ""},
		{"POST", "/api/v2/webhooks/{hook}/rotate", "", ""},
		{"POST", "/api/v2/webhooks/{hook}/ping", "", ""},
		{"GET", "/api/v2/webhooks/{hook}/deliveries", "", ""},
		{"GET", "/api/v2/vaults/{vault}", "", ""},
		{"PATCH", "/api/v2/vaults/{vault}", `{"name":"bob's"}`, ""},
		{"DELETE", "/api/v2/vaults/{vault}", "", ""},
		{"PUT", "/api/v2/vaults/{vault}/token", `{"token":"` + testSeed + `"}`, ""},
		{"GET", "/api/v2/vaults/{vault}/health", "", ""},
		{"GET", "/api/v2/browser-profiles/{prof}", "", ""},
		{"DELETE", "/api/v2/browser-profiles/{prof}", "", ""},
		{"POST", "/api/v2/browser-profiles/{prof}/complete-upload", `{"name":"p","browser_name":"chromium","browser_version":"1"}`, ""},
		{"PUT", "/api/v2/browser-profiles/{prof}/default", "", ""},
		{"DELETE", "/api/v2/browser-profiles/{prof}/default", "", ""},
		{"GET", "/api/v2/agents/team/{agent}", "", ""},
		{"GET", "/api/v2/agents/team/{agent}?resolve=true", "", ""},
		{"PUT", "/api/v2/agents/team/{agent}", `{"name":"team/{agent}","description":"Bob's.","environments":[]}`, ""},
		{"PATCH", "/api/v2/agents/team/{agent}", `{"description":"Bob's."}`, ""},
		{"DELETE", "/api/v2/agents/team/{agent}", "", ""},
		{"GET", "/api/v2/environments/team/{env}", "", ""},
		{"PATCH", "/api/v2/environments/team/{env}", `{"description":"Bob's."}`, ""},
		{"DELETE", "/api/v2/environments/team/{env}", "", ""},
		{"GET", "/api/v2/skills/team/{skill}", "", ""},
		{"PATCH", "/api/v2/skills/team/{skill}", `{"description":"Bob's."}`, ""},
		{"DELETE", "/api/v2/skills/team/{skill}", "", ""},
		{"GET", "/api/v2/shared/{s}.{secret}", "", ""},
		{"GET", "/api/v2/shared/{s}.{secret}/events", "", ""},
	}
	alice := strings.NewReplacer("{s}", sid, "{sch}", scheduleID, "{hook}", hookID, "{vault}", vaultID, "{prof}", prof.ProfileID,
		"{agent}", "mine", "{env}", "env", "{skill}", "skill", "{secret}", strings.Repeat("0", len(secret)))
	nobody := strings.NewReplacer("{s}", missing, "{sch}", missing, "{hook}", missing, "{vault}", missing, "{prof}", missing,
		"{agent}", "none", "{env}", "none", "{skill}", "none", "{secret}", strings.Repeat("0", len(secret)))
	// The IDs and names in an answer, made alike.
	same := strings.NewReplacer(sid, "ID", scheduleID, "ID", hookID, "ID", vaultID, "ID", prof.ProfileID, "ID", missing, "ID",
		"team/mine", "NAME", "team/env", "NAME", "team/skill", "NAME", "team/none", "NAME")
	for _, r := range routes {
		ask := func(rep *strings.Replacer) *response {
			var body any
			if r.body != "" {
				body = rep.Replace(r.body)
			}
			var header []string
			if r.accept != "" {
				header = []string{"Accept", r.accept}
			}
			return e.do(r.method, rep.Replace(r.path), keyBob, body, header...)
		}
		got, want := ask(alice), ask(nobody)
		name := r.method + " " + r.path
		if got.status < 300 {
			t.Errorf("%s: another key's object answered %d %s", name, got.status, got.body)
			continue
		}
		if got.status != want.status || same.Replace(string(got.body)) != same.Replace(string(want.body)) {
			t.Errorf("%s: another key's object answered %d %s, one that does not exist %d %s", name, got.status, got.body, want.status, want.body)
		}
		if !strings.HasPrefix(r.path, "/api/v2/shared/") {
			var body any
			if r.body != "" {
				body = alice.Replace(r.body)
			}
			if op := e.do(r.method, alice.Replace(r.path), keyOperator, body); op.status != http.StatusUnauthorized {
				t.Errorf("%s with the operator key: %d %s, want 401", name, op.status, op.body)
			}
		}
	}

	// The operator's routes, to the tenants' keys, do not exist.
	for _, key := range []string{keyAlice, keyBob} {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			notRouted(e, method, "/api/v2/replicas", key)
		}
	}

	// Bob's lists hold none of them, whatever they filter on.
	for _, p := range []string{
		"/api/v2/sessions", "/api/v2/sessions?parent_session_id=" + sid, "/api/v2/sessions?schedule_id=" + scheduleID,
		"/api/v2/sessions?agent=support-agent", "/api/v2/sessions?search=order", "/api/v2/sessions/quota",
		"/api/v2/schedules", "/api/v2/webhooks", "/api/v2/vaults", "/api/v2/browser-profiles",
		"/api/v2/browser-profiles/default?browser_name=chromium", "/api/v2/agents", "/api/v2/environments", "/api/v2/skills",
		"/api/v2/quota/tokens",
	} {
		if r := e.do("GET", p, keyOperator, nil); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s with the operator key: %d %s, want 401", p, r.status, r.body)
		}
		r := e.do("GET", p, keyBob, nil)
		for _, mine := range []string{sid, scheduleID, hookID, vaultID, prof.ProfileID, "team/", "order"} {
			if strings.Contains(string(r.body), mine) {
				t.Errorf("GET %s with another key: %d %s, which names %s", p, r.status, r.body, mine)
			}
		}
	}

	// Alice's objects are as they were.
	var stv session.StatusView
	e.expect(e.do("GET", base+"/status", keyAlice, nil), http.StatusOK).json(&stv)
	if stv.Status != session.StatusAwaitingToolResults {
		t.Errorf("Alice's session is %s after Bob's requests", stv.Status)
	}
	r := e.expect(e.do("POST", base+"/files/read_file", keyAlice, `{"path":"notes.txt"}`), http.StatusOK)
	if !strings.Contains(string(r.body), `"aGk="`) {
		t.Errorf("Alice's file after Bob's requests: %s", r.body)
	}
	r = e.expect(e.do("GET", base+"/feedback", keyAlice, nil), http.StatusOK)
	if !strings.Contains(string(r.body), `"success":true`) {
		t.Errorf("Alice's feedback after Bob's requests: %s", r.body)
	}
	e.expect(e.do("GET", "/api/v2/shared/"+token, "", nil), http.StatusOK)
	r = e.expect(e.do("GET", "/api/v2/schedules/"+scheduleID, keyAlice, nil), http.StatusOK)
	if strings.Contains(string(r.body), "bob") || strings.Contains(string(r.body), `"paused":true`) {
		t.Errorf("Alice's schedule after Bob's requests: %s", r.body)
	}
	r = e.expect(e.do("GET", "/api/v2/webhooks/"+hookID, keyAlice, nil), http.StatusOK)
	if strings.Contains(string(r.body), "bob") {
		t.Errorf("Alice's webhook after Bob's requests: %s", r.body)
	}
	r = e.expect(e.do("GET", "/api/v2/vaults/"+vaultID, keyAlice, nil), http.StatusOK)
	if strings.Contains(string(r.body), "bob") {
		t.Errorf("Alice's vault after Bob's requests: %s", r.body)
	}
	for _, p := range []string{"/api/v2/agents/team/mine", "/api/v2/environments/team/env", "/api/v2/skills/team/skill"} {
		r = e.expect(e.do("GET", p, keyAlice, nil), http.StatusOK)
		if strings.Contains(string(r.body), "Bob") {
			t.Errorf("Alice's %s after Bob's requests: %s", p, r.body)
		}
	}
}
