package anthropic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sameHTTPClient compares *http.Client by identity.
var sameHTTPClient = cmp.Comparer(func(a, b *http.Client) bool { return a == b })

func TestClientHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client Client
		want   http.Header // headers that must arrive as given
		absent []string    // headers that must not arrive
	}{
		{
			name:   "no key",
			client: Client{},
			want: http.Header{
				"Content-Type":      {"application/json"},
				"Accept":            {"text/event-stream"},
				"User-Agent":        {userAgent},
				"Anthropic-Version": {"2023-06-01"},
			},
			absent: []string{"X-Api-Key", "Authorization", "Anthropic-Beta"},
		},
		{
			name:   "key",
			client: Client{APIKey: "sk-ant-test"},
			want:   http.Header{"X-Api-Key": {"sk-ant-test"}},
			absent: []string{"Authorization"},
		},
		{
			name: "custom headers replace defaults",
			client: Client{APIKey: "sk-ant-test", Headers: http.Header{
				"Anthropic-Beta":    {"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"},
				"Anthropic-Version": {"2099-01-01"},
				"Authorization":     {"Bearer gateway-token"},
				"User-Agent":        {"mine/2"},
			}},
			want: http.Header{
				"X-Api-Key":         {"sk-ant-test"},
				"Anthropic-Beta":    {"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"},
				"Anthropic-Version": {"2099-01-01"},
				"Authorization":     {"Bearer gateway-token"},
				"User-Agent":        {"mine/2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan http.Header, 1)
			body := readTestdata(t, "text.sse")
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
				w.Write(body)
			}))
			defer srv.Close()
			c := tt.client
			c.BaseURL, c.Model, c.HTTPClient = srv.URL, "m", srv.Client()
			if _, err := llm.Collect(c.Stream(context.Background(), userRequest("hi"))); err != nil {
				t.Fatal(err)
			}
			h := <-got
			for k, v := range tt.want {
				if diff := cmp.Diff(v, h.Values(k)); diff != "" {
					t.Errorf("header %s mismatch (-want +got):\n%s", k, diff)
				}
			}
			for _, k := range tt.absent {
				if v := h.Values(k); v != nil {
					t.Errorf("header %s = %q, want none", k, v)
				}
			}
		})
	}
}

func TestClientUsesCallerHTTPClient(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "text.sse"))
	var calls atomic.Int32
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return srv.Client().Transport.RoundTrip(r)
	})}
	c := &Client{BaseURL: srv.URL, Model: "m", HTTPClient: hc}
	if _, err := llm.Collect(c.Stream(context.Background(), userRequest("hi"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListModels(context.Background()); err == nil {
		t.Fatal("ListModels of an event stream succeeded")
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("caller's transport saw %d requests, want 2", n)
	}
}

func TestClientURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ base, want string }{
		{"", "https://api.anthropic.com/v1/messages"},
		{"https://api.anthropic.com/", "https://api.anthropic.com/v1/messages"},
		{"http://localhost:4000", "http://localhost:4000/v1/messages"},
		{"https://gateway.example.com/anthropic", "https://gateway.example.com/anthropic/v1/messages"},
	}
	for _, tt := range tests {
		if got := (&Client{BaseURL: tt.base}).url("/v1/messages"); got != tt.want {
			t.Errorf("url with BaseURL %q = %q, want %q", tt.base, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	hc := &http.Client{}
	h := http.Header{"X-A": {"1"}}
	cache := &CachePolicy{System: true, TTL: "1h"}
	thinking := &Thinking{Type: ThinkingEnabled, BudgetTokens: 4096}
	c := New(&Options{
		BaseURL: "http://x", APIKey: "k", Model: "m", MaxTokens: 100, HTTPClient: hc,
		Headers: h, Cache: cache, Thinking: thinking, Effort: "low",
	})
	want := &Client{
		BaseURL: "http://x", APIKey: "k", Model: "m", MaxTokens: 100, HTTPClient: hc,
		Headers: http.Header{"X-A": {"1"}}, Cache: &CachePolicy{System: true, TTL: "1h"},
		Thinking: &Thinking{Type: ThinkingEnabled, BudgetTokens: 4096}, Effort: "low",
	}
	if diff := cmp.Diff(want, c, sameHTTPClient); diff != "" {
		t.Errorf("New mismatch (-want +got):\n%s", diff)
	}
	h.Set("X-A", "changed")
	cache.Tools = true
	thinking.BudgetTokens = 1
	if c.Headers.Get("X-A") != "1" || c.Cache.Tools || c.Thinking.BudgetTokens != 4096 {
		t.Error("New keeps the caller's header map, cache policy or thinking")
	}
	if diff := cmp.Diff(&Client{}, New(nil), sameHTTPClient); diff != "" {
		t.Errorf("New(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestNewFromEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://localhost:4000")
	t.Setenv("ANTHROPIC_MODEL", "claude-haiku-4-5")
	got := NewFromEnv()
	want := &Client{APIKey: "sk-ant-env", BaseURL: "http://localhost:4000", Model: "claude-haiku-4-5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewFromEnv mismatch (-want +got):\n%s", diff)
	}
}

// firstEvents is the start of a text stream: one text chunk, "x".
const firstEvents = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"

// blockingServer serves the first events, then holds the response open
// until the client goes away, which it reports by closing the returned
// channel.
func blockingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	gone := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(firstEvents))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		once.Do(func() { close(gone) })
	}))
	t.Cleanup(srv.Close)
	return srv, gone
}

