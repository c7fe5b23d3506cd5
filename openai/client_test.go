package openai

import (
	"bufio"
	"context"
	"errors"
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
				"Content-Type": {"application/json"},
				"Accept":       {"text/event-stream"},
				"User-Agent":   {userAgent},
			},
			absent: []string{"Authorization", "Openai-Organization"},
		},
		{
			name:   "key and organization",
			client: Client{APIKey: "sk-test", Organization: "org-42"},
			want: http.Header{
				"Authorization":       {"Bearer sk-test"},
				"Openai-Organization": {"org-42"},
			},
		},
		{
			name: "custom headers replace defaults",
			client: Client{APIKey: "sk-test", Headers: http.Header{
				"X-Title":       {"hrns"},
				"X-Multi":       {"a", "b"},
				"User-Agent":    {"mine/2"},
				"Authorization": {"Token other"},
			}},
			want: http.Header{
				"X-Title":       {"hrns"},
				"X-Multi":       {"a", "b"},
				"User-Agent":    {"mine/2"},
				"Authorization": {"Token other"},
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
		{"", "https://api.openai.com/v1/chat/completions"},
		{"http://localhost:11434/v1", "http://localhost:11434/v1/chat/completions"},
		{"http://localhost:8000/v1/", "http://localhost:8000/v1/chat/completions"},
	}
	for _, tt := range tests {
		if got := (&Client{BaseURL: tt.base}).url("/chat/completions"); got != tt.want {
			t.Errorf("url with BaseURL %q = %q, want %q", tt.base, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	hc := &http.Client{}
	h := http.Header{"X-A": {"1"}}
	c := New(&Options{
		BaseURL: "http://x/v1", APIKey: "k", Model: "m", HTTPClient: hc,
		Headers: h, Organization: "o", UseMaxCompletionTokens: true,
	})
	want := &Client{
		BaseURL: "http://x/v1", APIKey: "k", Model: "m", HTTPClient: hc,
		Headers: http.Header{"X-A": {"1"}}, Organization: "o", UseMaxCompletionTokens: true,
	}
	if diff := cmp.Diff(want, c, cmp.Comparer(func(a, b *http.Client) bool { return a == b })); diff != "" {
		t.Errorf("New mismatch (-want +got):\n%s", diff)
	}
	h.Set("X-A", "changed")
	if c.Headers.Get("X-A") != "1" {
		t.Error("New keeps the caller's header map")
	}
	if diff := cmp.Diff(&Client{}, New(nil), cmp.Comparer(func(a, b *http.Client) bool { return a == b })); diff != "" {
		t.Errorf("New(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestNewFromEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-env")
	t.Setenv("OPENAI_BASE_URL", "http://localhost:8080/v1")
	t.Setenv("OPENAI_MODEL", "llama")
	got := NewFromEnv()
	want := &Client{APIKey: "sk-env", BaseURL: "http://localhost:8080/v1", Model: "llama"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewFromEnv mismatch (-want +got):\n%s", diff)
	}
}

// blockingServer serves one event, then holds the response open until the
// client goes away, which it reports by closing the returned channel.
func blockingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	gone := make(chan struct{})
	var once sync.Once
	first := readTestdata(t, "text.sse")
	first = first[:strings.Index(string(first), "\n\n")+2]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(first)
		w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"))
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
		pw.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"))
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
		w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choi"))
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
	if !strings.HasPrefix(err.Error(), "openai: ") {
		t.Errorf("error %q does not name the provider", err)
	}
	if diff := cmp.Diff([]llm.Chunk{textChunk("x")}, chunks); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
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

func TestStreamJSONResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	got, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Chunk{
		textChunk("Hi"),
		doneChunk(llm.Response{ID: "c", Model: "m", Message: assistant(llm.TextPart("Hi")), FinishReason: llm.FinishStop}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamConcurrentUse(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "parallel_tool_calls.sse"))
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

func TestListModels(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			t.Errorf("request %s %s, want GET /v1/models", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer k" {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Accept = %q", got)
		}
		if got := r.Header.Get("Content-Type"); got != "" {
			t.Errorf("Content-Type = %q on a GET", got)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"gpt-4.1","object":"model","created":1744316542,"owned_by":"system"},{"id":"qwen3:8b","object":"model","created":1746000000,"owned_by":"library"}]}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1", APIKey: "k", HTTPClient: srv.Client()}
	got, err := c.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ModelInfo{
		{ID: "gpt-4.1", OwnedBy: "system", Created: 1744316542},
		{ID: "qwen3:8b", OwnedBy: "library", Created: 1746000000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("models mismatch (-want +got):\n%s", diff)
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
		{"unauthorized", 401, `{"error":{"message":"no key","type":"invalid_request_error","code":"invalid_api_key"}}`, llm.ErrAuth},
		{"not JSON", 200, `<html>`, nil},
		{"empty list", 200, `{"object":"list","data":[]}`, nil},
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

func TestStreamHTMLPage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<html><body>Please sign in</body></html>"))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "HTML page") || !strings.Contains(err.Error(), "Please sign in") {
		t.Fatalf("err = %v, want an error quoting the HTML page", err)
	}
	if llm.IsRetryable(err) {
		t.Error("an HTML page is reported as retryable")
	}
}

func TestStreamNothingAfterDone(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "text.sse"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var kinds []llm.ChunkKind
	for c, err := range testClient(srv).Stream(ctx, userRequest("hi")) {
		if err != nil {
			t.Fatalf("error after %v: %v", kinds, err)
		}
		kinds = append(kinds, c.Kind)
		if c.Kind == llm.ChunkDone {
			cancel() // and keep ranging: nothing may follow Done
		}
	}
	if kinds[len(kinds)-1] != llm.ChunkDone {
		t.Errorf("last chunk %v, want done", kinds[len(kinds)-1])
	}
}
