package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// The tests of this file check the differences with the reference that
// issue 15 lists, one by one; every body they get is also validated by
// the contract (contract_test.go).

// webEnv has a "web" environment with no tools, so that inline agents
// can name it.
func webEnv(t *testing.T, replies ...openaitest.Reply) *env {
	return newEnv(t, &envOptions{session: &session.Options{Environments: map[string]*loop.Toolset{"web": {}}}}, replies...)
}

// TestRequestEchoNormalised: the session echoes its request as hrns
// understood it, a valid SessionRequest, even when the body left out what
// the reference requires (the guide's own create body has no description
// and its environment no id).
func TestRequestEchoNormalised(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "done"})
	body := `{"agent":{"name":"support-agent","environments":[{"kind":"web"}],"tools":[{"name":"get_order_status","input_schema":{"type":"object"}}]},"messages":"Check order 4242."}`
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body), http.StatusCreated)
	var v struct {
		ID      string          `json:"id"`
		Request json.RawMessage `json:"request"`
	}
	r.json(&v)
	want := `{"agent":{"name":"support-agent","description":"support-agent","environments":[{"id":"web","kind":"web"}],"tools":[{"name":"get_order_status","description":"get_order_status","input_schema":{"type":"object"}}]},"messages":[{"type":"user_message","message":"Check order 4242.","caller_id":"user"}],"queue":true}`
	if diff := cmp.Diff(canonical(t, want), canonical(t, string(v.Request))); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	// GET shows the same.
	r = e.expect(e.do("GET", "/api/v2/sessions/"+v.ID, keyAlice, nil), http.StatusOK)
	r.json(&v)
	if diff := cmp.Diff(canonical(t, want), canonical(t, string(v.Request))); diff != "" {
		t.Errorf("request of GET (-want +got):\n%s", diff)
	}
}

func canonical(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

// TestCallerIDKept: a message's caller_id is logged as given.
func TestCallerIDKept(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "second"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":{"message":"hi","caller_id":"ops-bot"},"idle_timeout_s":60}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"type":"batch","messages":[{"type":"user_message","message":"more","caller_id":"alice@example.com"},{"message":"and you?"}]}`), http.StatusAccepted)
	var callers []string
	f.until(func(c *changes) bool {
		callers = nil
		for _, ev := range f.events {
			var d struct {
				Kind     string `json:"kind"`
				CallerID string `json:"caller_id"`
			}
			json.Unmarshal(ev.Data, &d)
			if d.Kind == session.KindMessage {
				callers = append(callers, d.CallerID)
			}
		}
		return len(callers) == 3
	})
	if diff := cmp.Diff([]string{"ops-bot", "alice@example.com", "user"}, callers); diff != "" {
		t.Errorf("callers (-want +got):\n%s", diff)
	}
}

// TestUnauthenticated: the reference's 401 (its HTTPBearer scheme).
func TestUnauthenticated(t *testing.T) {
	e := newEnv(t, nil)
	for _, key := range []string{"", "sk-nobody"} {
		r := e.expect(e.do("GET", "/api/v2/sessions", key, nil), http.StatusUnauthorized)
		if got := r.header.Get("WWW-Authenticate"); got != "Bearer" {
			t.Errorf("WWW-Authenticate = %q", got)
		}
		if got := string(r.body); got != `{"detail":"Not authenticated"}`+"\n" {
			t.Errorf("401 body = %s", got)
		}
	}
}

// TestMessageRestartsFinished: a message to a finished session starts it
// again with the message, as the reference does; its answer replaces the
// last one.
func TestMessageRestartsFinished(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "second"}, openaitest.Reply{Text: "third"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"message":"and then?"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusCompleted && string(c.Answer) == `"second"` })
	// Interrupted sessions restart too.
	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"message":"once more"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusCompleted && string(c.Answer) == `"third"` })
	var st session.StatusView
	e.expect(e.do("GET", base+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if st.Status != session.StatusCompleted || st.Error != nil || st.Steps != 3 {
		t.Errorf("status = %+v", st)
	}
}

// TestMessageResumesPaused: a message to a paused session resumes it.
func TestMessageResumesPaused(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "second"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi","idle_timeout_s":60}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("POST", base+"/pause", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusPaused)
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"message":"go on"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusIdle && string(c.Answer) == `"second"` })
}

