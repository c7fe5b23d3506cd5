// Package mock serves a deterministic OpenAI-compatible Chat Completions
// endpoint for the benchmarks: the model of [task], answering at once.
//
//	srv := mock.New(&mock.Options{ToolCalls: 5})
//	ts := httptest.NewServer(srv)
//	// point a client at ts.URL + "/v1", then read srv.Stats()
//
// # The conversation
//
// Each request is answered from the conversation it carries: while it holds
// fewer tool results than Options.ToolCalls, the answer is one call of
// [task.ToolName] whose arguments are split over Options.ArgChunks deltas;
// then the answer is a final text streamed over Options.TextChunks content
// chunks. Every answer is a stream in OpenAI's wire format: a role chunk,
// the deltas, a finish chunk, a usage chunk without choices, and [DONE].
// The server keeps no state per conversation, so any number of clients may
// use it at once.
//
// # Speed
//
// The bodies are rendered once, at [New]. By default a whole body is written
// at once with no added latency, so that the server is never what a client
// waits for and a client reads the same bytes in the same pieces however fast
// it is; Options.FlushEachEvent flushes after every event instead, as a
// server streaming a real model does.
//
// # Counting
//
// The server counts requests, the events it sent and the tool results it
// received (see [Stats]), so a benchmark can check that a client did the
// whole job. GET /stats serves the counts as JSON.
//
// # Arrivals
//
// With Options.RecordArrivals, the server also notes the wall-clock time
// (Unix nanoseconds, CLOCK_REALTIME, which every process of the machine
// shares) at which each chat completion request reached its handler, in
// the order they came; GET /arrivals?from=N serves them from the N-th (see
// [Arrivals]). A benchmark on the same machine compares them with times it
// took itself, such as when it posted what caused the request.
package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

// Options configure a [Server]. A zero field means its default.
type Options struct {
	// ToolCalls is the number of tool calls of a run, each in its own
	// turn, before the final answer; 0 means 5. A run has ToolCalls+1
	// turns.
	ToolCalls int
	// ArgChunks is the number of deltas a call's arguments are split
	// over; 0 means 8.
	ArgChunks int
	// TextChunks is the number of content chunks of the final answer; 0
	// means 100.
	TextChunks int
	// Parallel is the number of calls of each tool turn, streamed in one
	// answer as a model making parallel calls does; 0 means 1. A run then
	// receives ToolCalls*Parallel results.
	Parallel int
	// FlushEachEvent flushes the response after every event, instead of
	// writing the whole body at once.
	FlushEachEvent bool
	// RecordArrivals notes the arrival time of every chat completion
	// request (see [Server.Arrivals]).
	RecordArrivals bool
}

// Arrivals is the body of GET /arrivals: the arrival times of the chat
// completion requests from the From-th (counting from 0), as Unix
// nanoseconds. Total counts every request recorded so far.
type Arrivals struct {
	From     int     `json:"from"`
	Total    int     `json:"total"`
	UnixNano []int64 `json:"unix_nano"`
}

// Stats are the counts of a [Server] since it started.
type Stats struct {
	// Requests is the number of chat completion requests answered with a
	// stream.
	Requests int64 `json:"requests"`
	// ToolTurns and FinalTurns split Requests by the kind of answer.
	ToolTurns  int64 `json:"tool_turns"`
	FinalTurns int64 `json:"final_turns"`
	// Events is the number of chat.completion.chunk events sent, [DONE]
	// not counted.
	Events int64 `json:"events"`
	// ToolResults is the number of tool turns answered: requests that
	// follow a tool turn and whose tool results all carry [task.Marker]
	// (one per turn, however many calls it made).
	ToolResults int64 `json:"tool_results"`
	// Rejected is the number of requests refused: not streaming, no
	// tools, or a conversation the mock did not script.
	Rejected int64 `json:"rejected"`
	// Connections is the number of connections accepted, when the
	// http.Server reports them to [Server.ConnState]. A client that
	// keeps its connection alive opens one.
	Connections int64 `json:"connections"`

	// ToolCallsPerRun, EventsPerRun and AnswerBytes describe one run as
	// configured: a client that did R runs made R*(ToolCallsPerRun+1)
	// requests and received R*EventsPerRun events and answers of
	// AnswerBytes each.
	ToolCallsPerRun int `json:"tool_calls_per_run"`
	// CallsPerTurn is the number of calls of each tool turn (see
	// Options.Parallel).
	CallsPerTurn int `json:"calls_per_turn"`
	EventsPerRun int `json:"events_per_run"`
	AnswerBytes  int `json:"answer_bytes"`
}

// A Server is the mock endpoint. It is an [http.Handler] serving
// POST /v1/chat/completions, GET /v1/models and GET /stats.
type Server struct {
	// fixed at creation
	opts  Options
	tool  []Stream // tool[k] answers a conversation holding k*Parallel results
	final Stream
	// finalJSON is the final answer as a JSON string, for requests that
	// ask for structured output (a response_format): the same text,
	// quoted, so that a client decoding it gets the same answer.
	finalJSON Stream
	answer    int // bytes of the final text
	mux       *http.ServeMux

	requests, toolTurns, finalTurns, events, toolResults, rejected, conns atomic.Int64

	mu       sync.Mutex
	arrivals []int64 // with opts.RecordArrivals
}

