package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// The whole stack under whatever a model sends: a fuzzed response body in
// a provider's wire format is decoded by the real provider client and run
// by the loop, then shown by both of the CLI's renderers
// (FuzzModelOutputLoop), or driven through a session: worker, SQLite store
// and HTTP API (FuzzModelOutputSession, slower per input). Nothing may
// panic, every line, event and stored document must be valid JSON, the
// transcript must round-trip, every request sent back to the model must be
// valid JSON, and every session must end or wait with a consistent list of
// pending calls.
//
// Seeds are the providers' recorded streams and hostile streams written
// here (among them the malformed-arguments stream that once crashed hrns
// serve); an input the fuzzer finds failing is kept by go test under
// testdata/fuzz (none so far). .ci/run fuzzes each for a few
// seconds; for longer: go test -run='^$' -fuzz=FuzzModelOutputLoop ./cmd/hrns/internal/cli
func FuzzModelOutputLoop(f *testing.F) {
	addModelSeeds(f)
	stack := newFuzzStack(f)
	f.Fuzz(func(t *testing.T, provider byte, body []byte) {
		stack.runLoop(t, fuzzKinds[int(provider)%len(fuzzKinds)], body)
	})
}

func FuzzModelOutputSession(f *testing.F) {
	addModelSeeds(f)
	stack := newFuzzStack(f)
	f.Fuzz(func(t *testing.T, provider byte, body []byte) {
		stack.runSession(t, fuzzKinds[int(provider)%len(fuzzKinds)], body)
	})
}

func addModelSeeds(f *testing.F) {
	for _, dir := range []struct {
		provider byte
		glob     string
	}{{0, "../../../../openai/testdata/*.sse"}, {1, "../../../../anthropic/testdata/*.sse"}, {2, "../../../../responses/testdata/*.sse"}, {3, "../../../../gemini/testdata/*.sse"}} {
		files, _ := filepath.Glob(dir.glob)
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(dir.provider, b)
		}
	}
	for _, s := range hostileOpenAIStreams {
		f.Add(byte(0), []byte(s))
	}
	for _, s := range hostileAnthropicStreams {
		f.Add(byte(1), []byte(s))
	}
	for _, s := range hostileGeminiStreams {
		f.Add(byte(3), []byte(s))
	}
}

var fuzzKinds = []string{"openai", "anthropic", "openai-responses", "gemini"}