// TestPauseDuringStepWithClientCalls: a pause sent while the model makes
// client calls takes effect when the step ends, not once the results are
// posted; a result posted while paused does not announce "running"; the
// session runs on when resumed.
func TestPauseDuringStepWithClientCalls(t *testing.T) {
	inModel := make(chan struct{})
	release := make(chan struct{})
	e := newEnv(t, nil,
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			close(inModel)
			<-release
			return calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`))
		}},
		openaitest.Reply{Text: "shipped"})
	id := e.create(keyAlice, orderAgent)
	base := "/api/v2/sessions/" + id
	<-inModel
	e.expect(e.do("POST", base+"/pause", keyAlice, nil), http.StatusAccepted)
	close(release)
	f := e.follow(keyAlice, id)
	f.status(session.StatusPaused)
	before := int64(len(f.events))
	result := `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","args":{"order_id":"4242"},"id":"call_1"},"result":"shipped"}`
	r := e.expect(e.do("POST", base+"/tool_results", keyAlice, result), http.StatusAccepted)
	f.until(func(c *changes) bool { return kinds(c.NewEvents)[0] == "AgentEvent/tool_result" })
	// Hrns-Events (an hrns addition) says which events the post appended:
	// here, while paused, the result's alone; posted again, none.
	if got, want := r.header.Get(api.HeaderEvents), api.FormatEventRange(before, before+1); got != want || int64(len(f.events)) != before+1 {
		t.Errorf("%s = %q, want %q (%d events before, %d after)", api.HeaderEvents, got, want, before, len(f.events))
	}
	r = e.expect(e.do("POST", base+"/tool_results", keyAlice, result), http.StatusAccepted)
	if got, want := r.header.Get(api.HeaderEvents), api.FormatEventRange(before+1, before+1); got != want {
		t.Errorf("posted again: %s = %q, want %q", api.HeaderEvents, got, want)
	}
	var st session.StatusView
	e.expect(e.do("GET", base+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if st.Status != session.StatusPaused {
		t.Errorf("status after a result posted while paused = %s, want paused", st.Status)
	}
	e.expect(e.do("POST", base+"/resume", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusCompleted)
	want := []string{
		"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running", "AgentEvent/flow_event",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results", "AgentRunStatusChangeEvent",
		"AgentEvent/tool_result",
		"AgentEvent/flow_event", "AgentRunStatusChangeEvent", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent",
	}
	if diff := cmp.Diff(want, kinds(f.events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestAdmissionControl: with a per-key limit of active sessions, a session
// created beyond it waits as queued (queue: true, the default) and starts
// when a slot frees; with queue: false it is refused with 429 and
// Retry-After. GET /api/v2/sessions/quota tells where the key stands.
func TestAdmissionControl(t *testing.T) {
	inModel := make(chan struct{})
	release := make(chan struct{})
	e := newEnv(t, &envOptions{session: &session.Options{MaxActiveSessions: 1}},
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			close(inModel)
			<-release
			return openaitest.Reply{Text: "first"}
		}},
		openaitest.Reply{Text: "second"})
	body := `{"agent":{"name":"a","environments":[]},"messages":"hi"}`
	first := e.create(keyAlice, body)
	<-inModel
	var q session.Quota
	e.expect(e.do("GET", "/api/v2/sessions/quota", keyAlice, nil), http.StatusOK).json(&q)
	if q != (session.Quota{Scope: "user", Limit: 1, Active: 1, Available: 0}) {
		t.Errorf("quota = %+v", q)
	}
	// Another key has its own quota.
	e.expect(e.do("GET", "/api/v2/sessions/quota", keyBob, nil), http.StatusOK).json(&q)
	if q.Active != 0 || q.Available != 1 {
		t.Errorf("bob's quota = %+v", q)
	}
	var v struct {
		ID     string
		Status session.StatusView
	}
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body), http.StatusCreated).json(&v)
	if v.Status.Status != session.StatusQueued {
		t.Errorf("session beyond the limit is %s, want queued", v.Status.Status)
	}
	second := v.ID
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi","queue":false}`), http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	var page session.Page[session.Summary]
	e.expect(e.do("GET", "/api/v2/sessions?status=queued", keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 1 || page.Items[0].ID != second {
		t.Errorf("queued sessions = %+v", page)
	}
	close(release)
	e.follow(keyAlice, first).status(session.StatusCompleted)
	e.follow(keyAlice, second).until(func(c *changes) bool { return c.Status == session.StatusCompleted && string(c.Answer) == `"second"` })
	e.expect(e.do("GET", "/api/v2/sessions/quota", keyAlice, nil), http.StatusOK).json(&q)
	if q.Active != 0 || q.Available != 1 {
		t.Errorf("quota at the end = %+v", q)
	}
}

// TestListFilters: GET /api/v2/sessions filters by group_id, agent,
// search, parent_session_id, created and finished times, owner and
// schedule_id.
func TestListFilters(t *testing.T) {
	e := newEnv(t, &envOptions{session: &session.Options{
		Agents: map[string]*session.AgentConfig{"named": {Description: "a named agent"}},
	}}, openaitest.Reply{Text: "The CHEAPEST is 42"})
	before := time.Now().UTC()
	done := e.create(keyAlice, `{"agent":"named","messages":"find flights","group_id":"g1"}`)
	e.follow(keyAlice, done).status(session.StatusCompleted)
	mid := time.Now().UTC()
	body := `{"agent":{"name":"inline","environments":[]},"messages":"later","idle_timeout_s":60,"group_id":"g2","parent_session_id":"` + done + `"}`
	child := e.create(keyAlice, body)
	e.create(keyBob, `{"agent":"named","messages":"bob's","group_id":"g1"}`)
	list := func(q string) []string {
		t.Helper()
		var page session.Page[session.Summary]
		e.expect(e.do("GET", "/api/v2/sessions?"+q, keyAlice, nil), http.StatusOK).json(&page)
		ids := []string{}
		for _, s := range page.Items {
			ids = append(ids, s.ID)
		}
		if page.Total != len(ids) {
			t.Errorf("%s: total %d, %d items", q, page.Total, len(ids))
		}
		return ids
	}
	ts := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339Nano)) }
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"group_id=g1", []string{done}},
		{"group_id=g2", []string{child}},
		{"agent=named", []string{done}},
		{"agent=named&agent=inline", []string{child, done}},
		{"search=cheapest", []string{done}},
		{"search=LATER", []string{child}},
		{"parent_session_id=" + done, []string{child}},
		{"created_before=" + ts(mid), []string{done}},
		{"created_after=" + ts(mid), []string{child}},
		{"created_after=" + ts(before) + "&created_before=" + ts(time.Now().Add(time.Hour)), []string{child, done}},
		{"finished_after=" + ts(before), []string{done}},
		{"finished_before=" + ts(before), []string{}},
		{"owner=me-or-organization&group_id=g1", []string{done}},
		{"schedule_id=6f1c2a0e-1b2c-4d3e-8f90-123456789abc", []string{}},
		// Times beyond int64 nanoseconds (1678 to 2262) compare as
		// times (issue 33, defect 3): every one the API accepts.
		{"created_after=2300-01-01T00:00:00Z", []string{}},
		{"created_after=9999-12-31T23:59:59.999999999Z", []string{}},
		{"created_before=2300-01-01T00:00:00Z", []string{child, done}},
		{"created_after=1600-01-01T00:00:00Z", []string{child, done}},
		{"created_before=1600-01-01T00:00:00Z", []string{}},
		{"created_after=0001-01-01T00:00:00Z", []string{child, done}},
		{"created_before=0001-01-01T00:00:00Z", []string{}},
		{"created_before=0000-01-01T00:00:00%2B01:00", []string{}},
		{"finished_after=2300-01-01T00:00:00Z", []string{}},
		{"finished_before=2300-01-01T00:00:00Z", []string{done}},
		{"finished_after=1600-01-01T00:00:00Z", []string{done}},
		{"finished_before=1600-01-01T00:00:00Z", []string{}},
	} {
		if diff := cmp.Diff(tc.want, list(tc.q)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.q, diff)
		}
	}
	for _, q := range []string{"owner=everyone", "created_after=yesterday", "schedule_id=nope"} {
		e.expect(e.do("GET", "/api/v2/sessions?"+q, keyAlice, nil), http.StatusUnprocessableEntity)
	}
}

