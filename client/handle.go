package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// A Handle is a session of the API. Its methods are safe for concurrent
// use.
type Handle struct {
	c  *Client
	id string
}

// Session returns the handle of the session with the id.
func (c *Client) Session(id string) *Handle { return &Handle{c: c, id: id} }

// ID returns the session's id.
func (h *Handle) ID() string { return h.id }

// Tool wires a simple [loop.Tool] under name, for [Client.RunSession]. It
// panics if t declares invalid arguments, a programming error.
func Tool(name string, t loop.Tool) *loop.ToolDef {
	def, err := loop.FromTool(name, t)
	if err != nil {
		panic("client.Tool: " + err.Error())
	}
	return def
}

// StartSession creates a session as req says, with tools declared as its
// client-side tools, and returns its handle. The tools run only while
// someone waits with them: see [Handle.WaitForCompletion].
func (c *Client) StartSession(ctx context.Context, req *SessionRequest, tools ...*loop.ToolDef) (*Handle, error) {
	s, err := c.CreateSession(ctx, declare(req, tools), nil)
	if err != nil {
		return nil, err
	}
	return c.Session(s.ID), nil
}

// RunSession creates a session as req says, runs the agent's calls of
// tools in this process until the session ends, and returns how it
// ended. See the package documentation for how tools run.
func (c *Client) RunSession(ctx context.Context, req *SessionRequest, tools ...*loop.ToolDef) (*Result, error) {
	h, err := c.StartSession(ctx, req, tools...)
	if err != nil {
		return nil, err
	}
	return h.WaitForCompletion(ctx, tools...)
}

// DecodeAnswer decodes a structured answer (a session whose agent has
// answer_format) into v. It fails when the session gave no answer.
func (r *Result) DecodeAnswer(v any) error {
	if len(r.AnswerJSON) == 0 {
		return fmt.Errorf("session %s gave no answer (status %s)", r.SessionID, r.Status)
	}
	return json.Unmarshal(r.AnswerJSON, v)
}

// RunTyped is [Client.RunSession] for a structured answer: it sets the
// agent's answer_format to the JSON Schema of Out (inferred as
// [loop.OutputSchemaFor] does; through the agent.answer_format override
// for a named agent), runs the session, and returns its answer decoded.
// A session that does not complete returns its Result and an error
// naming its status.
func RunTyped[Out any](ctx context.Context, c *Client, req *SessionRequest, tools ...*loop.ToolDef) (Out, *Result, error) {
	var out Out
	schema, err := loop.OutputSchemaFor[Out]()
	if err != nil {
		return out, nil, err
	}
	r := *req
	if r.Agent.Inline != nil {
		agent := *r.Agent.Inline
		agent.AnswerFormat = schema.Schema
		r.Agent.Inline = &agent
	} else {
		r.Overrides = maps.Clone(r.Overrides)
		if r.Overrides == nil {
			r.Overrides = map[string]json.RawMessage{}
		}
		r.Overrides["agent.answer_format"] = schema.Schema
	}
	res, err := c.RunSession(ctx, &r, tools...)
	if err != nil {
		return out, res, err
	}
	if res.Status != api.StatusCompleted {
		return out, res, fmt.Errorf("session %s ended %s: %s", res.SessionID, res.Status, res.Error)
	}
	return out, res, res.DecodeAnswer(&out)
}

