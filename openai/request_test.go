package openai

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
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// pngBytes starts like a PNG file, so its type can be sniffed.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func toolResultPart(callID, name, text string, isError bool) llm.Part {
	return llm.Part{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{
		CallID: callID, Name: name, Content: []llm.Part{llm.TextPart(text)}, IsError: isError,
	}}
}

// fullRequest exercises every message kind, tools and options.
func fullRequest() *llm.Request {
	temp := 0.2
	parallel := false
	return &llm.Request{
		Model: "gpt-4.1",
		Messages: []llm.Message{
			SystemMessage("You are terse."),
			UserMessage("What's the weather in Paris? <b>&</b>"),
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.TextPart("Describe these."),
				llm.ImagePart("image/png", pngBytes),
				{Kind: llm.PartImage, Media: &llm.Media{MIMEType: "image/jpeg", URL: "https://example.com/cat.jpg"}},
				llm.ImagePart("", pngBytes), // type sniffed
				llm.DocumentPart("application/pdf", "report.pdf", []byte("%PDF-1.7\n")),
				llm.TextPart(""), // dropped from the array
				llm.TextPart("Thanks."),
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("two "), llm.TextPart("parts")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				reasoningPart("The user wants weather and time."), // not sent
				llm.TextPart("Let me check."),
				callPart("call_1", "get_weather", `{"city":"Paris"}`),
				callPart("call_2", "get_time", ""), // sent as "{}"
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				toolResultPart("call_1", "get_weather", "18°C, cloudy", false),
				toolResultPart("call_2", "get_time", "error: unknown time zone", true),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{callPart("call_3", "get_weather", `{"city":"Rome"}`)}}, // content null
			ToolMessage("call_3", "21°C"),
			SystemMessage("Answer in French."),
			AssistantMessage("Paris : 18°C. Rome : 21°C."),
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
		StopSequences:     []string{"\n\nUser:"},
		ParallelToolCalls: &parallel,
	}
}

// TestRequestGolden checks the body sent for fullRequest against
// testdata/full.request.json. Run with -update to rewrite it.
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readTestdata(t, "text.sse"))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1/", HTTPClient: srv.Client()}
	if _, err := llm.Collect(c.Stream(context.Background(), fullRequest())); err != nil {
		t.Fatal(err)
	}
	body := <-bodies
	var got bytes.Buffer
	if err := json.Indent(&got, body, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, body)
	}
	got.WriteByte('\n')
	golden := filepath.Join("testdata", "full.request.json")
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
		t.Errorf("request body differs from %s (-want +got):\n%s", golden, diff)
	}
}