// Hand-written streams with the glitches models and servers produce.
var hostileOpenAIStreams = []string{
	// Unterminated arguments, then a normal finish.
	`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"text\": \"a\""}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
	// Negative, huge and interleaved indices, empty and duplicate ids, odd names.
	`data: {"choices":[{"delta":{"tool_calls":[{"index":-5,"id":"","function":{"name":"","arguments":"[1,2]"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"tool_calls":[{"index":9223372036854775807,"id":"d","function":{"name":"echo\u202e\u0000","arguments":"\"x\""}}]}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"d","function":{"name":"echo","arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"e","function":{"name":"echo","arguments":"{\"text\":1}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
	// Text after the finish, then a cut.
	`data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[{"delta":{"content":" more"}}]}` + "\n\n" + `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c9","function":{"name":"echo","arguments":"{\"te`,
	// Non-UTF-8 and NUL bytes in arguments and text.
	"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\x00\",\"tool_calls\":[{\"index\":0,\"id\":\"c\xff\",\"function\":{\"name\":\"echo\",\"arguments\":\"{\\\"text\\\":\\\"\xc3\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
	// Huge arguments.
	`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"echo","arguments":"{\"text\":\"` + strings.Repeat("ab", 40000) + `\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
}

var hostileAnthropicStreams = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\",\"usage\":{\"input_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"echo\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"text\\\": \\\"a\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":99999999999,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"after the end\"}}\n\n",
}

var hostileGeminiStreams = []string{
	// Calls without ids, one repeated id, arguments that are not an object,
	// a signature of invalid UTF-8, and text after the calls.
	`data: {"responseId":"r","candidates":[{"content":{"parts":[{"functionCall":{"name":"echo","args":{"text":"a"}},"thoughtSignature":"` + "\xff" + `"},` +
		`{"functionCall":{"id":"x","name":"echo","args":[1]}},{"functionCall":{"id":"x","name":"","args":"s"}},{"text":"after","thoughtSignature":"t"}]},"finishReason":"STOP"}]}` + "\n\n",
	// Thoughts only, signed on an empty part, then a malformed call finish.
	`data: {"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"","thoughtSignature":"s"}]}}]}` + "\n\n" +
		`data: {"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}` + "\n\n",
}

// finalAnswers are complete responses in each wire format, given to every
// request after the fuzzed one so that runs with tool calls can finish.
var finalAnswers = map[string]string{
	"openai": `data: {"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
	"anthropic": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\",\"usage\":{\"input_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"openai-responses": "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\"," +
		"\"output\":[{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"done\"}]}]}}\n\n",
	"gemini": `data: {"candidates":[{"content":{"parts":[{"text":"done"}],"role":"model"},"finishReason":"STOP","index":0}]}` + "\r\n\r\n",
}

// modelWire answers model requests in memory: the first request after
// reset gets the fuzzed body, later ones a final answer in the same wire
// format. It also checks that every request the providers send is valid
// JSON: a transcript holding what the model wrote must stay sendable.
type modelWire struct {
	mu       sync.Mutex
	kind     string
	body     []byte
	requests int
	badBody  string
}

func (w *modelWire) reset(kind string, body []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kind, w.body, w.requests, w.badBody = kind, body, 0, ""
}

func (w *modelWire) RoundTrip(r *http.Request) (*http.Response, error) {
	req, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !json.Valid(req) && w.badBody == "" {
		w.badBody = string(req)
	}
	body := []byte(finalAnswers[w.kind])
	if w.requests == 0 {
		body = w.body
	}
	w.requests++
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    r,
	}, nil
}

func (w *modelWire) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.badBody != "" {
		t.Fatalf("a request body sent to the model is not valid JSON: %.300q", w.badBody)
	}
}

// fuzzStack is built once per fuzzing process and reused by every input.
type fuzzStack struct {
	wire    *modelWire
	model   *switchModel
	tools   *loop.Toolset
	handler http.Handler
	store   *sqlite.Store
}

const fuzzKey = "sk-fuzz"

var fastRetry = loop.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond, MaxRetryAfter: time.Millisecond}

func newFuzzStack(f *testing.F) *fuzzStack {
	wire := &modelWire{}
	hc := &http.Client{Transport: wire}
	model := &switchModel{models: map[string]llm.Model{
		"openai":           &openai.Client{BaseURL: "http://model.invalid/v1", Model: "m", HTTPClient: hc},
		"anthropic":        &anthropic.Client{BaseURL: "http://model.invalid", APIKey: "k", Model: "m", HTTPClient: hc},
		"openai-responses": &responses.Client{BaseURL: "http://model.invalid/v1", Model: "m", HTTPClient: hc},
		"gemini":           &gemini.Client{BaseURL: "http://model.invalid", Model: "m", HTTPClient: hc},
	}}
	echo := loop.NewTool("echo", "Echoes text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return "echo: " + in.Text, nil
	})
	st, err := sqlite.Open(filepath.Join(f.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	m := session.New(st, model, &session.Options{Retry: fastRetry, Workers: 4})
	if err := m.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Stop(context.Background()) })
	return &fuzzStack{
		wire:    wire,
		model:   model,
		tools:   loop.MustToolset(echo),
		handler: newServer(m, &server.Options{APIKeys: []string{fuzzKey}}),
		store:   st,
	}
}

// switchModel lets one session manager speak either wire format.
type switchModel struct {
	mu     sync.Mutex
	kind   string
	models map[string]llm.Model
}

func (m *switchModel) set(kind string) { m.mu.Lock(); m.kind = kind; m.mu.Unlock() }

func (m *switchModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	m.mu.Lock()
	model := m.models[m.kind]
	m.mu.Unlock()
	return model.Stream(ctx, req)
}

// runLoop runs the body through the provider and the loop in process and
// shows the run with both of the CLI's renderers.
func (s *fuzzStack) runLoop(t *testing.T, kind string, body []byte) {
	s.wire.reset(kind, body)
	s.model.set(kind)
	agent := loop.NewAgent(s.model, s.tools, &loop.Options{Retry: fastRetry, MaxTurns: 4})
	var jsonOut, textOut, textLog, ttyOut, ttyLog bytes.Buffer
	// Both text modes: redirected (each attempt's text written once) and
	// a terminal (streamed).
	js, text, tty := newJSONRenderer(&jsonOut), newTextRenderer(&textOut, &textLog, false), newTextRenderer(&ttyOut, &ttyLog, true)
	var res *loop.Result
	for c := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
		js.chunk(c)
		text.chunk(c)
		tty.chunk(c)
		if c.Type == loop.ChunkEnd {
			res = c.Result
		}
	}
	if err := js.close(); err != nil {
		t.Fatalf("--json renderer: %v", err)
	}
	if err := text.close(); err != nil {
		t.Fatalf("text renderer: %v", err)
	}
	if err := tty.close(); err != nil {
		t.Fatalf("terminal renderer: %v", err)
	}
	if res == nil {
		t.Fatal("the run ended without a result")
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(jsonOut.Bytes(), []byte("\n")), []byte("\n")) {
		if !json.Valid(line) {
			t.Fatalf("--json line %d is not JSON: %.300q", i, line)
		}
	}
	b, err := json.Marshal(res.Messages)
	if err != nil {
		t.Fatalf("the transcript does not encode: %v", err)
	}
	var back []llm.Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the transcript does not decode: %v", err)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(again, b) {
		t.Fatalf("the transcript changed in a round trip")
	}
	s.wire.check(t)
}

// runSession drives the body through a session: create it, answer its
// client-tool calls, and check what the API shows at every step.
func (s *fuzzStack) runSession(t *testing.T, kind string, body []byte) {
	s.wire.reset(kind, body)
	s.model.set(kind)
	code, created := s.call(t, "POST", "/api/v2/sessions", `{"agent":{"name":"fuzz","description":"d","environments":[],
		"tools":[{"name":"echo","description":"Echoes text.","input_schema":{"type":"object","properties":{"text":{"type":"string"}}}}]},
		"max_steps":4,"messages":"go"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, created)
	}
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(created, &v)
	base := "/api/v2/sessions/" + v.ID
	for round := 0; ; round++ {
		status := s.settle(t, base)
		if status != string(session.StatusAwaitingToolResults) {
			break
		}
		if round == 4 {
			t.Fatalf("still awaiting tool results after %d rounds", round)
		}
		// Answer every pending call; the list must be consistent.
		pending := s.pending(t, base)
		if len(pending) == 0 {
			_, evs := s.call(t, "GET", base+"/events?limit=1000", "")
			t.Fatalf("awaiting tool results with no pending call: %.2000s", evs)
		}
		seen := map[string]bool{}
		var results []string
		for _, p := range pending {
			if p.ID == "" || seen[p.ID] || p.ToolName != "echo" {
				t.Fatalf("inconsistent pending call %+v", p)
			}
			seen[p.ID] = true
			req, _ := json.Marshal(map[string]any{"kind": "tool_result", "result": "ok",
				"tool_req": map[string]any{"tool_name": p.ToolName, "args": map[string]any{}, "id": p.ID}})
			results = append(results, string(req))
		}
		if code, b := s.call(t, "POST", base+"/tool_results", `{"type":"batch","results":[`+strings.Join(results, ",")+`]}`); code != http.StatusAccepted {
			t.Fatalf("posting results: %d %s", code, b)
		}
	}
	for _, path := range []string{base, base + "/status", base + "/events?limit=1000"} {
		if code, b := s.call(t, "GET", path, ""); code != http.StatusOK || !json.Valid(b) {
			t.Fatalf("GET %s: %d %.300q", path, code, b)
		}
	}
	stored, err := s.store.GetSession(t.Context(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{"state": stored.State, "request": stored.Request} {
		if !json.Valid(doc) {
			t.Fatalf("stored %s is not JSON: %.300q", name, doc)
		}
	}
	s.sameLog(t, base)
	s.wire.check(t)
}

// sameLog reads the session's log through changes, three events at a
// time (the last commit's events come from what the commit wrote, not
// from the store), and checks that it is, byte for byte, the log the
// events listing reads from the store.
func (s *fuzzStack) sameLog(t *testing.T, base string) {
	var viaChanges []json.RawMessage
	for cursor := 0; len(viaChanges) <= 10000; {
		code, b := s.call(t, "GET", fmt.Sprintf("%s/changes?from_index=%d&limit=3", base, cursor), "")
		if code == http.StatusNoContent {
			break
		}
		var c struct {
			NewEvents []json.RawMessage `json:"new_events"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &c) != nil {
			t.Fatalf("changes from %d: %d %.300q", cursor, code, b)
		}
		if len(c.NewEvents) == 0 {
			break
		}
		viaChanges = append(viaChanges, c.NewEvents...)
		cursor += len(c.NewEvents)
	}
	var listed []json.RawMessage
	for page := 1; ; page++ {
		_, b := s.call(t, "GET", fmt.Sprintf("%s/events?size=200&page=%d", base, page), "")
		var p struct {
			Items []json.RawMessage `json:"items"`
			Total int               `json:"total"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("events: %v: %.300q", err, b)
		}
		listed = append(listed, p.Items...)
		if len(p.Items) == 0 || len(listed) >= p.Total {
			break
		}
	}
	if len(viaChanges) != len(listed) {
		t.Fatalf("changes gave %d events, the listing %d", len(viaChanges), len(listed))
	}
	for i := range listed {
		if !bytes.Equal(viaChanges[i], listed[i]) {
			t.Fatalf("event %d through changes:\n%.500s\nin the listing:\n%.500s", i, viaChanges[i], listed[i])
		}
	}
}

// settle waits (boundedly) until the session ends or waits for results.
func (s *fuzzStack) settle(t *testing.T, base string) string {
	for range 2000 {
		_, b := s.call(t, "GET", base+"/status", "")
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("status is not JSON: %.300q", b)
		}
		if session.Status(st.Status).Terminal() || st.Status == string(session.StatusAwaitingToolResults) {
			return st.Status
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the session neither ended nor waited")
	return ""
}

type pendingCall struct {
	ID       string `json:"id"`
	ToolName string `json:"tool_name"`
}

// pending reads the calls the latest state change says are pending.
func (s *fuzzStack) pending(t *testing.T, base string) []pendingCall {
	_, b := s.call(t, "GET", base+"/events?size=200", "")
	var page struct {
		Events []struct {
			Type string `json:"type"`
			Data struct {
				State   string        `json:"state"`
				Pending []pendingCall `json:"pending_tool_calls"`
			} `json:"data"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("events: %v: %.300q", err, b)
	}
	var out []pendingCall
	for _, e := range page.Events {
		if e.Type == "ActiveStateChangeEvent" && e.Data.State == string(session.StatusAwaitingToolResults) {
			out = e.Data.Pending
		}
	}
	return out
}

func (s *fuzzStack) call(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+fuzzKey)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// newServer is server.New for a test's Options, which are valid.
func newServer(m *session.Manager, opts *server.Options) *server.Server {
	s, err := server.New(m, opts)
	if err != nil {
		panic(err)
	}
	return s
}