// TestAcceptedBodies: bodies the reference allows that hrns refused.
func TestAcceptedBodies(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "seen"}, openaitest.Reply{Text: "noted"}, openaitest.Reply{Text: "empty"}, openaitest.Reply{Text: "picture"})
	// No messages: the session waits, idle, for its first message.
	for _, body := range []string{`{"agent":{"name":"a","environments":[]}}`, `{"agent":{"name":"a","environments":[]},"messages":null}`} {
		id := e.create(keyAlice, body)
		f := e.follow(keyAlice, id)
		f.status(session.StatusIdle)
		if body == `{"agent":{"name":"a","environments":[]}}` {
			e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"message":"now"}`), http.StatusAccepted)
			f.until(func(c *changes) bool { return c.Status == session.StatusCompleted && string(c.Answer) == `"seen"` })
			// A message to the finished session starts it again.
			e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"message":"again"}`), http.StatusAccepted)
		}
	}
	// An empty message, and images given as URLs.
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":{"message":"","images":["https://example.com/cat.png"]}}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	var content []any
	json.Unmarshal(f.events[0].Data, &struct {
		Content *[]any `json:"content"`
	}{&content})
	if diff := cmp.Diff([]any{map[string]any{"type": "url", "source": "https://example.com/cat.png"}}, content); diff != "" {
		t.Errorf("message content (-want +got):\n%s", diff)
	}
	e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":""}`)
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[]},"messages":{"message":"x","images":["ftp://example.com/a.png"]}}`), http.StatusUnprocessableEntity)
}

// TestEnvironments: a desktop on the server is refused clearly (the
// user's own is accepted: userdesktop_test.go); a web environment's
// start_url, headless and mode are accepted, kept in the request, given to
// the kind's Options.SessionEnvironments func, and reported as not
// honoured without one.
func TestEnvironments(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "ok"})
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"id":"my-desktop","kind":"desktop","host":"cloud"}]},"messages":"hi"}`), http.StatusUnprocessableEntity)
	var detail struct{ Detail []session.FieldError }
	r.json(&detail)
	if len(detail.Detail) != 1 || !strings.Contains(detail.Detail[0].Msg, `a desktop environment runs on the caller's device here`) || fmt.Sprint(detail.Detail[0].Loc) != "[body agent environments 0 host]" {
		t.Errorf("desktop refused with %s", r.body)
	}
	web := `{"kind":"web","start_url":"https://example.com","headless":true,"mode":{"type":"text","chunk_size":5000}}`
	r = e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[`+web+`]},"messages":"hi","delete_after_min":5}`), http.StatusCreated)
	if got, want := r.header.Get("Hrns-Not-Honoured"), "delete_after_min, agent.environments[0].headless, agent.environments[0].mode, agent.environments[0].start_url"; got != want {
		t.Errorf("Hrns-Not-Honoured = %q, want %q", got, want)
	}
	var v struct {
		Request struct {
			Agent struct{ Environments []json.RawMessage }
		}
	}
	r.json(&v)
	want := `{"id":"web","kind":"web","start_url":"https://example.com","headless":true,"mode":{"type":"text","chunk_size":5000}}`
	if diff := cmp.Diff(canonical(t, want), canonical(t, string(v.Request.Agent.Environments[0]))); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}

	// With a builder, the definition reaches it when the session runs.
	got := make(chan string, 1)
	e2 := newEnv(t, &envOptions{session: &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		SessionEnvironments: map[string]session.EnvironmentFunc{"web": func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
			if p.Session != "" { // not while the request is validated
				select {
				case got <- string(p.Config):
				default:
				}
			}
			return &loop.Toolset{}, nil, nil
		}},
	}}, openaitest.Reply{Text: "ok"})
	r = e2.expect(e2.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[`+web+`]},"messages":"hi"}`), http.StatusCreated)
	if h := r.header.Get("Hrns-Not-Honoured"); h != "" {
		t.Errorf("Hrns-Not-Honoured with a builder = %q", h)
	}
	if diff := cmp.Diff(canonical(t, want), canonical(t, <-got)); diff != "" {
		t.Errorf("definition given to the builder (-want +got):\n%s", diff)
	}
}