// declare returns req with tools declared on its agent: on an inline
// agent, or through the agent.tools override for a named one. Tools the
// request already declares are left as they are.
func declare(req *SessionRequest, tools []*loop.ToolDef) *SessionRequest {
	if len(tools) == 0 {
		return req
	}
	out := *req
	var defs []ToolDefinition
	have := map[string]bool{}
	if out.Agent.Inline != nil {
		for _, t := range out.Agent.Inline.Tools {
			have[t.Name] = true
		}
	}
	for _, t := range tools {
		if t == nil || have[t.Name] {
			continue
		}
		have[t.Name] = true
		defs = append(defs, ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	if out.Agent.Inline != nil {
		agent := *out.Agent.Inline
		agent.Tools = append(slices.Clone(agent.Tools), defs...)
		out.Agent.Inline = &agent
		return &out
	}
	out.Overrides = maps.Clone(out.Overrides)
	if out.Overrides == nil {
		out.Overrides = map[string]json.RawMessage{}
	}
	var existing []ToolDefinition
	json.Unmarshal(out.Overrides["agent.tools"], &existing)
	b, _ := json.Marshal(append(existing, defs...))
	out.Overrides["agent.tools"] = b
	return &out
}

// Get returns the session.
func (h *Handle) Get(ctx context.Context) (*Session, error) {
	var s Session
	_, _, err := h.c.call(ctx, "GET", "/api/v2/sessions/"+h.id, nil, nil, &s, true)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Status returns the session's live status.
func (h *Handle) Status(ctx context.Context) (*SessionStatus, error) {
	var s SessionStatus
	_, _, err := h.c.call(ctx, "GET", "/api/v2/sessions/"+h.id+"/status", nil, nil, &s, true)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// ChangesOptions are the parameters of [Handle.Changes].
type ChangesOptions struct {
	// FromIndex is the cursor: the number of events already seen.
	FromIndex int64
	// Limit bounds the events returned; 0 means all.
	Limit int
	// Wait is how long the server waits for an event (whole seconds, at
	// most 25).
	Wait time.Duration
	// ExcludeEvents asks for the status fields only.
	ExcludeEvents bool
}

// Changes long-polls the session's events from the cursor. It returns nil
// and no error when nothing came by the deadline (204).
func (h *Handle) Changes(ctx context.Context, opts *ChangesOptions) (*Changes, error) {
	if opts == nil {
		opts = &ChangesOptions{}
	}
	q := url.Values{}
	q.Set("from_index", strconv.FormatInt(opts.FromIndex, 10))
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.ExcludeEvents {
		q.Set("include_events", "false")
	}
	if s := int(opts.Wait.Seconds()); s > 0 {
		q.Set("wait_for_seconds", strconv.Itoa(min(s, 25)))
	}
	var c Changes
	status, _, err := h.c.call(ctx, "GET", "/api/v2/sessions/"+h.id+"/changes?"+q.Encode(), nil, nil, &c, true)
	if err != nil || status == 204 {
		return nil, err
	}
	return &c, nil
}

// poll is the long-poll of the follow loops (WaitForCompletion, Stream).
// The server answers nothing new after the wait asked for; one that
// answers nothing at once, again and again (a broken proxy, a hostile
// server), had the loop ask as fast as the network allowed, a core
// spinning. An answer with no new event that came before half the wait
// is followed by the client's backoff, growing with each such answer in
// a row (*early counts them) up to its 10 s or PollWait, while ctx
// lasts.
func (h *Handle) poll(ctx context.Context, cursor int64, early *int) (*Changes, error) {
	start := time.Now()
	c, err := h.Changes(ctx, &ChangesOptions{FromIndex: cursor, Wait: h.c.opts.PollWait})
	if err != nil || c != nil && len(c.NewEvents) > 0 || time.Since(start) >= h.c.opts.PollWait/2 {
		*early = 0
		return c, err
	}
	*early++
	t := time.NewTimer(min(h.c.backoff(*early), h.c.opts.PollWait))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return c, nil
}

// SendMessage sends the agent a message. It is not retried: a message
// sent twice would reach the agent twice. A paused session resumes, and a
// finished one starts again with the message.
func (h *Handle) SendMessage(ctx context.Context, text string) error {
	_, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/messages", nil, UserMessage{Type: "user_message", Message: text}, nil, false)
	return err
}

// Pause pauses the session.
func (h *Handle) Pause(ctx context.Context) error { return h.post(ctx, "/pause", nil) }

// Resume resumes a paused session.
func (h *Handle) Resume(ctx context.Context) error { return h.post(ctx, "/resume", nil) }

// ForceAnswer asks the agent for its final answer at its next step.
func (h *Handle) ForceAnswer(ctx context.Context) error { return h.post(ctx, "/force_answer", nil) }

// Cancel ends the session as interrupted.
func (h *Handle) Cancel(ctx context.Context) error {
	_, _, err := h.c.call(ctx, "DELETE", "/api/v2/sessions/"+h.id, nil, nil, nil, true)
	return err
}

// PostToolResults posts results of pending calls (as a batch when there
// are several). Posting a result twice is harmless; once the session has
// finished the error matches [ErrConflict].
func (h *Handle) PostToolResults(ctx context.Context, results ...ToolResult) error {
	_, err := h.postToolResults(ctx, results)
	return err
}

// postToolResults posts results and returns the response's headers.
func (h *Handle) postToolResults(ctx context.Context, results []ToolResult) (http.Header, error) {
	var body any = map[string]any{"type": "batch", "results": results}
	switch len(results) {
	case 0:
		return nil, nil
	case 1:
		body = results[0]
	}
	_, header, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/tool_results", nil, body, nil, true)
	return header, err
}

// skipOwn is the cursor after posting results at cursor: past the events
// the post appended when the server says which they are (an hrns
// addition, [api.HeaderEvents]) and they start at cursor, so that the
// next long-poll waits for what comes next instead of returning them.
// Otherwise, or when the range is longer than n results can append, it
// is cursor: the log is read on from there.
func skipOwn(header http.Header, cursor int64, n int) int64 {
	from, to, ok := api.ParseEventRange(header.Get(api.HeaderEvents))
	if !ok || from != cursor || to-from > 4*int64(n)+8 {
		return cursor
	}
	return to
}

// Approve approves or rejects a call of a server tool that waits for
// approval (an hrns addition to the API).
func (h *Handle) Approve(ctx context.Context, callID string, approved bool, reason string) error {
	return h.post(ctx, "/approvals", api.Decision{ID: callID, Approved: approved, Reason: reason})
}

// Feedback records the key's judgement of the session.
func (h *Handle) Feedback(ctx context.Context, fb Feedback) error {
	return h.post(ctx, "/feedback", fb)
}

// EventFeedback records the key's judgement of the session's event with
// the index.
func (h *Handle) EventFeedback(ctx context.Context, index int64, fb Feedback) error {
	_, _, err := h.c.call(ctx, "PUT", fmt.Sprintf("/api/v2/sessions/%s/events/%d/feedback", h.id, index), nil, fb, nil, true)
	return err
}

// Share makes the session readable without a key by whoever has the URL
// it returns (absolute, from the server's public address), until
// [Handle.Unshare].
func (h *Handle) Share(ctx context.Context) (string, error) {
	var link struct {
		ShareURL string `json:"share_url"`
	}
	_, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/share", nil, nil, &link, true)
	return link.ShareURL, err
}

// Resource returns a resource of the session and its media type: for
// bucket "events", the image of the event at index key (an
// observation_event's screenshot); for bucket "files", the file of the
// session's workspace at the path key. A resource that does not exist is
// an *APIError with StatusCode 404.
func (h *Handle) Resource(ctx context.Context, bucket, key string) ([]byte, string, error) {
	var rb rawBody
	_, _, err := h.c.call(ctx, "GET", "/api/v2/sessions/"+url.PathEscape(h.id)+"/resources/"+url.PathEscape(bucket)+"/"+url.PathEscape(key), nil, nil, &rb, true)
	if err != nil {
		return nil, "", err
	}
	return rb.data, rb.contentType, nil
}

// Unshare revokes the session's share URL.
func (h *Handle) Unshare(ctx context.Context) error {
	_, _, err := h.c.call(ctx, "DELETE", "/api/v2/sessions/"+h.id+"/share", nil, nil, nil, true)
	return err
}

func (h *Handle) post(ctx context.Context, path string, body any) error {
	_, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+path, nil, body, nil, true)
	return err
}

// Result is how a session ended.
type Result struct {
	SessionID string
	Status    Status
	// Answer is the agent's latest answer: its text, or the JSON of a
	// structured answer (a session whose agent has answer_format).
	Answer string
	// AnswerJSON is the answer as the server gave it: a JSON string, or
	// the structured answer's object; nil before the first answer.
	AnswerJSON json.RawMessage
	Error      string
	ErrorCode  string
	Steps      int
}

func result(id string, c *Changes) *Result {
	r := &Result{SessionID: id, Status: c.Status, Steps: c.Metrics.Steps}
	if len(c.Answer) > 0 && string(c.Answer) != "null" {
		r.AnswerJSON = c.Answer
		if json.Unmarshal(c.Answer, &r.Answer) != nil {
			r.Answer = string(c.Answer)
		}
	}
	if c.Error != nil {
		r.Error = *c.Error
	}
	if c.ErrorCode != nil {
		r.ErrorCode = *c.ErrorCode
	}
	return r
}

// WaitForCompletion follows the session until it ends (completed, failed,
// timed_out or interrupted) and returns how it ended, running the calls of
// tools meanwhile (see the package documentation). An idle session has
// not ended: it waits for a message.
func (h *Handle) WaitForCompletion(ctx context.Context, tools ...*loop.ToolDef) (*Result, error) {
	x, err := newExecutor(h.c, tools)
	if err != nil {
		return nil, err
	}
	posted := map[string]ToolResult{} // results this wait posted, by call id
	var cursor int64
	var pending []ToolRequest
	early := 0 // answers in a row with nothing new, early (see poll)
	for {
		c, err := h.poll(ctx, cursor, &early)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		for _, e := range c.NewEvents {
			if e.Type == api.EventActiveState {
				var as api.ActiveState
				if json.Unmarshal(e.Data, &as) == nil {
					pending = as.PendingToolCalls
				}
			}
		}
		cursor += int64(len(c.NewEvents))
		if c.Status.Terminal() {
			return result(h.id, c), nil
		}
		if c.Status != api.StatusAwaitingToolResults || len(pending) == 0 {
			continue
		}
		var todo []ToolRequest
		var again []ToolResult
		for _, p := range pending {
			if r, ok := posted[p.ID]; ok {
				again = append(again, r) // posted, yet still pending: post it again
			} else {
				todo = append(todo, p)
			}
		}
		results := append(again, x.run(ctx, todo)...)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		header, err := h.postToolResults(ctx, results)
		switch {
		case errors.Is(err, ErrConflict):
			// The session finished meanwhile; the next poll says how.
		case errors.Is(err, ErrInvalid):
			// A call is no longer pending (answered by another waiter,
			// or abandoned by force_answer): go on from the log.
		case err != nil:
			return nil, err
		}
		if err == nil {
			cursor = skipOwn(header, cursor, len(results))
		}
		for _, r := range results {
			posted[r.ToolReq.ID] = r
		}
		pending = nil
	}
}

// Stream yields the session's events from the first, as they come, and
// ends after the last event of an ended session. It only reads: tools are
// not run. After an error it yields the error and ends.
func (h *Handle) Stream(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var cursor int64
		early := 0 // answers in a row with nothing new, early (see poll)
		for {
			c, err := h.poll(ctx, cursor, &early)
			if err != nil {
				yield(Event{}, err)
				return
			}
			if c == nil {
				continue
			}
			for _, e := range c.NewEvents {
				if !yield(e, nil) {
					return
				}
			}
			cursor += int64(len(c.NewEvents))
			if c.Status.Terminal() {
				return
			}
		}
	}
}

// executor runs pending calls with the loop's tool rules
// ([loop.Toolset.Invoke]): argument validation, timeouts, panic recovery,
// and an error for an unknown tool.
type executor struct {
	tools *loop.Toolset
	opts  *Options
}

func newExecutor(c *Client, tools []*loop.ToolDef) (*executor, error) {
	ts := &loop.Toolset{}
	for _, t := range tools {
		if t == nil {
			continue
		}
		if err := ts.Add(t); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	return &executor{tools: ts, opts: &c.opts}, nil
}

// run runs the calls concurrently and returns their results in call
// order.
func (x *executor) run(ctx context.Context, calls []ToolRequest) []ToolResult {
	out := make([]ToolResult, len(calls))
	sem := make(chan struct{}, x.opts.MaxParallel)
	var wg sync.WaitGroup
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = x.one(ctx, c)
		})
	}
	wg.Wait()
	return out
}

