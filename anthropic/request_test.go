package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// pngBytes starts like a PNG file, so its type can be sniffed.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func toolResultPart(callID, name string, isError bool, content ...llm.Part) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{
		CallID: callID, Name: name, Content: content, IsError: isError,
	}}
}

// fullRequest exercises every message kind, tools and options.
func fullRequest() *llm.Request {
	temp := 0.2
	parallel := false
	return &llm.Request{
		Model: "claude-sonnet-4-5",
		Messages: []llm.Message{
			SystemMessage("You are terse."),
			UserMessage("What's the weather in Paris? <b>&</b>"),
			{Role: llm.RoleUser, Parts: []llm.Part{ // merged into the turn above
				llm.TextPart("Describe these."),
				llm.ImagePart("image/png", pngBytes),
				{Kind: llm.PartImage, Media: &llm.Media{MIMEType: "image/jpeg", URL: "https://example.com/cat.jpg"}},
				llm.ImagePart("", pngBytes), // type sniffed
				llm.DocumentPart("application/pdf", "report.pdf", []byte("%PDF-1.7\n")),
				{Kind: llm.PartDocument, Media: &llm.Media{URL: "https://example.com/spec.pdf"}},
				llm.DocumentPart("text/markdown", "notes.md", []byte("# Notes\nline 2")),
				llm.TextPart(""), // dropped
				llm.TextPart("Thanks."),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				thinkingPart("The user wants weather and time.", "EqQBCgIYAhIM"),
				redactedPart("EmwKAhgBEgy3va3p"),
				{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "unsigned, from another provider"}}, // not sent
				llm.TextPart("Let me check."),
				callPart("toolu_1", "get_weather", `{"city": "Paris"}`),
				callPart("toolu_2", "get_time", ""),             // sent as {}
				callPart("toolu_3", "get_weather", `{"city": `), // malformed: sent as {}
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				toolResultPart("toolu_1", "get_weather", false, llm.TextPart("18°C, cloudy"), llm.ImagePart("image/png", pngBytes)),
				toolResultPart("toolu_2", "get_time", true, llm.TextPart("error: unknown time zone")),
				toolResultPart("toolu_3", "get_weather", true, llm.TextPart(`invalid arguments: unexpected end of JSON input`)),
			}},
			UserMessage("Also, is it raining?"), // merged after the tool results
			SystemMessage("Answer in French."),  // joined into system
			AssistantMessage("Paris : 18°C, pas de pluie."),
			UserMessage("Merci !"),
		},
		Tools: []llm.ToolSpec{
			{
				Name: "get_weather", Description: "Current weather for a city.",
				InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
			},
			{Name: "get_time"}, // no schema
		},
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"},
		MaxTokens:         1024,
		Temperature:       &temp,
		StopSequences:     []string{"\n\nHuman:"},
		ParallelToolCalls: &parallel,
	}
}

// TestRequestGolden checks the body sent for fullRequest, with the default
// caching, against testdata/full.request.json. Run with -update to rewrite
// it.
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	type received struct {
		header http.Header
		body   []byte
	}
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readTestdata(t, "text.sse"))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/", APIKey: "sk-ant-test", HTTPClient: srv.Client()}
	if _, err := llm.Collect(c.Stream(context.Background(), fullRequest())); err != nil {
		t.Fatal(err)
	}
	r := <-got
	for k, want := range map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"} {
		if v := r.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	checkGolden(t, "full.request.json", r.body)
}

// checkGolden compares JSON with testdata/name, indented; with -update it
// rewrites the file first.
func checkGolden(t *testing.T, name string, raw []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, raw, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	got.WriteByte('\n')
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("JSON differs from %s (-want +got):\n%s", golden, diff)
	}
}

