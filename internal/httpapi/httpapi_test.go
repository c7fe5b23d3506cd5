package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// body is a response body that counts its closes and can fail its reads.
type body struct {
	io.Reader
	closes atomic.Int32
	closed chan struct{} // closed by the first Close
}

func newBody(s string) *body {
	return &body{Reader: strings.NewReader(s), closed: make(chan struct{})}
}

func (b *body) Close() error {
	if b.closes.Add(1) == 1 {
		close(b.closed)
	}
	return nil
}

// answer returns a transport that answers every request with status and b,
// ignoring the request's context as a careless RoundTripper might, and
// keeps the last request in *got.
func answer(status int, contentType string, b io.ReadCloser, got **http.Request) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if got != nil {
			*got = r
		}
		return &http.Response{
			StatusCode: status,
			Header:     http.Header{"Content-Type": {contentType}},
			Body:       b,
			Request:    r,
		}, nil
	})}
}

// statusError is a Client.StatusError that reads the whole body.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(resp.Body)
	return fmt.Errorf("status %d: %s", resp.StatusCode, b)
}

func TestSendHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client Client
		body   []byte
		want   http.Header
	}{
		{
			name:   "with a body",
			client: Client{UserAgent: "hrns-test/1"},
			body:   []byte(`{}`),
			want: http.Header{
				"Content-Type": {"application/json"},
				"Accept":       {"text/event-stream"},
				"User-Agent":   {"hrns-test/1"},
			},
		},
		{
			name:   "without a body",
			client: Client{UserAgent: "hrns-test/1"},
			want: http.Header{
				"Accept":     {"text/event-stream"},
				"User-Agent": {"hrns-test/1"},
			},
		},
		{
			name: "the API's headers, then the caller's replace them",
			client: Client{
				UserAgent: "hrns-test/1",
				Header: func(h http.Header) {
					h.Set("X-Api-Key", "k")
					h.Set("Api-Version", "1")
				},
				Extra: http.Header{
					"X-Api-Key":  {"other"},
					"User-Agent": {"mine/2"},
					"X-Multi":    {"a", "b"},
				},
			},
			want: http.Header{
				"Accept":      {"text/event-stream"},
				"User-Agent":  {"mine/2"},
				"X-Api-Key":   {"other"},
				"Api-Version": {"1"},
				"X-Multi":     {"a", "b"},
			},
		},
	}
	for _, tt := range tests {
		var got *http.Request
		c := tt.client
		c.HTTP = answer(200, "text/event-stream", newBody(""), &got)
		resp, err := c.Send(context.Background(), http.MethodPost, "http://unused.invalid/x", tt.body, "text/event-stream")
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		resp.Body.Close()
		if diff := cmp.Diff(tt.want, got.Header); diff != "" {
			t.Errorf("%s: headers mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestSendUsesDefaultClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(b) != "hello" {
			t.Errorf("server got %s %q", r.Method, b)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := &Client{Provider: "p"}
	resp, err := c.Send(context.Background(), http.MethodPost, srv.URL, []byte("hello"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Errorf("body %q, want ok", b)
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	failing := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, boom })}

	c := &Client{Provider: "p", HTTP: failing}
	_, err := c.Send(context.Background(), http.MethodGet, "http://unused.invalid", nil, "*/*")
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "p: ") {
		t.Errorf("transport failure: err = %v, want boom prefixed by the provider", err)
	}

	_, err = c.Send(context.Background(), "BAD METHOD", "http://unused.invalid", nil, "*/*")
	if err == nil || !strings.HasPrefix(err.Error(), "p: ") {
		t.Errorf("bad request: err = %v, want an error prefixed by the provider", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Send(ctx, http.MethodGet, "http://unused.invalid", nil, "*/*")
	if err != context.Canceled {
		t.Errorf("ended context: err = %v, want context.Canceled", err)
	}
}

func TestSendStatusError(t *testing.T) {
	t.Parallel()
	b := newBody("no such model")
	c := &Client{Provider: "p", HTTP: answer(404, "text/plain", b, nil), StatusError: statusError}
	resp, err := c.Send(context.Background(), http.MethodGet, "http://unused.invalid", nil, "*/*")
	if resp != nil || err == nil || err.Error() != "status 404: no such model" {
		t.Fatalf("Send = %v, %v; want the StatusError", resp, err)
	}
	if n := b.closes.Load(); n != 1 {
		t.Errorf("error body closed %d times, want 1", n)
	}

	// A context that ends while the error is read wins over the error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.StatusError = func(resp *http.Response) error {
		cancel()
		return statusError(resp)
	}
	c.HTTP = answer(500, "text/plain", newBody("x"), nil)
	if _, err := c.Send(ctx, http.MethodGet, "http://unused.invalid", nil, "*/*"); err != context.Canceled {
		t.Errorf("context ended during the status error: err = %v, want context.Canceled", err)
	}
}

func TestStreamClosesBodyWhenContextEnds(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	b := &body{Reader: pr, closed: make(chan struct{})}
	var got *http.Request
	c := &Client{HTTP: answer(200, "text/event-stream", b, &got)}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Stream(ctx, "http://unused.invalid/stream", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodPost || got.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("sent %s with Accept %q, want a POST for an event stream", got.Method, got.Header.Get("Accept"))
	}
	cancel()
	<-b.closed // the transport ignores ctx; Stream closes the body
	resp.Body.Close()
	if n := b.closes.Load(); n != 2 {
		t.Errorf("body closed %d times, want 2 (by ctx, by the caller)", n)
	}
}

func TestStreamCloseEndsWatch(t *testing.T) {
	t.Parallel()
	b := newBody("data: x\n\n")
	c := &Client{HTTP: answer(200, "text/event-stream", b, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Stream(ctx, "http://unused.invalid/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != "data: x\n\n" {
		t.Errorf("body %q", got)
	}
	resp.Body.Close()
	cancel()
	time.Sleep(10 * time.Millisecond) // a close by ctx would run now
	if n := b.closes.Load(); n != 1 {
		t.Errorf("body closed %d times, want 1", n)
	}
}

func TestGetJSON(t *testing.T) {
	t.Parallel()
	var got *http.Request
	c := &Client{Provider: "p", HTTP: answer(200, "application/json", newBody(`{"a":1}`), &got)}
	var v struct{ A int }
	if err := c.GetJSON(context.Background(), "http://unused.invalid/list", "list", &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 1 {
		t.Errorf("decoded %+v", v)
	}
	if got.Method != http.MethodGet || got.Header.Get("Accept") != "application/json" || got.Header.Get("Content-Type") != "" {
		t.Errorf("sent %s, headers %v; want a GET for JSON without a body", got.Method, got.Header)
	}

	c.HTTP = answer(200, "application/json", newBody(`{"a":`), nil)
	if err := c.GetJSON(context.Background(), "http://unused.invalid/list", "list", &v); err == nil || !strings.HasPrefix(err.Error(), "p: decoding list: ") {
		t.Errorf("cut JSON: err = %v, want p: decoding list: ...", err)
	}

	boom := errors.New("boom")
	c.HTTP = answer(200, "application/json", io.NopCloser(io.MultiReader(strings.NewReader(`{"a"`), errReader{boom})), nil)
	if err := c.GetJSON(context.Background(), "http://unused.invalid/list", "list", &v); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "p: reading list: ") {
		t.Errorf("failed read: err = %v, want p: reading list: boom", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	c.HTTP = answer(200, "application/json", io.NopCloser(readFunc(func([]byte) (int, error) { cancel(); return 0, boom })), nil)
	if err := c.GetJSON(ctx, "http://unused.invalid/list", "list", &v); err != context.Canceled {
		t.Errorf("read failed as the context ended: err = %v, want context.Canceled", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

func TestMediaType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                "",
		"text/event-stream":               "text/event-stream",
		"Application/JSON; charset=utf-8": "application/json",
		" text/html ;charset=utf-8":       "text/html",
	} {
		if got := MediaType(in); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHTMLPage(t *testing.T) {
	t.Parallel()
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: newBody("<html>0123456789")}
	page, ok := HTMLPage(resp, 10)
	if !ok || string(page) != "<html>0123" {
		t.Errorf("HTMLPage = %q, %v; want the first 10 bytes, true", page, ok)
	}
	resp = &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: newBody("data: x\n\n")}
	if page, ok := HTMLPage(resp, 10); ok || page != nil {
		t.Errorf("event stream: HTMLPage = %q, %v; want nil, false", page, ok)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "data: x\n\n" {
		t.Errorf("HTMLPage read %q of a body that is not a page", b)
	}
}

func TestErrorBody(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxErrorBody+10)
	b := newBody(long)
	if got := ErrorBody(&http.Response{Body: b}); len(got) != maxErrorBody {
		t.Errorf("read %d bytes, want %d", len(got), maxErrorBody)
	}
	if n := b.closes.Load(); n != 0 {
		t.Errorf("ErrorBody closed the body")
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	if got := Excerpt([]byte("\r\n  <html>é</html>\n"), 100); got != "<html>é</html>" {
		t.Errorf("Excerpt = %q", got)
	}
	if got := Excerpt([]byte("  abcdef"), 3); got != "abc..." {
		t.Errorf("Excerpt = %q, want abc...", got)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 5, "abcde..."},
		{"ééé", 3, "é..."}, // not "é\xc3..."
		{"ééé", 1, "..."},
	}
	for _, tt := range tests {
		if got := Truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	reset := func(h http.Header) time.Duration {
		d, _ := time.ParseDuration(h.Get("X-Reset"))
		return d
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
	}{
		{"retry-after", 429, http.Header{"Retry-After": {"7"}, "X-Reset": {"3s"}}, 7 * time.Second},
		{"retry-after on a 503", 503, http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"rate-limit headers on a 429", 429, http.Header{"X-Reset": {"3s"}}, 3 * time.Second},
		{"rate-limit headers only on a 429", 503, http.Header{"X-Reset": {"3s"}}, 0},
		{"nothing", 429, http.Header{}, 0},
		{"huge retry-after", 429, http.Header{"Retry-After": {"99999999999"}}, llm.RetryAfterLimit},
		{"NaN retry-after falls back", 429, http.Header{"Retry-After": {"NaN"}, "X-Reset": {"3s"}}, 3 * time.Second},
		{"negative reset", 429, http.Header{"X-Reset": {"-3s"}}, 0},
		{"reset beyond the limit", 429, http.Header{"X-Reset": {"100000h"}}, llm.RetryAfterLimit},
	}
	for _, tt := range tests {
		if got := RetryAfter(&http.Response{StatusCode: tt.status, Header: tt.header}, reset); got != tt.want {
			t.Errorf("%s: RetryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"20", 20 * time.Second},
		{" 1.5 ", 1500 * time.Millisecond},
		{"0", 0},
		{"-1", 0},
		{"NaN", 0},
		{"Inf", 0},
		{"1e300", llm.RetryAfterLimit},
		{"1e400", llm.RetryAfterLimit},
		{"99999999999", llm.RetryAfterLimit},
		{"Sun, 01 Jun 2025 12:00:00 GMT", 0}, // a date is not a number of seconds
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := Seconds(tt.in); got != tt.want {
			t.Errorf("Seconds(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestStreamPieces sends bodies in pieces, through a redirect that makes
// the transport send the body again (GetBody), and checks that each
// arrives whole, with its length, and that the pieces are left as they were.
func TestStreamPieces(t *testing.T) {
	tests := []struct {
		name   string
		pieces [][]byte
		want   string
	}{
		{"several", [][]byte{[]byte(`{"a":`), nil, []byte(`[1,2]`), []byte(`}`)}, `{"a":[1,2]}`},
		{"one", [][]byte{[]byte(`{}`)}, `{}`},
		{"empty pieces", [][]byte{{}, {}}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil || r.ContentLength != int64(len(b)) {
					t.Errorf("%s: %d bytes (%v), Content-Length %d", r.URL.Path, len(b), err, r.ContentLength)
				}
				got = append(got, r.URL.Path+" "+string(b))
				if r.URL.Path == "/first" {
					http.Redirect(w, r, "/second", http.StatusTemporaryRedirect)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
			}))
			defer srv.Close()
			saved := bytes.Join(tt.pieces, []byte("|"))
			c := &Client{Provider: "p", StatusError: func(*http.Response) error { return errors.New("status") }}
			resp, err := c.StreamPieces(t.Context(), srv.URL+"/first", tt.pieces)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := []string{"/first " + tt.want, "/second " + tt.want}
			if !slices.Equal(got, want) {
				t.Errorf("server got %q, want %q", got, want)
			}
			if !bytes.Equal(bytes.Join(tt.pieces, []byte("|")), saved) {
				t.Error("the pieces changed")
			}
		})
	}
}

// writeCounter is a connection that counts the writes made to it.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestSmallBodyInOneWrite checks that a request whose body comes in pieces
// goes to the connection in one write, headers and body together, when it
// is small (the pieces joined), and still arrives whole when it is large.
// A body the transport does not know to be in memory makes it flush the
// headers first: a second system call every turn.
func TestSmallBodyInOneWrite(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	defer srv.Close()
	tests := []struct {
		name      string
		pieces    [][]byte
		maxWrites int32
	}{
		{"small", [][]byte{[]byte(`{"messages":[`), []byte(`{"role":"user"}`), []byte(`,{"role":"tool"}`), []byte(`]}`)}, 1},
		{"large", [][]byte{[]byte(`{"messages":[`), bytes.Repeat([]byte("x"), joinBelow), []byte(`]}`)}, 1 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes atomic.Int32
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				return writeCounter{conn, &writes}, err
			}}
			defer tr.CloseIdleConnections()
			c := &Client{Provider: "p", HTTP: &http.Client{Transport: tr}, StatusError: func(*http.Response) error { return errors.New("status") }}
			resp, err := c.StreamPieces(t.Context(), srv.URL, tt.pieces)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := bytes.Join(tt.pieces, nil); !bytes.Equal(got, want) {
				t.Errorf("server got %d bytes, want %d", len(got), len(want))
			}
			if n := writes.Load(); n > tt.maxWrites || n == 0 {
				t.Errorf("%d writes to the connection, want 1 to %d", n, tt.maxWrites)
			}
		})
	}
}

// useDefaultTransport makes rt net/http's default transport, and the one
// DefaultHTTP clones, for the test.
func useDefaultTransport(t *testing.T, rt http.RoundTripper) {
	oldDefault, oldStd, oldBuffered := http.DefaultTransport, stdTransport, bufferedHTTP
	http.DefaultTransport, stdTransport = rt, rt
	bufferedHTTP = sync.OnceValue(func() *http.Client { return withBuffers(stdTransport) })
	t.Cleanup(func() { http.DefaultTransport, stdTransport, bufferedHTTP = oldDefault, oldStd, oldBuffered })
}

// TestDefaultHTTPWritesARequestOnce checks that a provider given no client
// sends a request of tens of KiB (a turn after a few tool results of some
// KiB) in one write to the connection, headers and body together. With
// net/http's buffers of 4 KiB it took three: the headers and the start of
// the body, then the rest through a copy buffer allocated for it.
func TestDefaultHTTPWritesARequestOnce(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	var writes atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return writeCounter{conn, &writes}, err
	}
	useDefaultTransport(t, tr)
	hc := DefaultHTTP()
	defer hc.CloseIdleConnections()
	if hc == http.DefaultClient {
		t.Fatal("DefaultHTTP is http.DefaultClient")
	}
	pieces := [][]byte{[]byte(`{"messages":[`), bytes.Repeat([]byte("x"), 40<<10), []byte(`]}`)}
	c := &Client{Provider: "p", StatusError: func(*http.Response) error { return errors.New("status") }}
	resp, err := c.StreamPieces(t.Context(), srv.URL, pieces)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Errorf("server got %d bytes, want %d", len(got), len(want))
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("%d writes to the connection, want 1", n)
	}
}

// TestDefaultHTTPKeepsWhatTheProgramSet checks that a program that replaced
// http.DefaultTransport, or set a field of http.DefaultClient, gets
// http.DefaultClient as before, and that the clone keeps the settings of
// the default transport.
func TestDefaultHTTPKeepsWhatTheProgramSet(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 7
	useDefaultTransport(t, tr)
	hc := DefaultHTTP()
	ht, ok := hc.Transport.(*http.Transport)
	if !ok || ht == tr {
		t.Fatalf("DefaultHTTP's transport is %T %p, want a clone of %p", hc.Transport, hc.Transport, tr)
	}
	if ht.WriteBufferSize != BufferSize || ht.ReadBufferSize != BufferSize || ht.MaxIdleConnsPerHost != 7 || ht.Proxy == nil ||
		ht.TLSHandshakeTimeout != tr.TLSHandshakeTimeout || ht.IdleConnTimeout != tr.IdleConnTimeout || !ht.ForceAttemptHTTP2 {
		t.Errorf("the clone lost a setting: %+v", ht)
	}
	if hc.Timeout != 0 || hc.Jar != nil || hc.CheckRedirect != nil {
		t.Errorf("DefaultHTTP is not a plain client: %+v", hc)
	}

	var replaced atomic.Int32
	http.DefaultTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		replaced.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: newBody("ok"), Request: r}, nil
	})
	if DefaultHTTP() != http.DefaultClient {
		t.Error("with http.DefaultTransport replaced, DefaultHTTP is not http.DefaultClient")
	}
	c := &Client{Provider: "p"}
	resp, err := c.Send(t.Context(), http.MethodGet, "http://example.test/", nil, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if replaced.Load() != 1 {
		t.Errorf("the replaced http.DefaultTransport got %d requests, want 1", replaced.Load())
	}

	http.DefaultTransport = tr
	old := *http.DefaultClient
	http.DefaultClient.Timeout = time.Hour
	defer func() { http.DefaultClient.Timeout = old.Timeout }()
	if DefaultHTTP() != http.DefaultClient {
		t.Error("with http.DefaultClient.Timeout set, DefaultHTTP is not http.DefaultClient")
	}
}

// TestSendUsesTheCallersClient checks that a client given is used as it is.
func TestSendUsesTheCallersClient(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: newBody("ok"), Request: r}, nil
	})}
	c := &Client{Provider: "p", HTTP: hc}
	resp, err := c.Send(t.Context(), http.MethodPost, "http://example.test/", []byte("{}"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if calls.Load() != 1 {
		t.Errorf("the caller's transport got %d requests, want 1", calls.Load())
	}
}

// TestDefaultHTTPUsesTheProxyOfTheEnvironment sends a request through a
// proxy on loopback named by HTTP_PROXY, in a process of its own (net/http
// reads the environment once per process).
func TestDefaultHTTPUsesTheProxyOfTheEnvironment(t *testing.T) {
	if os.Getenv("HRNS_TEST_PROXY_CHILD") == "1" {
		c := &Client{Provider: "p", StatusError: func(*http.Response) error { return errors.New("status") }}
		resp, err := c.Send(t.Context(), http.MethodPost, "http://api.example.test/v1/chat", []byte(`{"a":1}`), "application/json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "from the proxy" {
			t.Fatalf("body %q, want the proxy's", b)
		}
		return
	}
	var seen atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen.Store(r.Method + " " + r.RequestURI + " " + string(b))
		io.WriteString(w, "from the proxy")
	}))
	defer proxy.Close()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDefaultHTTPUsesTheProxyOfTheEnvironment$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HRNS_TEST_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if got, want := seen.Load(), `POST http://api.example.test/v1/chat {"a":1}`; got != want {
		t.Errorf("the proxy got %q, want %q", got, want)
	}
}

// TestDefaultHTTPKeepsHTTP2 checks that the clone of the default transport
// still speaks HTTP/2 over TLS where the server does, with the TLS
// settings of the transport it was cloned from.
func TestDefaultHTTPKeepsHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	useDefaultTransport(t, tr)
	defer DefaultHTTP().CloseIdleConnections()
	c := &Client{Provider: "p", StatusError: func(*http.Response) error { return errors.New("status") }}
	resp, err := c.Send(t.Context(), http.MethodPost, srv.URL, bytes.Repeat([]byte("x"), 20<<10), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "HTTP/2.0" || resp.ProtoMajor != 2 {
		t.Errorf("the server saw %q, the client %s; want HTTP/2.0", b, resp.Proto)
	}
}
