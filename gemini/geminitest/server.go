// Package geminitest serves a scripted Gemini API endpoint on loopback,
// speaking the streaming wire format of streamGenerateContent?alt=sse as
// Google does: server-sent events without names, each the data of one
// GenerateContentResponse (a candidate's new parts, the usage so far, the
// model version and the response ID), separated by CRLF blank lines;
// thought summaries, then text split over several events, then the
// function calls of the turn together in one event, the finish reason on
// the last event, which carries the final usage.
//
//	srv := geminitest.NewServer(
//		geminitest.Reply{ToolCalls: []llm.ToolCall{geminitest.ToolCall("", "lookup", `{"id":"42"}`)}, Signature: "c2ln"},
//		geminitest.Reply{Text: "Project 42 is hrns."},
//	)
//	defer srv.Close()
//	client := &gemini.Client{BaseURL: srv.URL(), Model: "gemini-test"}
//
// The server records every request, so a test can check what a client sent.
package geminitest

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
	// Thoughts is streamed as thought summary parts ("thought": true),
	// first.
	Thoughts string
	// Text is streamed as text parts, after any thoughts.
	Text string
	// ToolCalls are sent as functionCall parts, all in one event after the
	// text, as Gemini sends parallel calls. A call's ID is sent as its id
	// when not empty (newer models give one; older ones do not); its
	// Arguments must be a JSON object or empty; its Signature is sent as
	// the part's thoughtSignature.
	ToolCalls []llm.ToolCall
	// Signature is the thoughtSignature of the response: on the first
	// function call part when there are calls (unless that call has its
	// own), otherwise on the last text part, as Gemini 3 signs them.
	Signature string
	// Finish is the finishReason of the last event; empty means "STOP".
	Finish string
	// Block, when set, answers with promptFeedback.blockReason and no
	// candidates, as for a blocked prompt.
	Block string
	// Usage is reported as usageMetadata; nil sends a small made-up
	// usage.
	Usage *llm.Usage
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
	// Model is the model named in the path, such as "gemini-test".
	Model  string
	Header http.Header
	Body   []byte
}

// Server is a scripted endpoint. Replies are used in order; a request beyond
// the script gets HTTP 500 with an INTERNAL status saying so.
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
	mux.HandleFunc("POST /v1beta/models/{method}", s.respond)
	mux.HandleFunc("GET /v1beta/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		io.WriteString(w, `{"models":[{"name":"models/gemini-test","version":"001","displayName":"Gemini Test","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","countTokens"]},{"name":"models/embedding-test","supportedGenerationMethods":["embedContent"]}]}`)
	})
	s.srv = httptest.NewServer(mux)
	return s
}

// URL returns the base URL to give a client (the API root, without the
// version).
func (s *Server) URL() string { return s.srv.URL }

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
	model, ok := strings.CutSuffix(r.PathValue("method"), ":streamGenerateContent")
	if !ok || r.URL.Query().Get("alt") != "sse" {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "geminitest: only POST /v1beta/models/{model}:streamGenerateContent?alt=sse is served")
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Model: model, Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "INTERNAL", "geminitest: no more scripted replies")
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
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		}
		w.WriteHeader(reply.Status)
		io.WriteString(w, reply.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req_test")
	if reply.Raw != "" {
		io.WriteString(w, reply.Raw)
		return
	}
	rc := http.NewResponseController(w)
	for ev := range bytes.SplitAfterSeq(Encode(reply, model), []byte("\r\n\r\n")) {
		if _, err := w.Write(ev); err != nil {
			return
		}
		rc.Flush()
	}
}

func writeError(w http.ResponseWriter, code int, status, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	io.WriteString(w, ErrorBody(code, status, message))
}

// Encode renders a reply as the SSE body the Gemini API would stream for
// it.
func Encode(r Reply, model string) []byte {
	const id = "resp-test"
	u := llm.Usage{InputTokens: 20, OutputTokens: int64(len(r.Text)/4 + 5*len(r.ToolCalls) + 1)}
	if r.Usage != nil {
		u = *r.Usage
	}
	var b bytes.Buffer
	event := func(candidate string, final bool) {
		usage := fmt.Sprintf(`{"promptTokenCount":%d,"totalTokenCount":%d}`, u.InputTokens, u.InputTokens)
		if final {
			usage = finalUsage(u)
		}
		fmt.Fprintf(&b, `data: {%s"usageMetadata":%s,"modelVersion":%s,"responseId":%q}`+"\r\n\r\n", candidate, usage, quote(model), id)
	}
	if r.Block != "" {
		event(`"promptFeedback":{"blockReason":`+quote(r.Block)+`,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH"}]},`, true)
		return b.Bytes()
	}

	// The parts, one slice per event.
	var events [][]string
	for _, d := range split(r.Thoughts) {
		events = append(events, []string{`{"text":` + quote(d) + `,"thought":true}`})
	}
	texts := split(r.Text)
	for i, d := range texts {
		p := `{"text":` + quote(d)
		if i == len(texts)-1 && r.Signature != "" && len(r.ToolCalls) == 0 {
			p += `,"thoughtSignature":` + quote(r.Signature)
		}
		events = append(events, []string{p + "}"})
	}
	if len(r.ToolCalls) > 0 {
		var calls []string
		for i, c := range r.ToolCalls {
			fc := `{"name":` + quote(c.Name)
			if len(c.Arguments) > 0 {
				fc += `,"args":` + string(c.Arguments)
			}
			if c.ID != "" {
				fc += `,"id":` + quote(c.ID)
			}
			p := `{"functionCall":` + fc + "}"
			sig := c.Signature
			if sig == "" && i == 0 {
				sig = r.Signature
			}
			if sig != "" {
				p += `,"thoughtSignature":` + quote(sig)
			}
			calls = append(calls, p+"}")
		}
		events = append(events, calls)
	}
	if len(events) == 0 {
		events = append(events, []string{`{"text":""}`})
	}
	finish := r.Finish
	if finish == "" {
		finish = "STOP"
	}
	for i, parts := range events {
		c := `"candidates":[{"content":{"parts":[` + strings.Join(parts, ",") + `],"role":"model"}`
		last := i == len(events)-1
		if last {
			c += `,"finishReason":` + quote(finish)
		}
		c += `,"index":0}],`
		event(c, last)
	}
	return b.Bytes()
}

// finalUsage renders the usageMetadata of the last event.
func finalUsage(u llm.Usage) string {
	candidates := u.OutputTokens - u.ReasoningTokens
	s := fmt.Sprintf(`{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d`, u.InputTokens, candidates, u.InputTokens+u.OutputTokens)
	if u.CacheReadTokens > 0 {
		s += fmt.Sprintf(`,"cachedContentTokenCount":%d`, u.CacheReadTokens)
	}
	s += fmt.Sprintf(`,"promptTokensDetails":[{"modality":"TEXT","tokenCount":%d}]`, u.InputTokens)
	if u.ReasoningTokens > 0 {
		s += fmt.Sprintf(`,"thoughtsTokenCount":%d`, u.ReasoningTokens)
	}
	return s + "}"
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

// ToolCall is a shorthand for an llm.ToolCall with JSON arguments. An
// empty id sends the call without one, as models before Gemini 3 do.
func ToolCall(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}
}

// ErrorBody returns a Google API error body (a google.rpc.Status).
func ErrorBody(code int, status, message string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
	return string(b)
}
