// Package responsestest serves a scripted OpenAI Responses API endpoint on
// loopback, speaking the streaming wire format as OpenAI does: named
// server-sent events, each with its type and sequence number in the data,
// from response.created to response.completed (or response.incomplete),
// with one output item per reasoning, message and function call, their
// deltas split over several events, and the complete items again in the
// final response.
//
//	srv := responsestest.NewServer(
//		responsestest.Reply{ToolCalls: []llm.ToolCall{responsestest.ToolCall("call_1", "lookup", `{"id":"42"}`)}},
//		responsestest.Reply{Text: "Project 42 is hrns."},
//	)
//	defer srv.Close()
//	client := &responses.Client{BaseURL: srv.URL(), Model: "test-model"}
//
// The server records every request, so a test can check what a client sent.
package responsestest

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
	// Reasoning is streamed as the summary of a reasoning item, first,
	// when it or Encrypted is set; Encrypted is the item's
	// encrypted_content.
	Reasoning, Encrypted string
	// Text is streamed as a message item's output_text, after any
	// reasoning; Refusal as a refusal part of the same message.
	Text, Refusal string
	// ToolCalls are streamed as function_call items, after the message,
	// their arguments as given (even if they are not valid JSON, as a
	// model cut short may write them). The call's ID is the call_id; the
	// item id is derived from it.
	ToolCalls []llm.ToolCall
	// Usage is reported in response.completed; nil sends a small made-up
	// usage.
	Usage *llm.Usage
	// Incomplete, when set, ends the stream with response.incomplete and
	// this reason (such as "max_output_tokens").
	Incomplete string
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
// the script gets HTTP 500 with a server_error saying so.
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
	mux.HandleFunc("POST /v1/responses", s.respond)
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

func (s *Server) respond(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, ErrorBody("server_error", "", "responsestest: no more scripted replies"))
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
	w.Header().Set("X-Request-Id", "req_test")
	if reply.Raw != "" {
		io.WriteString(w, reply.Raw)
		return
	}
	var model struct {
		Model string `json:"model"`
	}
	json.Unmarshal(body, &model)
	rc := http.NewResponseController(w)
	for ev := range bytes.SplitAfterSeq(Encode(reply, model.Model), []byte("\n\n")) {
		if _, err := w.Write(ev); err != nil {
			return
		}
		rc.Flush()
	}
}

// encoder writes the events of one response.
type encoder struct {
	b   bytes.Buffer
	seq int
}