// TestErrorEventWithoutToolReq: an error_event without tool_req answers
// no call: it is logged and the agent reads it as a message.
func TestErrorEventWithoutToolReq(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "I see the error"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi","idle_timeout_s":60}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, `{"kind":"error_event","error":"the printer is on fire","origin":"custom_tools"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return string(c.Answer) == `"I see the error"` })
	if !strings.Contains(string(e.model.Requests()[1].Body), "Error reported by custom_tools: the printer is on fire") {
		t.Errorf("the model did not read the error: %s", e.model.Requests()[1].Body)
	}
	// A tool_result still needs its call.
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, `{"kind":"tool_result","result":"x"}`), http.StatusUnprocessableEntity)
}

// TestAnswerFormat: answer_format makes the final answer a JSON object
// matching it, validated: a mismatch is sent back to the model (an
// error_event with origin answer_validation), the answer is delivered as
// an object in the answer_event, /changes and latest_answer; an answer
// that never matches fails the session with error_code answer_validation.
func TestAnswerFormat(t *testing.T) {
	e := webEnv(t,
		openaitest.Reply{Text: `{"city": 3}`},
		openaitest.Reply{Text: `{"city": "Paris"}`},
		openaitest.Reply{Text: `nope`}, openaitest.Reply{Text: `nope`}, openaitest.Reply{Text: `nope`},
	)
	format := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[],"answer_format":`+format+`},"messages":"Where?"}`)
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if diff := cmp.Diff(canonical(t, `{"city":"Paris"}`), canonical(t, string(c.Answer))); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rejected, answers int
	for _, ev := range f.events {
		var d struct {
			Kind   string          `json:"kind"`
			Origin string          `json:"origin"`
			Answer json.RawMessage `json:"answer"`
		}
		json.Unmarshal(ev.Data, &d)
		switch {
		case d.Kind == session.KindError && d.Origin == "answer_validation":
			rejected++
		case d.Kind == session.KindAnswer:
			answers++
			if !strings.HasPrefix(string(d.Answer), "{") {
				t.Errorf("answer_event answer = %s, want an object", d.Answer)
			}
		}
	}
	if rejected != 1 || answers != 1 {
		t.Errorf("%d rejections, %d answers; events:\n%s", rejected, answers, f.dump())
	}
	var v struct {
		LatestAnswer json.RawMessage `json:"latest_answer"`
		Status       session.StatusView
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).json(&v)
	if diff := cmp.Diff(canonical(t, `{"city":"Paris"}`), canonical(t, string(v.LatestAnswer))); diff != "" || v.Status.Steps != 2 {
		t.Errorf("latest_answer (-want +got):\n%s; steps %d", diff, v.Status.Steps)
	}

	// Never valid: failed, answer_validation.
	id = e.create(keyAlice, `{"agent":{"name":"a","environments":[],"answer_format":`+format+`},"messages":"Where?"}`)
	c = e.follow(keyAlice, id).status(session.StatusFailed)
	if c.ErrorCode == nil || *c.ErrorCode != session.CodeAnswerValidation {
		t.Errorf("error_code = %v, want answer_validation", c.ErrorCode)
	}

	// Not a schema of an object: 422.
	for _, bad := range []string{`{"type":"string"}`, `{"type":"object","properties":{"x":{"minLength":"three"}}}`, `[]`} {
		e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[],"answer_format":`+bad+`},"messages":"Where?"}`), http.StatusUnprocessableEntity)
	}
}

