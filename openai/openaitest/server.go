// Package openaitest serves a scripted OpenAI-compatible Chat Completions
// endpoint on loopback, speaking the streaming wire format as OpenAI does:
// a role chunk, content and tool-call argument deltas split over several
// chunks, a finish chunk, a usage chunk with no choices, then [DONE].
//
//	srv := openaitest.NewServer(
//		openaitest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: llm.Arguments(`{"id":"42"}`)}}},
//		openaitest.Reply{Text: "Project 42 is hrns."},
//	)
//	defer srv.Close()
//	client := &openai.Client{BaseURL: srv.URL(), Model: "test-model"}
//
// Tests of other packages, the CLI's end-to-end tests and the benchmarks use
// it as their model.
package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// A Reply is one scripted response.
type Reply struct {
	// Reasoning is streamed as delta.reasoning_content, then Text as
	// delta.content, then ToolCalls.
	Reasoning string
	Text      string
	ToolCalls []llm.ToolCall
	// Usage is sent in the final usage chunk; nil sends a small made-up
	// usage.
	Usage *llm.Usage
	// Finish is the finish_reason; empty means "tool_calls" when there
	// are calls and "stop" otherwise.
	Finish string
	// Status, when non-zero, answers with this HTTP status, Header and
	// Body instead of a stream.
	Status int
	Header http.Header
	Body   string
	// Raw, when set, is sent as the whole SSE body.
	Raw string
	// Func, when set, computes the reply from the request body.
	Func func(body []byte) Reply
}

// A Request is a request the server received.
type Request struct {
	Header http.Header
	Body   []byte
}

// Server is a scripted endpoint. Replies are used in order; a request beyond
// the script gets HTTP 500 with an error saying so.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// NewServer starts a server answering with replies. Close it when done.
func NewServer(replies ...Reply) *Server {
	s := &Server{replies: replies}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"test-model","object":"model","created":1700000000,"owned_by":"hrns"}]}`)
	})
	s.srv = httptest.NewServer(mux)
	return s
}

// URL returns the base URL to give a client, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.replies = append(s.replies, replies...)
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		http.Error(w, `{"error":{"message":"openaitest: no more scripted replies","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	reply := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()
	if reply.Func != nil {
		reply = reply.Func(body)
	}
	if reply.Status != 0 {
		for k, v := range reply.Header {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(reply.Status)
		io.WriteString(w, reply.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	if reply.Raw != "" {
		io.WriteString(w, reply.Raw)
		return
	}
	var model struct {
		Model string `json:"model"`
	}
	json.Unmarshal(body, &model)
	w.Write(Encode(reply, model.Model))
}

// Encode renders a reply as the SSE body OpenAI would stream for it.
func Encode(r Reply, model string) []byte {
	var b bytes.Buffer
	const id = "chatcmpl-test"
	head := fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":1700000000,"model":%q,"system_fingerprint":"fp_test",`, id, model)
	event := func(choices string) {
		b.WriteString("data: ")
		b.WriteString(head)
		b.WriteString(`"choices":[{"index":0,`)
		b.WriteString(choices)
		b.WriteString("}]}\n\n")
	}
	event(`"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null`)
	for _, d := range split(r.Reasoning) {
		event(`"delta":{"reasoning_content":` + quote(d) + `},"logprobs":null,"finish_reason":null`)
	}
	for _, d := range split(r.Text) {
		event(`"delta":{"content":` + quote(d) + `},"logprobs":null,"finish_reason":null`)
	}
	for i, c := range r.ToolCalls {
		event(fmt.Sprintf(`"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"logprobs":null,"finish_reason":null`, i, c.ID, c.Name))
		for _, d := range split(string(c.Arguments)) {
			event(fmt.Sprintf(`"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null`, i, quote(d)))
		}
	}
	finish := r.Finish
	if finish == "" {
		finish = "stop"
		if len(r.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	event(`"delta":{},"logprobs":null,"finish_reason":` + quote(finish))
	u := llm.Usage{InputTokens: 20, OutputTokens: int64(len(r.Text)/4 + 5*len(r.ToolCalls) + 1)}
	if r.Usage != nil {
		u = *r.Usage
	}
	fmt.Fprintf(&b, `data: %s"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`+"\n\n",
		head, u.InputTokens, u.OutputTokens, u.InputTokens+u.OutputTokens, u.CacheReadTokens, u.ReasoningTokens)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// split cuts s into deltas of about four words, as a model streams tokens.
func split(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 0 {
		n := 0
		for words := 0; n < len(s) && words < 4; n++ {
			if s[n] == ' ' {
				words++
			}
		}
		if n < len(s) && n > 24 {
			n = 24
			for n > 1 && !utf8Start(s[n]) { // at least one byte: invalid UTF-8 must not stop the split
				n--
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// ToolCall is a shorthand for an llm.ToolCall with JSON arguments.
func ToolCall(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}
}

// ErrorBody returns an OpenAI-style error body.
func ErrorBody(typ, code, message string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": nilIfEmpty(code)}})
	return string(b)
}

func nilIfEmpty(s string) any {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return s
}