func TestStreamCancelMidStream(t *testing.T) {
	t.Parallel()
	srv, gone := blockingServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks []llm.Chunk
	var err error
	for c, e := range testClient(srv).Stream(ctx, userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
		chunks = append(chunks, c)
		cancel()
	}
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff([]llm.Chunk{textChunk("x")}, chunks); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
	}
	if llm.IsRetryable(err) {
		t.Error("cancellation is reported as retryable")
	}
	<-gone // the connection was closed
}

// pipeTransport answers with a body that blocks until it is closed, and
// ignores the request's context, as a careless RoundTripper might.
type pipeTransport struct {
	closed chan struct{}
	once   sync.Once
}

func (p *pipeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(firstEvents))
		// then nothing, until the reader closes
	}()
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       &closeNotifier{ReadCloser: pr, onClose: func() { p.once.Do(func() { close(p.closed) }) }},
		Request:    r,
	}, nil
}

type closeNotifier struct {
	io.ReadCloser
	onClose func()
}

func (c *closeNotifier) Close() error {
	c.onClose()
	return c.ReadCloser.Close()
}

func TestStreamCancelClosesBodyOfCarelessTransport(t *testing.T) {
	t.Parallel()
	tr := &pipeTransport{closed: make(chan struct{})}
	c := &Client{BaseURL: "http://unused.invalid", Model: "m", HTTPClient: &http.Client{Transport: tr}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	for _, e := range c.Stream(ctx, userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
		cancel()
	}
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	<-tr.closed
}

func TestStreamCanceledBeforeRequest(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := collect(testClient(srv).Stream(ctx, userRequest("hi")))
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := testClient(srv).ListModels(ctx); err != context.Canceled {
		t.Fatalf("ListModels err = %v, want context.Canceled", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

func TestStreamEarlyBreakClosesConnection(t *testing.T) {
	t.Parallel()
	srv, gone := blockingServer(t)
	n := 0
	for _, err := range testClient(srv).Stream(context.Background(), userRequest("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d chunks, want 1", n)
	}
	<-gone // the server saw the connection close
}

func TestStreamEarlyBreakClosesBody(t *testing.T) {
	t.Parallel()
	tr := &pipeTransport{closed: make(chan struct{})}
	c := &Client{Model: "m", HTTPClient: &http.Client{Transport: tr}}
	for range c.Stream(context.Background(), userRequest("hi")) {
		break
	}
	select {
	case <-tr.closed:
	default:
		t.Fatal("the body was not closed when the loop returned")
	}
}

func TestStreamConnectionDropped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(firstEvents + "event: content_block_delta\ndata: {\"type\":\"content_bl"))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-event
	}))
	defer srv.Close()
	chunks, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err == nil {
		t.Fatal("Stream succeeded on a dropped connection")
	}
	t.Logf("error: %v", err)
	if !llm.IsRetryable(err) {
		t.Errorf("llm.IsRetryable(%v) = false, want true", err)
	}
	if !strings.HasPrefix(err.Error(), "anthropic: ") {
		t.Errorf("error %q does not name the provider", err)
	}
	if diff := cmp.Diff([]llm.Chunk{textChunk("x")}, chunks); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamEndsInsideEvent(t *testing.T) {
	t.Parallel()
	// A body cut inside an event's JSON, without a transport error.
	srv := serveSSE(t, []byte(firstEvents+"event: content_block_delta\ndata: {\"type\":\"content_bl"))
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if !errors.Is(err, io.ErrUnexpectedEOF) || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable io.ErrUnexpectedEOF", err)
	}
}

func TestStreamConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := &Client{BaseURL: url, Model: "m"}
	_, err := collect(c.Stream(context.Background(), userRequest("hi")))
	if err == nil || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
}