// TestOverrides: overrides beyond agent.tools, agent.instructions and
// agent.model: the budgets, agent.description, agent.answer_format and an
// environment's fields by kind.
func TestOverrides(t *testing.T) {
	got := make(chan string, 1)
	e := newEnv(t, &envOptions{session: &session.Options{
		Agents:       map[string]*session.AgentConfig{"named": {Description: "named", Toolsets: []string{"web"}}},
		Environments: map[string]*loop.Toolset{"web": {}},
		SessionEnvironments: map[string]session.EnvironmentFunc{"web": func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
			if p.Session != "" {
				select {
				case got <- string(p.Config):
				default:
				}
			}
			return &loop.Toolset{}, nil, nil
		}},
	}}, openaitest.Reply{Text: `{"n":1}`})
	body := `{"agent":"named","messages":"hi","overrides":{
		"agent.environments[kind=web].start_url":"https://bing.com",
		"agent.answer_format":{"type":"object","properties":{"n":{"type":"integer"}}},
		"agent.description":"overridden","max_steps":3}}`
	id := e.create(keyAlice, body)
	c := e.follow(keyAlice, id).status(session.StatusCompleted)
	if string(c.Answer) != `{"n":1}` {
		t.Errorf("answer = %s, want the structured one", c.Answer)
	}
	if diff := cmp.Diff(canonical(t, `{"id":"web","kind":"web","start_url":"https://bing.com"}`), canonical(t, <-got)); diff != "" {
		t.Errorf("environment given to the builder (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(e.model.Requests()[0].Body), "overridden") {
		t.Errorf("the description override did not reach the model: %s", e.model.Requests()[0].Body)
	}
	for _, bad := range []string{`{"agent.environments[kind=desktop].start_url":"x"}`, `{"agent.environments[kind=web].kind":"desktop"}`, `{"agent.name":"x"}`, `{"max_steps":"many"}`} {
		e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":"named","messages":"hi","overrides":`+bad+`}`), http.StatusUnprocessableEntity)
	}
}

