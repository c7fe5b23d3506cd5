// Package client is the Go SDK of the hrns sessions API (hrns serve, or any
// server of the same API).
//
//	c := client.New("http://localhost:8080", os.Getenv("HRNS_API_KEY"), nil)
//	lookup := loop.NewTool("get_order_status", "Look up the status of an order.",
//		func(ctx context.Context, in struct {
//			OrderID string `json:"order_id"`
//		}) (string, error) {
//			return db.Status(ctx, in.OrderID)
//		})
//	res, err := c.RunSession(ctx, &client.SessionRequest{
//		Agent:    client.AgentRef{Inline: &client.Agent{Name: "support-agent"}},
//		Messages: client.Text("Check order 4242."),
//	}, lookup)
//	fmt.Println(res.Status, res.Answer)
//
// # Tools run in your process
//
// The tools given to [Client.RunSession] (and to [Handle.WaitForCompletion])
// are ordinary hrns tools: [loop.NewTool] for typed functions, or
// [loop.FromTool] / [Tool] for a [loop.Tool]. They are declared on the
// session's agent; when the agent calls one, the session waits in
// awaiting_tool_results, and the SDK, which long-polls the session, runs
// the calls in this process and posts their results. Calls run
// concurrently, each once per wait (deduplicated by call id), with the
// loop's argument validation, timeouts and panic recovery: a tool's error
// or panic is posted as an error_event and never crashes the caller, and a
// call to a tool the SDK was not given is answered with an error_event
// saying so.
//
// Tools run only while someone waits: RunSession, or a [Handle]'s
// WaitForCompletion with the same tools. A waiter that joins a session
// midway reads its history and finds the calls still pending.
//
// # At-least-once
//
// Execution is at least once: if a result cannot be posted (the network
// fails, the process dies) and another wait runs the call again, the tool
// runs twice. Make tools with side effects idempotent, for example keyed
// by the call id. Requests are retried with exponential backoff on
// network errors, 429 and 5xx; a 409 when posting results means the
// session has already finished, and the wait returns its final status.
//
// # Many sessions of one key
//
// One [Client] (one API key) may follow hundreds of sessions at once:
// RunSession and WaitForCompletion hold one long-poll each, which holds
// nothing on the server but a connection while it waits. The server
// bounds what one key makes it do at once (its reads of events, its
// long-polls waiting; docs/serve.md, "What one key can make the server
// hold"): a read over the bound waits for its turn there, and past
// that the server answers 429 with Retry-After to pace the key
// ([ErrBusy]). The SDK waits as told (Retry-After, plus up to a quarter
// more at random so that many waits do not come back at once, and at
// least its own backoff) and asks again, for as long as ctx lasts:
// such answers do not count towards [Options.MaxAttempts], unless it is
// 1 (no retries), and a wait that would outlast ctx's deadline returns
// the 429 at once. A Retry-After of more than two minutes (which no hrns
// server sends) is not waited either: the answer is returned at once,
// with its [APIError.RetryAfter]. Only requests safe to repeat are repeated: reads,
// posts of tool results (deduplicated by call id), and creations and
// schedule triggers (with their Idempotency-Key); a message is never sent
// twice.
//
// A client made without an [Options.HTTPClient] keeps up to 256 idle
// connections to the server, so that following many sessions at once
// does not open a connection for most long-polls (net/http's default
// transport keeps 2 a host: 256 sessions of 2 tool calls each made
// 1,046 connections, against 306 with 256 kept). A client of your own
// should do the same (http.Transport's MaxIdleConnsPerHost).
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/llm"
)

// Types of the API, shared with the server.
type (
	// SessionRequest is the body that creates a session.
	SessionRequest = api.Request
	// AgentRef names a server's agent or defines one inline.
	AgentRef = api.AgentRef
	// Agent is an inline agent definition.
	Agent = api.Agent
	// Environment names an environment of an agent, such as "web".
	Environment = api.Environment
	// ToolDefinition declares a client-side tool.
	ToolDefinition = api.ToolDefinition
	// UserMessage is a message to the agent.
	UserMessage = api.UserMessage
	// FileContent is a file attached to a user message (UserMessage.Files):
	// base64 or a URL the server fetches.
	FileContent = api.FileContent
	// AttachmentData is the data of an AttachmentEvent: a file of a
	// message, saved in the session's workspace.
	AttachmentData = api.AttachmentData
	// Messages is a list of user messages.
	Messages = api.Messages
	// Session is a session as the API shows it.
	Session = api.View
	// SessionStatus is a session's live status.
	SessionStatus = api.StatusView
	// Status is a session's lifecycle state.
	Status = api.Status
	// Changes is the answer of a long-poll.
	Changes = api.Changes
	// Event is one entry of a session's log.
	Event = api.Event
	// ToolRequest is a pending tool call.
	ToolRequest = api.ToolRequest
	// ToolResult answers a pending call.
	ToolResult = api.ToolResult
	// Quota is the key's concurrent-session quota.
	Quota = api.Quota
	// Feedback judges a session or one of its events.
	Feedback = api.Feedback
	// SkillRef names a skill of the server or gives one inline.
	SkillRef = api.SkillRef
	// Skill is an inline skill.
	Skill = api.Skill
	// Summary is a session in a listing.
	Summary = api.Summary
)

