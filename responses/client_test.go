package responses_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// An agent run through the scripted server: the reasoning of the turn that
// called a tool goes back, encrypted, with the call and its output, on the
// next turn.
func TestLoopSendsReasoningBack(t *testing.T) {
	srv := responsestest.NewServer(
		responsestest.Reply{
			Reasoning: "I should echo.", Encrypted: "gAAAA-secret",
			ToolCalls: []llm.ToolCall{responsestest.ToolCall("call_1", "echo", `{"text":"hi"}`)},
			Usage:     &llm.Usage{InputTokens: 100, OutputTokens: 30, CacheReadTokens: 64, ReasoningTokens: 20},
		},
		responsestest.Reply{Text: "It echoed hi."},
	)
	defer srv.Close()
	echo := loop.NewSimpleTool("Echo the text.", []loop.ToolArgument{{Name: "text", Type: "string"}},
		func(args map[string]any) string { return "echo: " + args["text"].(string) })
	agent := loop.New(&responses.Client{BaseURL: srv.URL(), APIKey: "sk-test", Model: "gpt-5"}, map[string]loop.Tool{"echo": echo})
	res, err := agent.Run(t.Context(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "It echoed hi." {
		t.Errorf("answer = %q", res.Answer)
	}
	if u := res.Usage; u.CacheReadTokens != 64 || u.ReasoningTokens != 20 {
		t.Errorf("usage = %+v", u)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	var second struct {
		Input []map[string]any `json:"input"`
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range second.Input {
		types = append(types, it["type"].(string))
	}
	if diff := cmp.Diff([]string{"message", "message", "reasoning", "function_call", "function_call_output"}, types); diff != "" {
		t.Errorf("input items (-want +got):\n%s", diff)
	}
	rs, call, out := second.Input[2], second.Input[3], second.Input[4]
	if rs["encrypted_content"] != "gAAAA-secret" || rs["id"] != nil {
		t.Errorf("reasoning item = %v", rs)
	}
	if call["call_id"] != "call_1" || call["arguments"] != `{"text":"hi"}` || call["id"] != nil {
		t.Errorf("function_call = %v", call)
	}
	if out["call_id"] != "call_1" || out["output"] != "echo: hi" {
		t.Errorf("function_call_output = %v", out)
	}
	if second.Tools[0]["strict"] != true {
		t.Errorf("the echo tool is not strict: %v", second.Tools[0])
	}
}

func TestListModels(t *testing.T) {
	srv := responsestest.NewServer()
	defer srv.Close()
	models, err := (&responses.Client{BaseURL: srv.URL()}).ListModels(t.Context())
	if err != nil || len(models) != 1 || models[0].ID != "test-model" {
		t.Errorf("models %+v, err %v", models, err)
	}
}

func TestHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	c := responses.New(&responses.Options{
		BaseURL: srv.URL + "/", APIKey: "k", Model: "m", Organization: "org-1",
		Headers: http.Header{"X-Extra": {"1"}, "Authorization": {"Bearer gateway"}},
	})
	llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserMessage("x")}}))
	if got.Get("Authorization") != "Bearer gateway" || got.Get("OpenAI-Organization") != "org-1" ||
		got.Get("X-Extra") != "1" || got.Get("Accept") != "text/event-stream" || !strings.HasPrefix(got.Get("User-Agent"), "hrns-openai-responses/") {
		t.Errorf("headers %v", got)
	}
}

func TestHTMLPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>login</html>"))
	}))
	defer srv.Close()
	_, err := llm.Collect((&responses.Client{BaseURL: srv.URL, Model: "m"}).Stream(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserMessage("x")}}))
	if err == nil || !strings.Contains(err.Error(), "HTML page") || llm.IsRetryable(err) {
		t.Errorf("err = %v", err)
	}
}

func TestCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	stream := (&responses.Client{BaseURL: srv.URL, Model: "m"}).Stream(ctx, &llm.Request{Messages: []llm.Message{llm.UserMessage("x")}})
	cancel()
	_, err := llm.Collect(stream)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}