func (x *executor) one(ctx context.Context, c ToolRequest) ToolResult {
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	o, err := x.tools.Invoke(ctx, llm.ToolCall{ID: c.ID, Name: c.ToolName, Arguments: llm.Arguments(args)}, &loop.InvokeOptions{Timeout: x.opts.ToolTimeout})
	switch {
	case err != nil:
		return ToolResult{Kind: api.KindError, ToolReq: c, Error: err.Error(), Origin: "custom_tools"}
	case o == nil:
		return ToolResult{Kind: api.KindToolResult, ToolReq: c, Result: json.RawMessage(`""`)}
	}
	text := llm.Message{Parts: o.Content}.Text()
	if o.IsError {
		return ToolResult{Kind: api.KindError, ToolReq: c, Error: text, Origin: "custom_tools"}
	}
	return ToolResult{Kind: api.KindToolResult, ToolReq: c, Result: ResultWithImage(text, o.Content)}
}

// ResultWithImage is the result of a tool_result for a call whose output
// is text and parts: the text as a JSON string, or, when parts hold an
// image, {"text": text, "image": {"type": "base64", "media_type": ...,
// "source": ...}} (the reference's ImageContent, inlined as its
// tool_result allows), which hrns serve gives the model as an image. Only
// the first image is sent; the text says how many were left out.
func ResultWithImage(text string, parts []llm.Part) json.RawMessage {
	var img *llm.Media
	n := 0
	for _, p := range parts {
		if p.Kind == llm.PartImage && p.Media != nil && len(p.Media.Data) > 0 {
			if img == nil {
				img = p.Media
			}
			n++
		}
	}
	if img == nil {
		b, _ := json.Marshal(text)
		return b
	}
	if n > 1 {
		text += fmt.Sprintf(" (%d more images were left out.)", n-1)
	}
	b, _ := json.Marshal(struct {
		Text  string           `json:"text"`
		Image api.ImageContent `json:"image"`
	}{text, api.ImageContent{Type: "base64", MediaType: img.MIMEType, Source: base64.StdEncoding.EncodeToString(img.Data)}})
	return b
}