// TestFeedbackAndShare: feedback on a session and on an event (204), and
// sharing: the share_url reads the session without a key until unshared.
func TestFeedbackAndShare(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("POST", base+"/feedback", keyAlice, `{"success":true,"message":"great"}`), http.StatusNoContent)
	e.expect(e.do("PUT", base+"/events/0/feedback", keyAlice, `{"success":false}`), http.StatusNoContent)
	e.expect(e.do("PUT", base+"/events/999/feedback", keyAlice, `{"success":false}`), http.StatusUnprocessableEntity)
	e.expect(e.do("PUT", base+"/events/x/feedback", keyAlice, `{"success":false}`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", base+"/feedback", keyAlice, `{"message":"no verdict"}`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", base+"/feedback", keyBob, `{"success":true}`), http.StatusNotFound)

	var link struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", base+"/share", keyAlice, nil), http.StatusOK).json(&link)
	var again struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", base+"/share", keyAlice, nil), http.StatusOK).json(&again)
	if !strings.HasPrefix(link.ShareURL, e.url+"/api/v2/shared/") || again != link {
		t.Errorf("share urls %q then %q, want absolute ones under %s", link.ShareURL, again.ShareURL, e.url)
	}
	link.ShareURL = strings.TrimPrefix(link.ShareURL, e.url)
	var v struct{ ID string }
	e.expect(e.do("GET", link.ShareURL, "", nil), http.StatusOK).json(&v)
	if v.ID != id {
		t.Errorf("shared session = %q", v.ID)
	}
	e.expect(e.do("GET", link.ShareURL+"x", "", nil), http.StatusNotFound)
	e.expect(e.do("DELETE", base+"/share", keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("GET", link.ShareURL, "", nil), http.StatusNotFound)
	e.expect(e.do("DELETE", base+"/share", keyAlice, nil), http.StatusNoContent)
}