func TestRenderRequest(t *testing.T) {
	t.Parallel()
	yes := true
	zero := 0.0
	tool := llm.ToolSpec{Name: "f", InputSchema: json.RawMessage(`{"type":"object"}`)}
	const toolJSON = `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	const stream = `"stream":true,"stream_options":{"include_usage":true}`
	tests := []struct {
		name   string
		client Client
		req    *llm.Request
		want   string
	}{
		{
			name:   "minimal, model from the client",
			client: Client{Model: "m"},
			req:    userRequest("hi"),
			want:   `{"model":"m","messages":[{"role":"user","content":"hi"}],` + stream + `}`,
		},
		{
			name:   "request model wins",
			client: Client{Model: "m"},
			req:    &llm.Request{Model: "r", Messages: []llm.Message{UserMessage("hi")}},
			want:   `{"model":"r","messages":[{"role":"user","content":"hi"}],` + stream + `}`,
		},
		{
			name:   "zero temperature is sent",
			client: Client{Model: "m"},
			req:    &llm.Request{Temperature: &zero},
			want:   `{"model":"m","messages":[],"temperature":0,` + stream + `}`,
		},
		{
			// Compatible servers (Ollama, llama.cpp) parse the arguments
			// and refuse a request whose arguments are not an object.
			name:   "malformed arguments are sent back as an empty object",
			client: Client{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c1", Name: "f", Arguments: llm.Arguments(`{"path": "notes.txt"`)}},
				{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c2", Name: "f", Arguments: llm.Arguments(` {"a": 1} `)}},
			}}}},
			want: `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},` +
				`{"id":"c2","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}],` + stream + `}`,
		},
		{
			name:   "max_completion_tokens",
			client: Client{Model: "m", UseMaxCompletionTokens: true},
			req:    &llm.Request{MaxTokens: 50},
			want:   `{"model":"m","messages":[],"max_completion_tokens":50,` + stream + `}`,
		},
		{
			name:   "max_tokens",
			client: Client{Model: "m"},
			req:    &llm.Request{MaxTokens: 50},
			want:   `{"model":"m","messages":[],"max_tokens":50,` + stream + `}`,
		},
		{
			name:   "tool choice and parallel calls need tools",
			client: Client{Model: "m"},
			req:    &llm.Request{ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}, ParallelToolCalls: &yes},
			want:   `{"model":"m","messages":[],` + stream + `}`,
		},
		{
			name:   "tool choice auto",
			client: Client{Model: "m"},
			req:    &llm.Request{Tools: []llm.ToolSpec{tool}, ParallelToolCalls: &yes},
			want:   `{"model":"m","messages":[],"tools":` + toolJSON + `,"parallel_tool_calls":true,` + stream + `}`,
		},
		{
			name:   "tool choice none",
			client: Client{Model: "m"},
			req:    &llm.Request{Tools: []llm.ToolSpec{tool}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}},
			want:   `{"model":"m","messages":[],"tools":` + toolJSON + `,"tool_choice":"none",` + stream + `}`,
		},
		{
			name:   "tool choice required",
			client: Client{Model: "m"},
			req:    &llm.Request{Tools: []llm.ToolSpec{tool}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}},
			want:   `{"model":"m","messages":[],"tools":` + toolJSON + `,"tool_choice":"required",` + stream + `}`,
		},
		{
			name:   "tool choice named",
			client: Client{Model: "m"},
			req:    &llm.Request{Tools: []llm.ToolSpec{tool}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "f"}},
			want:   `{"model":"m","messages":[],"tools":` + toolJSON + `,"tool_choice":{"type":"function","function":{"name":"f"}},` + stream + `}`,
		},
		{
			name:   "assistant with only reasoning keeps an empty content",
			client: Client{Model: "m"},
			req:    &llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{reasoningPart("hmm")}}}},
			want:   `{"model":"m","messages":[{"role":"assistant","content":""}],` + stream + `}`,
		},
		{
			name:   "user message without parts",
			client: Client{Model: "m"},
			req:    &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser}}},
			want:   `{"model":"m","messages":[{"role":"user","content":""}],` + stream + `}`,
		},
		{
			name:   "tool result without content",
			client: Client{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c"}},
			}}}},
			want: `{"model":"m","messages":[{"role":"tool","content":"","tool_call_id":"c"}],` + stream + `}`,
		},
		{
			// Tool messages hold text only: images and documents follow
			// the tool messages of the turn in one user message.
			name:   "media in tool results",
			client: Client{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{
				{Role: llm.RoleTool, Parts: []llm.Part{
					{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c1", Name: "upload_media", Content: []llm.Part{
						llm.TextPart("a.png: PNG image"), llm.ImagePart("image/png", []byte("PNG")),
					}}},
					{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c2", Content: []llm.Part{llm.TextPart("plain")}}},
					{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c3", Content: []llm.Part{
						llm.DocumentPart("application/pdf", "r.pdf", []byte("%PDF")),
					}}},
				}},
				llm.UserMessage("next"),
			}},
			want: `{"model":"m","messages":[` +
				`{"role":"tool","content":"a.png: PNG image\n[1 attachment(s) of this result follow in a user message: tool messages cannot hold them]","tool_call_id":"c1"},` +
				`{"role":"tool","content":"plain","tool_call_id":"c2"},` +
				`{"role":"tool","content":"[1 attachment(s) of this result follow in a user message: tool messages cannot hold them]","tool_call_id":"c3"},` +
				`{"role":"user","content":[` +
				`{"type":"text","text":"Attached by tool call c1 (upload_media):"},{"type":"image_url","image_url":{"url":"data:image/png;base64,UE5H"}},` +
				`{"type":"text","text":"Attached by tool call c3:"},{"type":"file","file":{"filename":"r.pdf","file_data":"data:application/pdf;base64,JVBERg=="}}]},` +
				`{"role":"user","content":"next"}],` + stream + `}`,
		},
		{
			name:   "document without name or type",
			client: Client{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
				{Kind: llm.PartDocument, Media: &llm.Media{Data: []byte("%PDF")}},
			}}}},
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBERg=="}}]}],` + stream + `}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.client.marshalRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tt.want)); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if diff := cmp.Diff(want.String(), string(got)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderRequestErrors(t *testing.T) {
	t.Parallel()
	user := func(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: parts} }
	toolMsg := func(content ...llm.Part) llm.Message {
		return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{
			Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c", Content: content},
		}}}
	}
	msgs := func(m ...llm.Message) *llm.Request { return &llm.Request{Model: "m", Messages: m} }
	tests := []struct {
		name        string
		client      Client
		req         *llm.Request
		unsupported bool     // the error wraps llm.ErrUnsupported
		contains    []string // substrings of the message
	}{
		{name: "nil request", req: nil, contains: []string{"openai: nil request"}},
		{name: "no model", req: userRequest("hi"), contains: []string{"no model"}},
		{
			name: "reasoning in tool result", req: msgs(UserMessage("hi"), toolMsg(llm.TextPart("see"), reasoningPart("hmm"))),
			unsupported: true, contains: []string{"openai: message 1 (tool)", "reasoning parts in tool results", "Chat Completions"},
		},
		{
			name: "document by URL in tool result", req: msgs(toolMsg(llm.Part{Kind: llm.PartDocument, Media: &llm.Media{URL: "https://x/a.pdf"}})),
			unsupported: true, contains: []string{"openai: message 0 (tool)", "documents by URL"},
		},
		{
			name: "document by URL", req: msgs(user(llm.Part{Kind: llm.PartDocument, Media: &llm.Media{URL: "https://x/a.pdf"}})),
			unsupported: true, contains: []string{"documents by URL"},
		},
		{
			name: "image in system message", req: msgs(llm.Message{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", pngBytes)}}),
			unsupported: true, contains: []string{"image parts in system messages"},
		},
		{
			name: "tool call in user message", req: msgs(user(llm.TextPart("a"), callPart("c", "f", "{}"))),
			unsupported: true, contains: []string{"tool_call parts in user messages"},
		},
		{
			name: "image in assistant message", req: msgs(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ImagePart("image/png", pngBytes)}}),
			unsupported: true, contains: []string{"image parts in assistant messages"},
		},
		{name: "image without media", req: msgs(user(llm.Part{Kind: llm.PartImage})), contains: []string{"image part without media"}},
		{name: "image without bytes or URL", req: msgs(user(llm.Part{Kind: llm.PartImage, Media: &llm.Media{}})), contains: []string{"neither data nor URL"}},
		{name: "document without data", req: msgs(user(llm.Part{Kind: llm.PartDocument, Media: &llm.Media{}})), contains: []string{"document part without data"}},
		{name: "text in tool message", req: msgs(llm.Message{Role: llm.RoleTool, Parts: []llm.Part{llm.TextPart("x")}}), contains: []string{"tool results only"}},
		{name: "tool result without result", req: msgs(llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult}}}), contains: []string{"without a result"}},
		{name: "tool call without call", req: msgs(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall}}}), contains: []string{"without a call"}},
		{name: "unknown role", req: msgs(llm.Message{Role: "critic"}), contains: []string{`unknown role "critic"`}},
		{name: "tool without name", req: &llm.Request{Model: "m", Tools: []llm.ToolSpec{{}}}, contains: []string{"tool 0 has no name"}},
		{name: "invalid schema", req: &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage("{")}}}, contains: []string{`tool "f"`, "not valid JSON"}},
		{
			name:     "named tool choice without name",
			req:      &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool}},
			contains: []string{"without a tool name"},
		},
		{
			name:     "unknown tool choice",
			req:      &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: "any"}},
			contains: []string{`unknown tool choice mode "any"`},
		},
		{name: "negative max tokens", req: &llm.Request{Model: "m", MaxTokens: -1}, contains: []string{"negative MaxTokens"}},
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
	}))
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client
			c.BaseURL, c.HTTPClient = srv.URL, srv.Client()
			_, err := collect(c.Stream(context.Background(), tt.req))
			if err == nil {
				t.Fatal("Stream succeeded, want an error")
			}
			if got := errors.Is(err, llm.ErrUnsupported); got != tt.unsupported {
				t.Errorf("errors.Is(%q, llm.ErrUnsupported) = %v, want %v", err, got, tt.unsupported)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !strings.HasPrefix(err.Error(), "openai: ") {
				t.Errorf("error %q does not name the provider", err)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests were sent for invalid requests, want none", n)
	}
}

func TestStreamDoesNotKeepRequest(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readTestdata(t, "text.sse"))
	}))
	defer srv.Close()
	req := userRequest("first")
	seq := testClient(srv).Stream(context.Background(), req)
	req.Messages[0] = UserMessage("changed")
	req.Model = "changed"
	for range 2 { // each range sends the request again
		if _, err := llm.Collect(seq); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bodies {
		if !strings.Contains(b, `"content":"first"`) || !strings.Contains(b, `"model":"test-model"`) {
			t.Errorf("body %s was rendered after Stream returned", b)
		}
	}
	if len(bodies) != 2 {
		t.Errorf("%d requests, want 2", len(bodies))
	}
}
