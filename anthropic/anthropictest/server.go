// Package anthropictest serves a scripted Anthropic Messages endpoint on
// loopback, speaking the streaming wire format as the API does:
// message_start, then one content block per thinking, text and tool call
// (content_block_start, deltas split over several events, content_block_stop),
// a ping, message_delta with the stop reason and usage, then message_stop.
//
//	srv := anthropictest.NewServer(
//		anthropictest.Reply{ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_1", "lookup", `{"id":"42"}`)}},
//		anthropictest.Reply{Text: "Project 42 is hrns."},
//	)
//	defer srv.Close()
//	client := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-test"}
//
// The server records every request, so a test can check what a client sent.
package anthropictest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// A Reply is one scripted response.
type Reply struct {
	// Thinking and Signature are streamed as a thinking block (with
	// thinking_delta and signature_delta events) when either is set.
	Thinking, Signature string
	// RedactedThinking, when set, is sent as a redacted_thinking block
	// before the thinking block.
	RedactedThinking string
	// Text is streamed as a text block, after any thinking.
	Text string
	// ToolCalls are streamed as tool_use blocks, after the text, their
	// arguments as input_json_delta fragments, as given (even if they are
	// not valid JSON, as a model cut short may write them).
	ToolCalls []llm.ToolCall
	// Usage is reported in message_start and message_delta, with
	// InputTokens split into uncached, cache-read and cache-write input
	// as the API counts them. Nil sends a small made-up usage.
	Usage *llm.Usage
	// StopReason is message_delta's stop_reason; empty means "tool_use"
	// when there are calls and "end_turn" otherwise.
	StopReason string
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
// the script gets HTTP 500 with an api_error saying so.
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
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"type":"model","id":"claude-test","display_name":"Claude Test","created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":"claude-test","last_id":"claude-test"}`)
	})
	s.srv = httptest.NewServer(mux)
	return s
}

// URL returns the base URL to give a client, without /v1.
func (s *Server) URL() string { return s.srv.URL }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

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

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body})
	n := len(s.requests)
	if len(s.replies) == 0 {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, ErrorBody("api_error", "anthropictest: no more scripted replies"))
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
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", fmt.Sprintf("req_test_%d", n))
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

// Encode renders a reply as the SSE body the Messages API would stream for
// it.
func Encode(r Reply, model string) []byte {
	var b bytes.Buffer
	event := func(typ, data string) {
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data)
	}
	u := llm.Usage{InputTokens: 20, OutputTokens: int64(len(r.Text)/4 + len(r.Thinking)/4 + 5*len(r.ToolCalls) + 1)}
	if r.Usage != nil {
		u = *r.Usage
	}
	uncached := u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens
	event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_test","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		quote(model), uncached, u.CacheWriteTokens, u.CacheReadTokens))
	index := 0
	start := func(block string) {
		event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, index, block))
	}
	delta := func(d string) {
		event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, index, d))
	}
	stop := func() {
		event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
	}
	if r.RedactedThinking != "" {
		start(`{"type":"redacted_thinking","data":` + quote(r.RedactedThinking) + `}`)
		stop()
	}
	if r.Thinking != "" || r.Signature != "" {
		start(`{"type":"thinking","thinking":"","signature":""}`)
		for _, d := range split(r.Thinking) {
			delta(`{"type":"thinking_delta","thinking":` + quote(d) + `}`)
		}
		delta(`{"type":"signature_delta","signature":` + quote(r.Signature) + `}`)
		stop()
	}
	if r.Text != "" {
		start(`{"type":"text","text":""}`)
		event("ping", `{"type": "ping"}`)
		for _, d := range split(r.Text) {
			delta(`{"type":"text_delta","text":` + quote(d) + `}`)
		}
		stop()
	}
	for _, c := range r.ToolCalls {
		start(fmt.Sprintf(`{"type":"tool_use","id":%s,"name":%s,"input":{}}`, quote(c.ID), quote(c.Name)))
		delta(`{"type":"input_json_delta","partial_json":""}`)
		for _, d := range split(string(c.Arguments)) {
			delta(`{"type":"input_json_delta","partial_json":` + quote(d) + `}`)
		}
		stop()
	}
	reason := r.StopReason
	if reason == "" {
		reason = "end_turn"
		if len(r.ToolCalls) > 0 {
			reason = "tool_use"
		}
	}
	event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, quote(reason), u.OutputTokens))
	event("message_stop", `{"type":"message_stop"}`)
	return b.Bytes()
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// split cuts s into deltas of at most 16 bytes, as a model streams tokens,
// never inside a UTF-8 sequence.
func split(s string) []string {
	var out []string
	for len(s) > 16 {
		n := 16
		for n > 1 && s[n]&0xC0 == 0x80 {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// ToolCall is a shorthand for an llm.ToolCall with JSON arguments.
func ToolCall(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}
}

// ErrorBody returns an Anthropic error body:
// {"type":"error","error":{"type":typ,"message":message}}.
func ErrorBody(typ, message string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	return string(b)
}