// Text returns the messages of a task given as text.
func Text(s string) Messages { return Messages{{Type: "user_message", Message: s}} }

// Options configure a [Client]. A nil *Options means the defaults.
type Options struct {
	// HTTPClient sends the requests. nil means a client shared by the
	// package: http.DefaultTransport's settings (proxies, TLS, timeouts)
	// keeping up to 256 idle connections a host, or http.DefaultClient
	// itself when the program replaced http.DefaultTransport or set
	// http.DefaultClient's fields.
	HTTPClient *http.Client
	// PollWait is how long a long-poll waits for news, at most 25
	// seconds; 0 means 25 seconds.
	PollWait time.Duration
	// MaxAttempts bounds the attempts of a request that fails with a
	// network error, 429 or 5xx; 0 means 8, 1 disables retries. The
	// server's pacing of a key's reads ([ErrBusy]) is waited out for as
	// long as the request's context lasts, whatever the bound, unless it
	// is 1.
	MaxAttempts int
	// RetryDelay is the first backoff, doubled after each failure up to
	// 10 seconds; 0 means 200ms.
	RetryDelay time.Duration
	// MaxParallel bounds the tool calls run at once; 0 means 8.
	MaxParallel int
	// ToolTimeout bounds each tool call; 0 means 5 minutes.
	ToolTimeout time.Duration
}

// A Client talks to one sessions API with one API key. It is safe for
// concurrent use.
type Client struct {
	// fixed at creation
	base string
	key  string
	opts Options
	http *http.Client
}

// New returns a client of the API at baseURL (for example
// "http://localhost:8080"), authenticating with apiKey (none when empty).
func New(baseURL, apiKey string, opts *Options) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey}
	if opts != nil {
		c.opts = *opts
	}
	o := &c.opts
	if o.PollWait <= 0 || o.PollWait > 25*time.Second {
		o.PollWait = 25 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 200 * time.Millisecond
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = 8
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = 5 * time.Minute
	}
	c.http = o.HTTPClient
	if c.http == nil {
		c.http = defaultHTTP()
	}
	return c
}

// maxIdlePerHost is how many idle connections the default client keeps
// to one server: about as many sessions as one program follows at once.
const maxIdlePerHost = 256

// stdTransport is [http.DefaultTransport] as net/http made it.
var stdTransport = http.DefaultTransport