func TestRenderRequest(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	zero := 0.0
	noCache := &CachePolicy{}
	tool := llm.ToolSpec{Name: "f", InputSchema: json.RawMessage(`{"type":"object"}`)}
	const toolJSON = `[{"name":"f","input_schema":{"type":"object"}}]`
	const hi = `"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	withTool := func(tc llm.ToolChoice, parallel *bool) *llm.Request {
		return &llm.Request{Messages: []llm.Message{UserMessage("hi")}, Tools: []llm.ToolSpec{tool}, ToolChoice: tc, ParallelToolCalls: parallel}
	}
	tests := []struct {
		name   string
		client Client
		req    *llm.Request
		want   string
	}{
		{
			name:   "minimal, model and max tokens defaulted, conversation cached",
			client: Client{Model: "m"},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],"stream":true}`,
		},
		{
			name:   "request model and max tokens win",
			client: Client{Model: "m", MaxTokens: 100, Cache: noCache},
			req:    &llm.Request{Model: "r", MaxTokens: 50, Messages: []llm.Message{UserMessage("hi")}},
			want:   `{"model":"r","max_tokens":50,` + hi + `,"stream":true}`,
		},
		{
			name:   "client max tokens",
			client: Client{Model: "m", MaxTokens: 100, Cache: noCache},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":100,` + hi + `,"stream":true}`,
		},
		{
			name:   "zero temperature and stop sequences are sent",
			client: Client{Model: "m", Cache: noCache},
			req:    &llm.Request{Messages: []llm.Message{UserMessage("hi")}, Temperature: &zero, StopSequences: []string{"END"}},
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"temperature":0,"stop_sequences":["END"],"stream":true}`,
		},
		{
			name:   "no messages is an empty array",
			client: Client{Model: "m", Cache: noCache},
			req:    &llm.Request{},
			want:   `{"model":"m","max_tokens":8192,"messages":[],"stream":true}`,
		},
		{
			name:   "tool choice and parallelism need tools",
			client: Client{Model: "m", Cache: noCache},
			req:    &llm.Request{Messages: []llm.Message{UserMessage("hi")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}, ParallelToolCalls: &no},
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"stream":true}`,
		},
		{
			name:   "tool choice auto is the default",
			client: Client{Model: "m", Cache: noCache},
			req:    withTool(llm.ToolChoice{}, &yes),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"tools":` + toolJSON + `,"stream":true}`,
		},
		{
			name:   "auto without parallel calls",
			client: Client{Model: "m", Cache: noCache},
			req:    withTool(llm.ToolChoice{}, &no),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"tools":` + toolJSON + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"stream":true}`,
		},
		{
			name:   "required is any",
			client: Client{Model: "m", Cache: noCache},
			req:    withTool(llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"tools":` + toolJSON + `,"tool_choice":{"type":"any"},"stream":true}`,
		},
		{
			name:   "named tool without parallel calls",
			client: Client{Model: "m", Cache: noCache},
			req:    withTool(llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "f"}, &no),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"tools":` + toolJSON + `,"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},"stream":true}`,
		},
		{
			name:   "none takes no parallel flag",
			client: Client{Model: "m", Cache: noCache},
			req:    withTool(llm.ToolChoice{Mode: llm.ToolChoiceNone}, &no),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"tools":` + toolJSON + `,"tool_choice":{"type":"none"},"stream":true}`,
		},
		{
			name:   "tool without schema",
			client: Client{Model: "m", Cache: noCache},
			req:    &llm.Request{Tools: []llm.ToolSpec{{Name: "g", Description: "G."}}},
			want:   `{"model":"m","max_tokens":8192,"messages":[],"tools":[{"name":"g","description":"G.","input_schema":{"type":"object","properties":{}}}],"stream":true}`,
		},
		{
			name:   "adaptive thinking and effort",
			client: Client{Model: "m", Cache: noCache, Thinking: &Thinking{Type: ThinkingAdaptive}, Effort: "medium"},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},"stream":true}`,
		},
		{
			name:   "thinking budget under the default cap",
			client: Client{Model: "m", Cache: noCache, Thinking: &Thinking{Type: ThinkingEnabled, BudgetTokens: 2048, Display: "omitted"}},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"thinking":{"type":"enabled","budget_tokens":2048,"display":"omitted"},"stream":true}`,
		},
		{
			name:   "a large thinking budget raises the default cap",
			client: Client{Model: "m", Cache: noCache, Thinking: &Thinking{Type: ThinkingEnabled, BudgetTokens: 10000}},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":18192,` + hi + `,"thinking":{"type":"enabled","budget_tokens":10000},"stream":true}`,
		},
		{
			name:   "a set cap is kept whatever the budget",
			client: Client{Model: "m", Cache: noCache, Thinking: &Thinking{Type: ThinkingEnabled, BudgetTokens: 10000}},
			req:    &llm.Request{MaxTokens: 4000, Messages: []llm.Message{UserMessage("hi")}},
			want:   `{"model":"m","max_tokens":4000,` + hi + `,"thinking":{"type":"enabled","budget_tokens":10000},"stream":true}`,
		},
		{
			name:   "disabled thinking",
			client: Client{Model: "m", Cache: noCache, Thinking: &Thinking{Type: ThinkingDisabled}},
			req:    userRequest("hi"),
			want:   `{"model":"m","max_tokens":8192,` + hi + `,"thinking":{"type":"disabled"},"stream":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.client.marshalRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderCaching(t *testing.T) {
	t.Parallel()
	req := &llm.Request{
		Messages: []llm.Message{
			SystemMessage("one"), SystemMessage("two"),
			UserMessage("hi"),
			assistant(llm.TextPart("calling"), callPart("t1", "f", `{}`)),
			ToolMessage("t1", "result"),
		},
		Tools: []llm.ToolSpec{{Name: "f"}, {Name: "g"}},
	}
	const (
		sys1     = `{"type":"text","text":"one"}`
		sys2     = `{"type":"text","text":"two"}`
		sys2c    = `{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}`
		toolF    = `{"name":"f","input_schema":{"type":"object","properties":{}}}`
		toolG    = `{"name":"g","input_schema":{"type":"object","properties":{}}}`
		res      = `{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result"}]}`
		hi       = `[{"type":"text","text":"hi"}]`
		hiCached = `[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]`
	)
	tests := []struct {
		name   string
		policy *CachePolicy
		system string
		tools  string
		first  string // the first message's content: where the previous request ended
		last   string // the last message's content
	}{
		{"default", nil, `[` + sys1 + `,` + sys2c + `]`,
			`[` + toolF + `,{"name":"g","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}]`,
			hiCached,
			`[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result"}],"cache_control":{"type":"ephemeral"}}]`},
		{"off", &CachePolicy{}, `[` + sys1 + `,` + sys2 + `]`, `[` + toolF + `,` + toolG + `]`, hi, `[` + res + `]`},
		{"system only, one hour", &CachePolicy{System: true, TTL: "1h"},
			`[` + sys1 + `,{"type":"text","text":"two","cache_control":{"type":"ephemeral","ttl":"1h"}}]`,
			`[` + toolF + `,` + toolG + `]`, hi, `[` + res + `]`},
		{"tools only", &CachePolicy{Tools: true}, `[` + sys1 + `,` + sys2 + `]`,
			`[` + toolF + `,{"name":"g","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}]`,
			hi, `[` + res + `]`},
		{"conversation only", &CachePolicy{Conversation: true}, `[` + sys1 + `,` + sys2 + `]`, `[` + toolF + `,` + toolG + `]`, hiCached,
			`[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result"}],"cache_control":{"type":"ephemeral"}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Client{Model: "m", Cache: tt.policy}
			w := renderWire(t, c, req)
			if diff := cmp.Diff(tt.system, string(w["system"])); diff != "" {
				t.Errorf("system mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tools, string(w["tools"])); diff != "" {
				t.Errorf("tools mismatch (-want +got):\n%s", diff)
			}
			var msgs []struct{ Content json.RawMessage }
			json.Unmarshal(w["messages"], &msgs)
			if diff := cmp.Diff(tt.first, string(msgs[0].Content)); diff != "" {
				t.Errorf("first message mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.last, string(msgs[len(msgs)-1].Content)); diff != "" {
				t.Errorf("last message mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderCachingSkipsThinking(t *testing.T) {
	t.Parallel()
	// An assistant prefill that ends in thinking: the breakpoint goes on
	// the block before it, as thinking blocks cannot carry one.
	c := &Client{Model: "m", Cache: &CachePolicy{Conversation: true}}
	req := &llm.Request{Messages: []llm.Message{
		UserMessage("hi"),
		assistant(thinkingPart("a", "s1"), llm.TextPart("so"), redactedPart("r")),
	}}
	w := renderWire(t, c, req)
	want := `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"a","signature":"s1"},{"type":"text","text":"so","cache_control":{"type":"ephemeral"}},{"type":"redacted_thinking","data":"r"}]}]`
	if diff := cmp.Diff(want, string(w["messages"])); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	// A turn of thinking alone gets no breakpoint; the user turn before
	// it still does.
	req.Messages[1] = assistant(thinkingPart("", "s1"))
	w = renderWire(t, c, req)
	want = `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"s1"}]}]`
	if diff := cmp.Diff(want, string(w["messages"])); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

// renderWire renders req with c and returns the top-level fields of the
// body.
func renderWire(t *testing.T, c *Client, req *llm.Request) map[string]json.RawMessage {
	t.Helper()
	body, err := c.marshalRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	var w map[string]json.RawMessage
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestRenderConversation(t *testing.T) {
	t.Parallel()
	const (
		u = `{"role":"user","content":[`
		a = `{"role":"assistant","content":[`
	)
	text := func(s string) string { return `{"type":"text","text":"` + s + `"}` }
	result := func(id, s string) string {
		return `{"type":"tool_result","tool_use_id":"` + id + `","content":[` + text(s) + `]}`
	}
	tests := []struct {
		name string
		msgs []llm.Message
		want string
	}{
		{
			name: "consecutive user messages merge",
			msgs: []llm.Message{UserMessage("a"), UserMessage("b")},
			want: `[` + u + text("a") + `,` + text("b") + `]}]`,
		},
		{
			name: "consecutive assistant messages merge",
			msgs: []llm.Message{UserMessage("q"), AssistantMessage("a"), AssistantMessage("b")},
			want: `[` + u + text("q") + `]},` + a + text("a") + `,` + text("b") + `]}]`,
		},
		{
			name: "tool results and a user message share a turn, results first",
			msgs: []llm.Message{UserMessage("q"), assistant(callPart("t1", "f", `{}`)), UserMessage("hurry"), ToolMessage("t1", "r")},
			want: `[` + u + text("q") + `]},` + a + `{"type":"tool_use","id":"t1","name":"f","input":{}}]},` + u + result("t1", "r") + `,` + text("hurry") + `]}]`,
		},
		{
			name: "tool results in a user message",
			msgs: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("see"), toolResultPart("t1", "f", false, llm.TextPart("r"))}}},
			want: `[` + u + result("t1", "r") + `,` + text("see") + `]}]`,
		},
		{
			name: "thinking moves to the front of its turn",
			msgs: []llm.Message{UserMessage("q"), assistant(llm.TextPart("a"), thinkingPart("t", "s"))},
			want: `[` + u + text("q") + `]},` + a + `{"type":"thinking","thinking":"t","signature":"s"},` + text("a") + `]}]`,
		},
		{
			name: "interleaved thinking keeps its order",
			msgs: []llm.Message{UserMessage("q"), assistant(thinkingPart("t1", "s1"), callPart("c1", "f", `{}`), thinkingPart("t2", "s2"), callPart("c2", "f", `{}`))},
			want: `[` + u + text("q") + `]},` + a + `{"type":"thinking","thinking":"t1","signature":"s1"},{"type":"tool_use","id":"c1","name":"f","input":{}},` +
				`{"type":"thinking","thinking":"t2","signature":"s2"},{"type":"tool_use","id":"c2","name":"f","input":{}}]}]`,
		},
		{
			name: "an assistant message of unsigned reasoning is dropped, its neighbours merge",
			msgs: []llm.Message{UserMessage("a"), assistant(llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "hmm"}}), UserMessage("b")},
			want: `[` + u + text("a") + `,` + text("b") + `]}]`,
		},
		{
			name: "empty text and empty messages are dropped",
			msgs: []llm.Message{UserMessage(""), {Role: llm.RoleUser}, UserMessage("x"), AssistantMessage("")},
			want: `[` + u + text("x") + `]}]`,
		},
		{
			name: "empty tool result has no content",
			msgs: []llm.Message{{Role: llm.RoleTool, Parts: []llm.Part{toolResultPart("t1", "f", true)}}},
			want: `[` + u + `{"type":"tool_result","tool_use_id":"t1","is_error":true}]}]`,
		},
		{
			name: "text is not HTML-escaped",
			msgs: []llm.Message{UserMessage("<a href=\"x\">&</a>")},
			want: `[` + u + `{"type":"text","text":"<a href=\"x\">&</a>"}]}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Client{Model: "m", Cache: &CachePolicy{}}
			w := renderWire(t, c, &llm.Request{Messages: tt.msgs})
			if diff := cmp.Diff(tt.want, string(w["messages"])); diff != "" {
				t.Errorf("messages mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObjectInput(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{" {\"a\": [1, {}]}\n", `{"a": [1, {}]}`},
		{``, `{}`},
		{`   `, `{}`},
		{`{"a":`, `{}`},
		{`{"a":1}}`, `{}`},
		{`[1]`, `{}`},
		{`"x"`, `{}`},
		{`null`, `{}`},
		{`{}`, `{}`},
	}
	for _, tt := range tests {
		if got := string(llm.Arguments(tt.in).Object()); got != tt.want {
			t.Errorf("Object(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestRenderMedia(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		part llm.Part
		want string
	}{
		{"png", llm.ImagePart("image/png", []byte("x")), `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"eA=="}}`},
		{"jpg alias, parameters and case", llm.ImagePart("Image/JPG; q=1", []byte("x")), `{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"eA=="}}`},
		{"gif", llm.ImagePart("image/gif", []byte("x")), `{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"eA=="}}`},
		{"webp", llm.ImagePart("image/webp", []byte("x")), `{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"eA=="}}`},
		{"sniffed png", llm.ImagePart("", pngBytes), `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUg=="}}`},
		{"image URL", llm.Part{Kind: llm.PartImage, Media: &llm.Media{URL: "https://x/a.png"}}, `{"type":"image","source":{"type":"url","url":"https://x/a.png"}}`},
		{"pdf with title", llm.DocumentPart("application/pdf", "a.pdf", []byte("%PDF")), `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="},"title":"a.pdf"}`},
		{"sniffed pdf", llm.DocumentPart("", "", []byte("%PDF-1.4")), `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}}`},
		{"pdf URL", llm.Part{Kind: llm.PartDocument, Media: &llm.Media{MIMEType: "application/pdf", URL: "https://x/a.pdf"}}, `{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}`},
		{"plain text", llm.DocumentPart("text/plain", "", []byte("héllo")), `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"héllo"}}`},
		{"csv as plain text", llm.DocumentPart("text/csv", "t.csv", []byte("a,b")), `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"a,b"},"title":"t.csv"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Client{Model: "m", Cache: &CachePolicy{}}
			w := renderWire(t, c, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{tt.part}}}})
			want := `[{"role":"user","content":[` + tt.want + `]}]`
			if diff := cmp.Diff(want, string(w["messages"])); diff != "" {
				t.Errorf("messages mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	user := func(parts ...llm.Part) *llm.Request {
		return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: parts}}}
	}
	msg := func(role llm.Role, parts ...llm.Part) *llm.Request {
		return &llm.Request{Messages: []llm.Message{{Role: role, Parts: parts}}}
	}
	inToolResult := func(p llm.Part) *llm.Request {
		return msg(llm.RoleTool, toolResultPart("t1", "f", false, p))
	}
	tests := []struct {
		name        string
		client      *Client // nil means one with a model
		req         *llm.Request
		unsupported bool   // the error wraps llm.ErrUnsupported
		want        string // in the error
	}{
		{name: "nil request", req: nil, want: "nil request"},
		{name: "no model", client: &Client{}, req: &llm.Request{}, want: "no model"},
		{name: "negative max tokens", req: &llm.Request{MaxTokens: -1}, want: "negative MaxTokens -1"},
		{name: "negative client max tokens", client: &Client{Model: "m", MaxTokens: -5}, req: &llm.Request{}, want: "negative Client.MaxTokens -5"},
		{name: "thinking without a type", client: &Client{Model: "m", Thinking: &Thinking{BudgetTokens: 2000}}, req: &llm.Request{}, want: "Client.Thinking has no Type"},
		{name: "tool without a name", req: &llm.Request{Tools: []llm.ToolSpec{{}}}, want: "tool 0 has no name"},
		{name: "tool schema not JSON", req: &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage("{")}}}, want: `tool "f": input schema is not valid JSON`},
		{name: "named tool choice without a name", req: &llm.Request{Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool}}, want: "without a tool name"},
		{name: "unknown tool choice", req: &llm.Request{Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: "sometimes"}}, want: `unknown tool choice mode "sometimes"`},
		{name: "unknown role", req: msg("developer", llm.TextPart("x")), want: `message 0 (developer): unknown role "developer"`},
		{name: "text in a tool message", req: msg(llm.RoleTool, llm.TextPart("x")), want: "tool messages hold tool results only"},
		{name: "nil tool result", req: msg(llm.RoleTool, llm.Part{Kind: llm.PartToolResult}), want: "tool result part without a result"},
		{name: "nil tool call", req: msg(llm.RoleAssistant, llm.Part{Kind: llm.PartToolCall}), want: "tool call part without a call"},
		{name: "nil reasoning", req: msg(llm.RoleAssistant, llm.Part{Kind: llm.PartReasoning}), want: "reasoning part without reasoning"},
		{name: "image without media", req: user(llm.Part{Kind: llm.PartImage}), want: "image part without media"},
		{name: "image without data or URL", req: user(llm.Part{Kind: llm.PartImage, Media: &llm.Media{MIMEType: "image/png"}}), want: "neither data nor URL"},
		{name: "document without media", req: user(llm.Part{Kind: llm.PartDocument}), want: "document part without media"},
		{name: "document without data or URL", req: user(llm.Part{Kind: llm.PartDocument, Media: &llm.Media{MIMEType: "application/pdf"}}), want: "neither data nor URL"},
		{name: "text document not UTF-8", req: user(llm.DocumentPart("text/plain", "", []byte{0xff})), want: `"text/plain" document is not valid UTF-8`},

		{name: "bmp image", req: user(llm.ImagePart("image/bmp", []byte("BM"))), unsupported: true, want: `"image/bmp" images are not supported`},
		{name: "tiff image by URL", req: user(llm.Part{Kind: llm.PartImage, Media: &llm.Media{MIMEType: "image/tiff", URL: "https://x/a.tif"}}), unsupported: true, want: `"image/tiff" images`},
		{name: "audio as an image", req: user(llm.ImagePart("audio/wav", []byte("RIFF"))), unsupported: true, want: `"audio/wav" images`},
		{name: "audio document", req: user(llm.DocumentPart("audio/mpeg", "a.mp3", []byte("ID3"))), unsupported: true, want: `"audio/mpeg" documents`},
		{name: "word document", req: user(llm.DocumentPart("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "a.docx", []byte("PK"))), unsupported: true, want: "wordprocessingml.document\" documents"},
		{name: "text document by URL", req: user(llm.Part{Kind: llm.PartDocument, Media: &llm.Media{MIMEType: "text/plain", URL: "https://x/a.txt"}}), unsupported: true, want: `"text/plain" documents by URL`},
		{name: "unknown part kind", req: user(llm.Part{Kind: "audio"}), unsupported: true, want: "audio parts in user messages"},
		{name: "image in a system message", req: msg(llm.RoleSystem, llm.ImagePart("image/png", pngBytes)), unsupported: true, want: "image parts in system messages"},
		{name: "image in an assistant message", req: msg(llm.RoleAssistant, llm.ImagePart("image/png", pngBytes)), unsupported: true, want: "image parts in assistant messages"},
		{name: "tool call in a user message", req: user(callPart("t", "f", "{}")), unsupported: true, want: "tool_call parts in user messages"},
		{name: "reasoning in a tool result", req: inToolResult(thinkingPart("x", "s")), unsupported: true, want: "reasoning parts in tool results"},
		{name: "audio in a tool result", req: inToolResult(llm.DocumentPart("audio/wav", "", []byte("RIFF"))), unsupported: true, want: `"audio/wav" documents`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.client
			if c == nil {
				c = &Client{Model: "m"}
			}
			_, err := c.marshalRequest(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "anthropic: ") {
				t.Errorf("error %q does not name the provider", err)
			}
			if got := errors.Is(err, llm.ErrUnsupported); got != tt.unsupported {
				t.Errorf("errors.Is(err, llm.ErrUnsupported) = %v, want %v", got, tt.unsupported)
			}
		})
	}
}

func TestStreamRenderErrorSendsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.ImagePart("image/heic", []byte("x"))}}}}
	_, err := collect(testClient(srv).Stream(context.Background(), req))
	if !errors.Is(err, llm.ErrUnsupported) {
		t.Fatalf("err = %v, want llm.ErrUnsupported", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

func TestStreamRendersRequestOnce(t *testing.T) {
	t.Parallel()
	// The request is rendered when Stream is called: changing it before
	// ranging over the stream does not change what is sent.
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readTestdata(t, "text.sse"))
	}))
	defer srv.Close()
	req := userRequest("before")
	seq := testClient(srv).Stream(context.Background(), req)
	req.Messages[0] = UserMessage("after")
	if _, err := llm.Collect(seq); err != nil {
		t.Fatal(err)
	}
	if b := <-bodies; !bytes.Contains(b, []byte(`"before"`)) {
		t.Errorf("body %s does not hold the request as it was when Stream was called", b)
	}
}