// New returns a server; a nil opts means the defaults.
func New(opts *Options) *Server {
	s := &Server{}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.ToolCalls <= 0 {
		o.ToolCalls = 5
	}
	if o.ArgChunks <= 0 {
		o.ArgChunks = 8
	}
	if o.TextChunks <= 0 {
		o.TextChunks = 100
	}
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	s.tool = make([]Stream, 0, o.ToolCalls)
	for k := 1; k <= o.ToolCalls; k++ {
		calls := make([]Call, o.Parallel)
		for j := range calls {
			n := (k-1)*o.Parallel + j + 1
			calls[j] = Call{ID: fmt.Sprintf("call_%d", n), Name: task.ToolName, Args: fmt.Sprintf(`{"path":%q}`, task.NotePath(n))}
		}
		s.tool = append(s.tool, ToolCallsStream(calls, o.ArgChunks))
	}
	text := FinalText(o.TextChunks)
	s.answer = len(strings.Join(text, ""))
	s.final = TextStream(text)
	s.finalJSON = TextStream(JSONText(text))
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"bench-model","object":"model","created":1754000000,"owned_by":"bench"}]}`)
	})
	s.mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Stats())
	})
	s.mux.HandleFunc("GET /arrivals", func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("from"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Arrivals(from))
	})
	return s
}

// Arrivals returns the arrival times recorded from the from-th request on;
// none without Options.RecordArrivals.
func (s *Server) Arrivals(from int) Arrivals {
	s.mu.Lock()
	defer s.mu.Unlock()
	from = min(max(from, 0), len(s.arrivals))
	return Arrivals{From: from, Total: len(s.arrivals), UnixNano: append([]int64{}, s.arrivals[from:]...)}
}

// ConnState counts new connections; set it as the http.Server's ConnState.
func (s *Server) ConnState(_ net.Conn, state http.ConnState) {
	if state == http.StateNew {
		s.conns.Add(1)
	}
}

// ServeHTTP serves the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	perRun := s.final.Chunks() // finalJSON has as many
	for _, b := range s.tool {
		perRun += b.Chunks()
	}
	return Stats{
		Requests:        s.requests.Load(),
		ToolTurns:       s.toolTurns.Load(),
		FinalTurns:      s.finalTurns.Load(),
		Events:          s.events.Load(),
		ToolResults:     s.toolResults.Load(),
		Rejected:        s.rejected.Load(),
		Connections:     s.conns.Load(),
		ToolCallsPerRun: s.opts.ToolCalls,
		CallsPerTurn:    s.opts.Parallel,
		EventsPerRun:    perRun,
		AnswerBytes:     s.answer,
	}
}

// chatRequest holds what the mock reads of a request.
type chatRequest struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role      string            `json:"role"`
		Content   json.RawMessage   `json:"content"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	} `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	ResponseFormat json.RawMessage   `json:"response_format"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if s.opts.RecordArrivals {
		t := time.Now().UnixNano()
		s.mu.Lock()
		s.arrivals = append(s.arrivals, t)
		s.mu.Unlock()
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.reject(w, "request body is not JSON: "+err.Error())
		return
	}
	if !req.Stream {
		s.reject(w, "the mock only streams: send \"stream\": true")
		return
	}
	if len(req.Tools) == 0 {
		s.reject(w, "no tools in the request")
		return
	}
	calls, results, marked := 0, 0, 0
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			calls += len(m.ToolCalls)
		case "tool":
			results++
			if bytes.Contains(m.Content, []byte(task.Marker)) {
				marked++
			}
		}
	}
	p := s.opts.Parallel
	if results != calls || results%p != 0 || results/p > s.opts.ToolCalls {
		s.reject(w, fmt.Sprintf("conversation holds %d tool calls and %d results; the mock scripts %d turns of %d calls", calls, results, s.opts.ToolCalls, p))
		return
	}
	b := &s.final
	if len(req.ResponseFormat) > 0 && string(req.ResponseFormat) != "null" {
		b = &s.finalJSON
	}
	if results/p < len(s.tool) {
		b = &s.tool[results/p]
		s.toolTurns.Add(1)
	} else {
		s.finalTurns.Add(1)
	}
	if results > 0 && marked == results {
		s.toolResults.Add(1) // the result of the previous turn's call
	}
	s.requests.Add(1)
	s.events.Add(int64(b.Chunks()))

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if !s.opts.FlushEachEvent {
		w.Write(b.Whole)
		if f != nil {
			f.Flush()
		}
		return
	}
	for _, e := range b.Events {
		if _, err := w.Write(e); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
	}
}

func (s *Server) reject(w http.ResponseWriter, msg string) {
	s.rejected.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "mock: " + msg, "type": "invalid_request_error"}})
	w.Write(b)
}