// keptHTTP is the default client while the program leaves net/http's
// defaults as they are, built at first use; nil if they were never an
// [*http.Transport].
var keptHTTP = sync.OnceValue(func() *http.Client {
	t, ok := stdTransport.(*http.Transport)
	if !ok {
		return nil
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = maxIdlePerHost
	t.MaxIdleConns = max(t.MaxIdleConns, maxIdlePerHost)
	return &http.Client{Transport: t}
})

// defaultHTTP is the client of a Client made without one (see
// [Options.HTTPClient]).
func defaultHTTP() *http.Client {
	dc := http.DefaultClient
	if dc.Transport == nil && dc.CheckRedirect == nil && dc.Jar == nil && dc.Timeout == 0 && http.DefaultTransport == stdTransport {
		if hc := keptHTTP(); hc != nil {
			return hc
		}
	}
	return dc
}

// Errors an [APIError] matches with errors.Is.
var (
	ErrNotFound = errors.New("not found")       // 404
	ErrConflict = errors.New("conflict")        // 409: the session has finished, or a request is in flight
	ErrInvalid  = errors.New("invalid request") // 422
	// ErrQuotaExceeded: the key has as many active sessions as the
	// server allows, and the request set queue: false (429).
	ErrQuotaExceeded = errors.New("concurrent session limit reached")
	// ErrTokenQuotaExceeded: the key has used the tokens the server
	// allows it in the current window (429, not retried: RetryAfter is
	// the wait until the next window).
	ErrTokenQuotaExceeded = errors.New("token quota exceeded")
	// ErrBusy: the server paced the key's reads (429 with Retry-After
	// and Hrns-Quota "reads" or "long-polls"): too many of its reads of
	// events, or of its long-polls, at once. The SDK waits and asks
	// again while the context lasts (see the package documentation);
	// the error reaches the caller only when that ends first, or with
	// MaxAttempts 1.
	ErrBusy = errors.New("server busy with the key's reads")
)

// An APIError is an answer of the API with an error status.
type APIError struct {
	StatusCode int
	// Detail is the error's "detail": a string, or the list of invalid
	// fields of a 422.
	Detail json.RawMessage
	// RetryAfter is the wait the server asked for, if any.
	RetryAfter time.Duration
	// Quota is the quota that refused the request, as the server's
	// Hrns-Quota header names it ("tokens"), if any.
	Quota string
}

// Error says the status and the detail.
func (e *APIError) Error() string {
	detail := string(e.Detail)
	var s string
	if json.Unmarshal(e.Detail, &s) == nil {
		detail = s
	}
	return fmt.Sprintf("hrns API: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), detail)
}

// Is matches [ErrNotFound], [ErrConflict], [ErrInvalid],
// [ErrQuotaExceeded], [ErrTokenQuotaExceeded] and [ErrBusy].
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrInvalid:
		return e.StatusCode == http.StatusUnprocessableEntity
	case ErrQuotaExceeded:
		return e.StatusCode == http.StatusTooManyRequests && e.Quota != "tokens" && !e.busy()
	case ErrTokenQuotaExceeded:
		return e.StatusCode == http.StatusTooManyRequests && e.Quota == "tokens"
	case ErrBusy:
		return e.busy()
	}
	return false
}

// busy reports whether the server paced the key's reads.
func (e *APIError) busy() bool {
	return e.StatusCode == http.StatusTooManyRequests && (e.Quota == "reads" || e.Quota == "long-polls")
}

// maxRetryAfter is the longest Retry-After the SDK waits: a server that
// asks for more (hrns asks for 1 to 5 seconds; a broken or hostile
// server may ask for a day, and a context without a deadline would wait
// it) has its answer returned at once, as the loop's MaxRetryAfter does
// for providers.
const maxRetryAfter = 2 * time.Minute

// maxBody bounds what the SDK reads of an answer (a page of events is
// at most a few MiB); maxErrorBody of an error's, which the SDK keeps
// in an [APIError] quoted (up to four bytes a byte) and which the
// server keeps short (a 422's list of fields is the longest): a server
// that answers each paced read with 64 MiB of garbage had the SDK
// allocate about 400 MiB a retry.
const (
	maxBody      = 64 << 20
	maxErrorBody = 1 << 20
)

func (e *APIError) retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests && e.Quota != "tokens" || e.StatusCode >= 500 ||
		e.StatusCode == http.StatusConflict && e.RetryAfter > 0 // an idempotency key in flight
}