// event writes one event: its name, then its data, which begins with the
// type and the sequence number, as OpenAI's do.
func (e *encoder) event(typ, fields string) {
	fmt.Fprintf(&e.b, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d", typ, typ, e.seq)
	if fields != "" {
		e.b.WriteByte(',')
		e.b.WriteString(fields)
	}
	e.b.WriteString("}\n\n")
	e.seq++
}

// Encode renders a reply as the SSE body the Responses API would stream
// for it.
func Encode(r Reply, model string) []byte {
	const id = "resp_test"
	var e encoder
	head := func(status, output, usage, incomplete string) string {
		return fmt.Sprintf(`"response":{"id":%q,"object":"response","created_at":1700000000,"status":%q,"error":null,"incomplete_details":%s,"model":%s,"output":[%s],"parallel_tool_calls":true,"store":false,"tool_choice":"auto","usage":%s}`,
			id, status, incomplete, quote(model), output, usage)
	}
	e.event("response.created", head("in_progress", "", "null", "null"))
	e.event("response.in_progress", head("in_progress", "", "null", "null"))

	var items []string // the complete items, for the final response
	index := 0
	if r.Reasoning != "" || r.Encrypted != "" {
		itemID := fmt.Sprintf("rs_test_%d", index)
		e.event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%q,"type":"reasoning","summary":[]}`, index, itemID))
		summary := "[]"
		if r.Reasoning != "" {
			loc := fmt.Sprintf(`"item_id":%q,"output_index":%d,"summary_index":0`, itemID, index)
			e.event("response.reasoning_summary_part.added", loc+`,"part":{"type":"summary_text","text":""}`)
			for _, d := range split(r.Reasoning) {
				e.event("response.reasoning_summary_text.delta", loc+`,"delta":`+quote(d)+`,"obfuscation":"x"`)
			}
			e.event("response.reasoning_summary_text.done", loc+`,"text":`+quote(r.Reasoning))
			e.event("response.reasoning_summary_part.done", loc+`,"part":{"type":"summary_text","text":`+quote(r.Reasoning)+`}`)
			summary = `[{"type":"summary_text","text":` + quote(r.Reasoning) + `}]`
		}
		enc := "null"
		if r.Encrypted != "" {
			enc = quote(r.Encrypted)
		}
		item := fmt.Sprintf(`{"id":%q,"type":"reasoning","encrypted_content":%s,"summary":%s}`, itemID, enc, summary)
		e.event("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, index, item))
		items = append(items, item)
		index++
	}
	if r.Text != "" || r.Refusal != "" {
		itemID := fmt.Sprintf("msg_test_%d", index)
		e.event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%q,"type":"message","status":"in_progress","content":[],"role":"assistant"}`, index, itemID))
		var parts []string
		part := 0
		if r.Text != "" {
			loc := fmt.Sprintf(`"item_id":%q,"output_index":%d,"content_index":%d`, itemID, index, part)
			e.event("response.content_part.added", loc+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`)
			for _, d := range split(r.Text) {
				e.event("response.output_text.delta", loc+`,"delta":`+quote(d)+`,"logprobs":[],"obfuscation":"x"`)
			}
			e.event("response.output_text.done", loc+`,"text":`+quote(r.Text)+`,"logprobs":[]`)
			p := `{"type":"output_text","annotations":[],"logprobs":[],"text":` + quote(r.Text) + `}`
			e.event("response.content_part.done", loc+`,"part":`+p)
			parts = append(parts, p)
			part++
		}
		if r.Refusal != "" {
			loc := fmt.Sprintf(`"item_id":%q,"output_index":%d,"content_index":%d`, itemID, index, part)
			e.event("response.content_part.added", loc+`,"part":{"type":"refusal","refusal":""}`)
			for _, d := range split(r.Refusal) {
				e.event("response.refusal.delta", loc+`,"delta":`+quote(d))
			}
			e.event("response.refusal.done", loc+`,"refusal":`+quote(r.Refusal))
			p := `{"type":"refusal","refusal":` + quote(r.Refusal) + `}`
			e.event("response.content_part.done", loc+`,"part":`+p)
			parts = append(parts, p)
		}
		status := "completed"
		if r.Incomplete != "" {
			status = "incomplete"
		}
		item := fmt.Sprintf(`{"id":%q,"type":"message","status":%q,"content":[%s],"role":"assistant"}`, itemID, status, join(parts))
		e.event("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, index, item))
		items = append(items, item)
		index++
	}
	for _, c := range r.ToolCalls {
		itemID := "fc_" + c.ID
		e.event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"id":%q,"type":"function_call","status":"in_progress","arguments":"","call_id":%q,"name":%q}`, index, itemID, c.ID, c.Name))
		loc := fmt.Sprintf(`"item_id":%q,"output_index":%d`, itemID, index)
		for _, d := range split(string(c.Arguments)) {
			e.event("response.function_call_arguments.delta", loc+`,"delta":`+quote(d)+`,"obfuscation":"x"`)
		}
		e.event("response.function_call_arguments.done", loc+`,"arguments":`+quote(string(c.Arguments)))
		item := fmt.Sprintf(`{"id":%q,"type":"function_call","status":"completed","arguments":%s,"call_id":%q,"name":%q}`, itemID, quote(string(c.Arguments)), c.ID, c.Name)
		e.event("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, index, item))
		items = append(items, item)
		index++
	}

	u := llm.Usage{InputTokens: 20, OutputTokens: int64(len(r.Text)/4 + 5*len(r.ToolCalls) + 1)}
	if r.Usage != nil {
		u = *r.Usage
	}
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		u.InputTokens, u.CacheReadTokens, u.OutputTokens, u.ReasoningTokens, u.InputTokens+u.OutputTokens)
	if r.Incomplete != "" {
		e.event("response.incomplete", head("incomplete", join(items), usage, `{"reason":`+quote(r.Incomplete)+`}`))
	} else {
		e.event("response.completed", head("completed", join(items), usage, "null"))
	}
	return e.b.Bytes()
}

func join(parts []string) string {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
	}
	return b.String()
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// split cuts s into deltas of about four words, as a model streams tokens,
// never inside a UTF-8 sequence.
func split(s string) []string {
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
			for n > 0 && s[n]&0xC0 == 0x80 {
				n--
			}
			if n == 0 {
				n = 24 // not UTF-8 at all: cut anywhere
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// ToolCall is a shorthand for an llm.ToolCall with JSON arguments.
func ToolCall(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}
}

// ErrorBody returns an OpenAI-style error body.
func ErrorBody(typ, code, message string) string {
	var c any
	if code != "" {
		c = code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	return string(b)
}