// TestSkills: inline skills and skills the server knows by name are listed
// in the agent's prompt and loaded with load_skill; an unknown name is 422.
func TestSkills(t *testing.T) {
	e := newEnv(t, &envOptions{session: &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		Skills:       map[string]*session.Skill{"h/refunds": {Name: "h/refunds", Description: "How to refund.", Body: "Refund within 30 days only."}},
	}},
		calls(openaitest.ToolCall("call_1", "load_skill", `{"name":"h/refunds"}`)),
		openaitest.Reply{Text: "Refunded."})
	body := `{"agent":{"name":"a","environments":[],"skills":["h/refunds",{"name":"greeting","description":"How to greet.","body":"Say hello."}]},"messages":"Refund order 7."}`
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	first := string(e.model.Requests()[0].Body)
	for _, want := range []string{"h/refunds: How to refund.", "greeting: How to greet.", `"load_skill"`} {
		if !strings.Contains(first, want) {
			t.Errorf("the first request lacks %q: %s", want, first)
		}
	}
	if !strings.Contains(string(e.model.Requests()[1].Body), "Refund within 30 days only.") {
		t.Errorf("load_skill did not return the body: %s", e.model.Requests()[1].Body)
	}
	for _, bad := range []string{`["nope"]`, `[{"name":"Bad Name","description":"d","body":"b"}]`, `[{"name":"x","description":"d"}]`} {
		e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[],"skills":`+bad+`},"messages":"hi"}`), http.StatusUnprocessableEntity)
	}
}

// TestSubagents: a delegate call runs the subagent as a child session
// (parent_session_id set, listed by the filter and in the parent's
// subagent_session_ids); its answer is the call's result.
func TestSubagents(t *testing.T) {
	e := webEnv(t,
		calls(openaitest.ToolCall("call_1", "delegate", `{"agent":"researcher","task":"Find the answer."}`)),
		openaitest.Reply{Text: "It is 42."},
		openaitest.Reply{Text: "The researcher says 42."},
	)
	body := `{"agent":{"name":"boss","environments":[],"subagents":[{"name":"researcher","description":"Finds answers.","environments":[]}]},"messages":"What is the answer?"}`
	id := e.create(keyAlice, body)
	c := e.follow(keyAlice, id).status(session.StatusCompleted)
	if string(c.Answer) != `"The researcher says 42."` {
		t.Errorf("answer = %s", c.Answer)
	}
	var st session.StatusView
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if len(st.SubagentSessionIDs) != 1 {
		t.Fatalf("subagent_session_ids = %v", st.SubagentSessionIDs)
	}
	child := st.SubagentSessionIDs[0]
	var page session.Page[session.Summary]
	e.expect(e.do("GET", "/api/v2/sessions?parent_session_id="+id, keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 1 || page.Items[0].ID != child || page.Items[0].Status != session.StatusCompleted {
		t.Errorf("children = %+v", page.Items)
	}
	if !strings.Contains(string(e.model.Requests()[2].Body), "It is 42.") {
		t.Errorf("the parent did not read the child's answer: %s", e.model.Requests()[2].Body)
	}
	// Bob sees neither.
	e.expect(e.do("GET", "/api/v2/sessions/"+child, keyBob, nil), http.StatusNotFound)
	// Invalid subagents are refused.
	for _, bad := range []string{`[{"name":"x","environments":[{"kind":"moon"}]}]`, `["nobody"]`, `[{"name":"a","environments":[]},{"name":"a","environments":[]}]`} {
		e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"boss","environments":[],"subagents":`+bad+`},"messages":"hi"}`), http.StatusUnprocessableEntity)
	}
}

// TestSubagentCancelled: a child session cancelled by the caller is an
// error result for its parent, which goes on.
func TestSubagentCancelled(t *testing.T) {
	inChild := make(chan struct{})
	e := webEnv(t,
		calls(openaitest.ToolCall("call_1", "delegate", `{"agent":"researcher","task":"Find it."}`)),
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			close(inChild)
			return calls(openaitest.ToolCall("call_9", "nothing_here", `{}`))
		}},
		openaitest.Reply{Text: "The researcher was stopped."},
	)
	id := e.create(keyAlice, `{"agent":{"name":"boss","environments":[],"subagents":[{"name":"researcher","description":"Finds.","environments":[],"tools":[{"name":"nothing_here","description":"waits"}]}]},"messages":"Go."}`)
	<-inChild
	var st session.StatusView
	var child string
	for range 500 {
		e.expect(e.do("GET", "/api/v2/sessions/"+id+"/status", keyAlice, nil), http.StatusOK).json(&st)
		if len(st.SubagentSessionIDs) == 1 {
			child = st.SubagentSessionIDs[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if child == "" {
		t.Fatal("no child session")
	}
	e.follow(keyAlice, child).status(session.StatusAwaitingToolResults)
	e.expect(e.do("DELETE", "/api/v2/sessions/"+child, keyAlice, nil), http.StatusNoContent)
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"The researcher was stopped."` {
		t.Errorf("answer = %s", c.Answer)
	}
	if !strings.Contains(f.dump(), `"origin":"subagent"`) {
		t.Errorf("no error_event from the subagent:\n%s", f.dump())
	}
}