// call sends a request and decodes a JSON answer into out (when not nil).
// Idempotent requests are retried; it returns the status.
func (c *Client) call(ctx context.Context, method, path string, header http.Header, body, out any, retry bool) (int, http.Header, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	attempts := c.opts.MaxAttempts
	if !retry {
		attempts = 1
	}
	// attempt counts the failures that MaxAttempts bounds; paced, the
	// answers that paced the key's reads, which only ctx bounds.
	for attempt, paced := 1, 0; ; attempt++ {
		status, h, err := c.once(ctx, method, path, header, payload, out)
		if err == nil || ctx.Err() != nil {
			return status, h, err
		}
		var ae *APIError
		isAPI := errors.As(err, &ae)
		if isAPI && ae.busy() && attempts > 1 {
			attempt--
			paced++
		}
		if attempt >= attempts {
			return status, h, err
		}
		// Pacing is not failure: its backoff stops growing at 8× the
		// first (the server says when to come back).
		wait := c.backoff(attempt + min(paced, 3))
		if isAPI {
			if !ae.retryable() {
				return status, h, err
			}
			if ae.RetryAfter > maxRetryAfter {
				return status, h, err
			}
			if ra := ae.RetryAfter; ra > 0 {
				// Not before the server said, and spread, so that the
				// many reads it paced at once do not come back at once.
				wait = max(wait, ra+rand.N(ra/4+1))
			}
			if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
				return status, h, err // the wait would outlast ctx
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.RetryDelay << min(attempt-1, 10)
	d = min(d, 10*time.Second)
	return d/2 + rand.N(d/2+1)
}

func (c *Client) once(ctx context.Context, method, path string, header http.Header, payload []byte, out any) (int, http.Header, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	limit := int64(maxBody)
	if resp.StatusCode >= 400 {
		limit = maxErrorBody
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if resp.StatusCode >= 400 {
		// Quoted into an array of the most it may take (four bytes a
		// byte), not grown append by append.
		text := bytes.TrimSpace(b)
		ae := &APIError{StatusCode: resp.StatusCode, Detail: strconv.AppendQuote(make(json.RawMessage, 0, 4*len(text)+2), string(text))}
		var e struct{ Detail json.RawMessage }
		if json.Unmarshal(b, &e) == nil && e.Detail != nil {
			ae.Detail = e.Detail
		}
		ae.RetryAfter = llm.ParseRetryAfter(resp.Header, time.Now())
		ae.Quota = resp.Header.Get("Hrns-Quota")
		return resp.StatusCode, resp.Header, ae
	}
	if rb, ok := out.(*rawBody); ok {
		rb.data, rb.contentType = b, resp.Header.Get("Content-Type")
		return resp.StatusCode, resp.Header, nil
	}
	if out != nil && resp.StatusCode != http.StatusNoContent && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("hrns API: decoding %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

// CreateOptions refine [Client.CreateSession].
type CreateOptions struct {
	// IdempotencyKey makes retries of the creation return the session
	// the first attempt created. Empty means a random key, so that the
	// SDK's own retries are safe.
	IdempotencyKey string
}

// CreateSession creates a session as req says and returns it. The session
// starts at once on the server; use [Client.Session] for its handle.
func (c *Client) CreateSession(ctx context.Context, req *SessionRequest, opts *CreateOptions) (*Session, error) {
	key := ""
	if opts != nil {
		key = opts.IdempotencyKey
	}
	if key == "" {
		key = randomKey()
	}
	var s Session
	_, _, err := c.call(ctx, "POST", "/api/v2/sessions", http.Header{"Idempotency-Key": {key}}, req, &s, true)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func randomKey() string {
	b := make([]byte, 16)
	crand.Read(b)
	return hex.EncodeToString(b)
}

// ListOptions select sessions for [Client.ListSessions]; the zero value
// of each field means no filter.
type ListOptions struct {
	Statuses []Status
	// Agents keeps the sessions of these agents.
	Agents []string
	// GroupID and ParentSessionID keep the sessions created with them.
	GroupID, ParentSessionID string
	// Search keeps sessions whose first message or answer contains it.
	Search string
	// CreatedAfter ... FinishedBefore bound the creation and finish
	// times (exclusive).
	CreatedAfter, CreatedBefore, FinishedAfter, FinishedBefore time.Time
	// Ascending lists the oldest first.
	Ascending  bool
	Page, Size int
}

// ListSessions returns a page of the key's sessions, newest first.
func (c *Client) ListSessions(ctx context.Context, opts *ListOptions) (*api.Page[Summary], error) {
	q := url.Values{}
	if opts != nil {
		for _, s := range opts.Statuses {
			q.Add("status", string(s))
		}
		for _, a := range opts.Agents {
			q.Add("agent", a)
		}
		for name, v := range map[string]string{"group_id": opts.GroupID, "parent_session_id": opts.ParentSessionID, "search": opts.Search} {
			if v != "" {
				q.Set(name, v)
			}
		}
		for name, t := range map[string]time.Time{"created_after": opts.CreatedAfter, "created_before": opts.CreatedBefore, "finished_after": opts.FinishedAfter, "finished_before": opts.FinishedBefore} {
			if !t.IsZero() {
				q.Set(name, t.Format(time.RFC3339Nano))
			}
		}
		if opts.Ascending {
			q.Set("sort", "created_at")
		}
		if opts.Page > 0 {
			q.Set("page", strconv.Itoa(opts.Page))
		}
		if opts.Size > 0 {
			q.Set("size", strconv.Itoa(opts.Size))
		}
	}
	var page api.Page[Summary]
	_, _, err := c.call(ctx, "GET", "/api/v2/sessions?"+q.Encode(), nil, nil, &page, true)
	return &page, err
}

// Quota returns the key's concurrent-session quota.
func (c *Client) Quota(ctx context.Context) (*Quota, error) {
	var q Quota
	_, _, err := c.call(ctx, "GET", "/api/v2/sessions/quota", nil, nil, &q, true)
	return &q, err
}

// rawBody receives a response's bytes as they are (not JSON).
type rawBody struct {
	data        []byte
	contentType string
}