func TestStreamLineTooLong(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: "))
		w.Write([]byte(strings.Repeat("x", sse.MaxLineSize+1)))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("err = %v, want bufio.ErrTooLong", err)
	}
	if !strings.Contains(err.Error(), "longer than 16777216 bytes") {
		t.Errorf("error %q does not state the limit", err)
	}
}

func TestStreamHTMLPage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html>\n<html><title>Sign in to the proxy</title></html>"))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "answered with an HTML page") || !strings.Contains(err.Error(), "Sign in to the proxy") {
		t.Fatalf("err = %v, want one saying an HTML page came back, quoting it", err)
	}
	if llm.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true, want false", err)
	}
}

func TestBaseURLWithVersion(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1/", Model: "m", HTTPClient: srv.Client()}
	_, err := collect(c.Stream(context.Background(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "ends in /v1, which the client adds itself") {
		t.Fatalf("err = %v, want a hint about /v1", err)
	}
	if apiErr, ok := errors.AsType[*llm.APIError](err); !ok || apiErr.StatusCode != 404 {
		t.Errorf("err = %v does not wrap the 404 APIError", err)
	}
	if !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("errors.Is(err, llm.ErrBadRequest) = false")
	}
}

func TestStreamConcurrentUse(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "parallel_tool_use.sse"))
	c := testClient(srv)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := llm.Collect(c.Stream(context.Background(), userRequest("hi")))
			if err != nil {
				t.Error(err)
				return
			}
			if n := len(resp.Message.ToolCalls()); n != 3 {
				t.Errorf("got %d tool calls, want 3", n)
			}
		})
	}
	wg.Wait()
}

func TestStreamTwiceSendsTwice(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	body := readTestdata(t, "text.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write(body)
	}))
	defer srv.Close()
	seq := testClient(srv).Stream(context.Background(), userRequest("hi"))
	for range 2 {
		if _, err := llm.Collect(seq); err != nil {
			t.Fatal(err)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestListModels(t *testing.T) {
	t.Parallel()
	// Two pages, followed by after_id.
	pages := map[string]string{
		"": `{"data":[{"type":"model","id":"claude-opus-4-6","display_name":"Claude Opus 4.6","created_at":"2026-02-04T00:00:00Z"},` +
			`{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],` +
			`"has_more":true,"first_id":"claude-opus-4-6","last_id":"claude-sonnet-4-5-20250929"}`,
		"claude-sonnet-4-5-20250929": `{"data":[{"type":"model","id":"claude-3-haiku-20240307","display_name":"Claude Haiku 3","created_at":"bad date"}],` +
			`"has_more":false,"first_id":"claude-3-haiku-20240307","last_id":"claude-3-haiku-20240307"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			t.Errorf("request %s %s, want GET /v1/models", r.Method, r.URL.Path)
		}
		if got := r.URL.Query().Get("limit"); got != "1000" {
			t.Errorf("limit = %q, want 1000", got)
		}
		for k, want := range map[string]string{"X-Api-Key": "k", "Anthropic-Version": "2023-06-01", "Accept": "application/json", "Content-Type": ""} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		page, ok := pages[r.URL.Query().Get("after_id")]
		if !ok {
			t.Errorf("unexpected after_id %q", r.URL.Query().Get("after_id"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()}
	got, err := c.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ModelInfo{
		{ID: "claude-opus-4-6", Created: 1770163200},
		{ID: "claude-sonnet-4-5-20250929", Created: 1759104000},
		{ID: "claude-3-haiku-20240307"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("models mismatch (-want +got):\n%s", diff)
	}
}

func TestListModelsStopsOnRepeatedCursor(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		fmt.Fprint(w, `{"data":[{"id":"a"}],"has_more":true,"last_id":"a"}`)
	}))
	defer srv.Close()
	got, err := testClient(srv).ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || requests.Load() != 2 {
		t.Errorf("got %d models in %d requests, want 2 in 2", len(got), requests.Load())
	}
}

func TestListModelsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr error
	}{
		{"unauthorized", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, llm.ErrAuth},
		{"not JSON", 200, `<html>`, nil},
		{"empty list", 200, `{"data":[],"has_more":false}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			models, err := testClient(srv).ListModels(context.Background())
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.name == "not JSON":
				if err == nil || !strings.Contains(err.Error(), "decoding model list") {
					t.Fatalf("err = %v, want a decoding error", err)
				}
			default:
				if err != nil || models == nil || len(models) != 0 {
					t.Fatalf("got %v, %v; want an empty non-nil list", models, err)
				}
			}
		})
	}
}
