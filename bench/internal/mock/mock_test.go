package mock_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/raw"
	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

func TestStreamsDecode(t *testing.T) {
	call := mock.ToolCallStream("call_1", task.ToolName, `{"path":"notes/turn-1.txt"}`, 8)
	if got := call.Chunks(); got != 12 {
		t.Errorf("tool call stream has %d chunks, want 12 (role, header, 8 deltas, finish, usage)", got)
	}
	var acc raw.Accumulator
	if err := raw.ReadStream(strings.NewReader(string(call.Whole)), acc.Add); err != nil {
		t.Fatal(err)
	}
	acc.Finish()
	if len(acc.Calls) != 1 || acc.Calls[0].Function.Arguments != `{"path":"notes/turn-1.txt"}` || acc.Chunks != 12 {
		t.Errorf("decoded %d chunks and calls %+v", acc.Chunks, acc.Calls)
	}

	deltas := mock.FinalText(100)
	text := mock.TextStream(deltas)
	acc = raw.Accumulator{}
	if err := raw.ReadStream(strings.NewReader(string(text.Whole)), acc.Add); err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(deltas, ""); acc.Text.String() != want || acc.Chunks != 103 {
		t.Errorf("decoded %d chunks, text %q, want 103 and %q", acc.Chunks, acc.Text.String(), want)
	}
}

// TestClientsDoTheTask runs the raw baseline and the hrns loop against the
// mock and checks the mock's counts, as the driver does.
func TestClientsDoTheTask(t *testing.T) {
	srv := mock.New(&mock.Options{ToolCalls: 3, TextChunks: 20})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnState = srv.ConnState
	ts.Start()
	defer ts.Close()
	base := ts.URL + "/v1"

	read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		return task.Read(in.Path), nil
	})
	agent := loop.NewAgent(&openai.Client{BaseURL: base, Model: "bench-model"}, loop.MustToolset(read), nil)
	clients := map[string]func(context.Context) (string, error){
		// Its own transport: on the default one, it could reuse a
		// connection the hrns client left idle and open none.
		"raw": (&raw.Client{BaseURL: base, Model: "bench-model", HTTPClient: &http.Client{Transport: &http.Transport{}}}).Run,
		"hrns": func(ctx context.Context) (string, error) {
			res, err := agent.Run(ctx, []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)})
			if err != nil {
				return "", err
			}
			return res.Answer, nil
		},
	}
	for name, run := range clients {
		t.Run(name, func(t *testing.T) {
			before := srv.Stats()
			for range 2 {
				answer, err := run(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(answer) != before.AnswerBytes {
					t.Errorf("answer of %d bytes, want %d", len(answer), before.AnswerBytes)
				}
			}
			after := srv.Stats()
			conns := after.Connections - before.Connections
			if name == "raw" && conns != 1 {
				t.Errorf("the baseline opened %d connections, want 1: it must keep its connection alive", conns)
			}
			t.Logf("%d connections for 8 requests", conns)
			if got := after.Requests - before.Requests; got != 8 {
				t.Errorf("%d requests, want 8", got)
			}
			if got := after.ToolResults - before.ToolResults; got != 6 {
				t.Errorf("%d tool results, want 6", got)
			}
			if got := after.Events - before.Events; got != int64(2*after.EventsPerRun) {
				t.Errorf("%d events, want %d", got, 2*after.EventsPerRun)
			}
		})
	}
	if s := srv.Stats(); s.Rejected != 0 {
		t.Errorf("%d requests rejected", s.Rejected)
	}
}

func TestRejects(t *testing.T) {
	srv := mock.New(nil)
	for name, body := range map[string]string{
		"not JSON":            `{`,
		"not streaming":       `{"tools":[{}],"messages":[]}`,
		"no tools":            `{"stream":true,"messages":[]}`,
		"result without call": `{"stream":true,"tools":[{}],"messages":[{"role":"tool","content":"x"}]}`,
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
	}
	if s := srv.Stats(); s.Rejected != 4 || s.Requests != 0 {
		t.Errorf("stats %+v, want 4 rejected and no request", s)
	}
}

func TestArrivals(t *testing.T) {
	body := `{"stream":true,"tools":[{}],"messages":[{"role":"user","content":"x"}]}`
	post := func(srv *mock.Server) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	off := mock.New(nil)
	post(off)
	if a := off.Arrivals(0); a.Total != 0 || len(a.UnixNano) != 0 {
		t.Errorf("recorded %+v without RecordArrivals", a)
	}

	srv := mock.New(&mock.Options{RecordArrivals: true})
	for range 3 {
		post(srv)
	}
	all := srv.Arrivals(0)
	if all.Total != 3 || len(all.UnixNano) != 3 || all.UnixNano[0] > all.UnixNano[2] {
		t.Errorf("arrivals %+v, want 3 in order", all)
	}
	if a := srv.Arrivals(2); a.From != 2 || len(a.UnixNano) != 1 || a.UnixNano[0] != all.UnixNano[2] {
		t.Errorf("arrivals from 2: %+v", a)
	}
	if a := srv.Arrivals(9); a.From != 3 || len(a.UnixNano) != 0 {
		t.Errorf("arrivals from beyond the end: %+v", a)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/arrivals?from=1", nil))
	var got mock.Arrivals
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Total != 3 || len(got.UnixNano) != 2 {
		t.Errorf("GET /arrivals?from=1: %s (%v)", rec.Body, err)
	}
}

// TestParallelAndStructured checks the matrix's shapes of the mock: turns
// of several parallel calls, results of a given size, and the answer as a
// JSON string when the request asks for structured output, done by the
// baseline and by the loop (with an output schema).
func TestParallelAndStructured(t *testing.T) {
	srv := mock.New(&mock.Options{ToolCalls: 2, Parallel: 4, TextChunks: 15})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	base := ts.URL + "/v1"
	want := strings.Join(mock.FinalText(15), "")

	rc := &raw.Client{BaseURL: base, Model: "bench-model", ResultBytes: 3000}
	answer, err := rc.Run(t.Context())
	if err != nil || answer != want {
		t.Fatalf("raw: answer %q, %v", answer, err)
	}
	var sizes []int
	read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		out := task.Result(in.Path, 3000)
		sizes = append(sizes, len(out))
		return out, nil
	})
	agent := loop.NewAgent(&openai.Client{BaseURL: base, Model: "bench-model"}, loop.MustToolset(read),
		&loop.Options{OutputSchema: &loop.OutputSchema{Schema: json.RawMessage(`{"type":"string"}`)}})
	res, err := agent.Run(t.Context(), []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)})
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal([]byte(res.Answer), &s); err != nil || s != want {
		t.Fatalf("structured answer %q (%v), want the JSON string of %q", res.Answer, err, want)
	}
	if len(sizes) != 8 || sizes[0] != 3000 {
		t.Errorf("the tool ran %d times with results of %v bytes, want 8 of 3000", len(sizes), sizes)
	}
	st := srv.Stats()
	if st.Requests != 6 || st.ToolResults != 4 || st.Rejected != 0 || st.CallsPerTurn != 4 {
		t.Errorf("stats %+v, want 6 requests, 4 answered tool turns, none refused", st)
	}
}
