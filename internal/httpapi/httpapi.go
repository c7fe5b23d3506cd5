// Package httpapi is the HTTP plumbing the model providers share: sending a
// request and turning an error status into the provider's error, closing a
// streamed body when the context ends, recognising a web page where an API
// answer was expected, and the parts of an error response that every API
// reports the same way (Retry-After, a body that is not the API's JSON).
//
// What is particular to an API stays in its provider: the paths, the
// authentication and version headers, the format of error bodies and the
// header that carries the request ID.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/llm"
)

// MaxBody bounds a body read whole: a JSON answer such as a model list or a
// non-streamed completion. It is the longest line of an event stream, so
// that an answer may be as large unstreamed as streamed.
const MaxBody = 16 << 20

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// MaxErrorText bounds the text of a non-JSON error body kept as the message.
const MaxErrorText = 512

// A Client sends the requests of one provider's API client. A provider
// builds one per call from its own client's fields.
type Client struct {
	// Provider begins the text of the errors the Client makes, as in
	// "openai: ...".
	Provider string
	// HTTP sends the requests, as given. Nil means [DefaultHTTP].
	HTTP *http.Client
	// UserAgent is sent as the User-Agent header.
	UserAgent string
	// Header, if not nil, sets the API's own headers on every request:
	// authentication, version.
	Header func(h http.Header)
	// Extra holds the caller's headers, set last: each replaces any header
	// of the same name set before, including those of Header.
	Extra http.Header
	// StatusError returns the error for a response with an HTTP status of
	// 400 or more. It may read the body, which Send closes.
	StatusError func(resp *http.Response) error
}

// Send performs one HTTP request to url, with body as its JSON body unless
// body is nil, asking for the media type accept. It returns a response of
// a successful status for the caller to read and close. For a status of 400
// or more it returns the error of c.StatusError. When ctx has ended, it
// returns ctx's error instead of any other.
func (c *Client) Send(ctx context.Context, method, url string, body []byte, accept string) (*http.Response, error) {
	var pieces [][]byte
	if body != nil {
		pieces = [][]byte{body}
	}
	return c.send(ctx, method, url, pieces, accept)
}

// send is [Client.Send] with a body in pieces, sent one after the other;
// nil pieces send no body.
func (c *Client) send(ctx context.Context, method, url string, pieces [][]byte, accept string) (*http.Response, error) {
	if len(pieces) > 1 {
		n := 0
		for _, p := range pieces {
			n += len(p)
		}
		if n <= joinBelow {
			// One piece: the transport writes the headers and a body it
			// knows to be in memory together, in one write to the
			// connection, where it flushes the headers before a body of
			// another kind (a second write, a system call a turn).
			pieces = [][]byte{bytes.Join(pieces, nil)}
		}
	}
	var rd io.Reader
	switch len(pieces) {
	case 0:
	case 1:
		rd = bytes.NewReader(pieces[0])
	default:
		rd = piecesReader(pieces)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Provider, err)
	}
	if len(pieces) > 1 {
		// What NewRequest does for a bytes.Reader: the length, and a copy
		// of the body for the redirects and retries of the transport.
		var n int64
		for _, p := range pieces {
			n += int64(len(p))
		}
		req.ContentLength = n
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(piecesReader(pieces)), nil }
		if n == 0 {
			req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		}
	}
	c.setHeaders(req.Header, pieces != nil, accept)
	hc := c.HTTP
	if hc == nil {
		hc = DefaultHTTP()
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if ue, ok := errors.AsType[*neturl.Error](err); ok {
			// The URL without what could be a secret: a key in the query
			// (Gemini's ?key=, Azure's and proxies' own), a password.
			ue.URL = RedactURL(ue.URL)
		}
		return nil, fmt.Errorf("%s: %w", c.Provider, err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		statusErr := c.StatusError(resp)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, statusErr
	}
	return resp, nil
}

// RedactURL returns u as errors may show it: each value of its query
// replaced by "REDACTED" (a query can carry an API key, as Gemini's
// ?key= does) and its password too (url.URL.Redacted). A u that does not
// parse loses everything after the path.
func RedactURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil {
		base, _, _ := strings.Cut(u, "?")
		base, _, _ = strings.Cut(base, "#")
		if i := strings.Index(base, "@"); i >= 0 {
			if j := strings.Index(base, "://"); j >= 0 && j < i {
				base = base[:j+3] + "REDACTED@" + base[i+1:]
			}
		}
		return base
	}
	if p.RawQuery != "" {
		q := p.Query()
		names := make([]string, 0, len(q))
		for k := range q {
			names = append(names, k)
		}
		slices.Sort(names)
		parts := make([]string, 0, len(names))
		for _, k := range names {
			parts = append(parts, neturl.QueryEscape(k)+"=REDACTED")
		}
		p.RawQuery = strings.Join(parts, "&")
	}
	p.Fragment, p.RawFragment = "", ""
	return p.Redacted()
}

// setHeaders sets the headers of every request, then the API's, then the
// caller's own.
func (c *Client) setHeaders(h http.Header, hasBody bool, accept string) {
	if hasBody {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Accept", accept)
	h.Set("User-Agent", c.UserAgent)
	if c.Header != nil {
		c.Header(h)
	}
	for k, vs := range c.Extra {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}

// Stream POSTs body to url asking for an event stream, as [Client.Send]
// does, and arranges for the response body to be closed as soon as ctx
// ends: the standard transport aborts reads then, but a caller-supplied
// RoundTripper may not, and closing the body unblocks any reader. Closing
// the body, which the caller must do, ends the arrangement.
func (c *Client) Stream(ctx context.Context, url string, body []byte) (*http.Response, error) {
	var pieces [][]byte
	if body != nil {
		pieces = [][]byte{body}
	}
	return c.StreamPieces(ctx, url, pieces)
}

// StreamPieces is [Client.Stream] with a body in pieces, sent one after the
// other as one body: a provider that keeps the encoding of a conversation's
// start sends it as it is, without copying it into each request. The
// pieces must not change until the response's body is closed; nil pieces
// send no body.
func (c *Client) StreamPieces(ctx context.Context, url string, pieces [][]byte) (*http.Response, error) {
	resp, err := c.send(ctx, http.MethodPost, url, pieces, "text/event-stream")
	if err != nil {
		return nil, err
	}
	rc := resp.Body
	resp.Body = &ctxBody{ReadCloser: rc, stop: context.AfterFunc(ctx, func() { rc.Close() })}
	return resp, nil
}

// joinBelow is the size up to which a body in pieces is joined into one
// before it is sent: copying it costs less than the write it saves. A
// larger body is sent in its pieces (several writes anyway), so that the
// cost of a turn does not grow with the conversation.
const joinBelow = 64 << 10

// piecesReader reads pieces one after the other, without changing them.
func piecesReader(pieces [][]byte) io.Reader {
	b := make(net.Buffers, len(pieces))
	copy(b, pieces)
	return &b
}

// BufferSize is the size of the write and the read buffer of each
// connection of [DefaultHTTP]. net/http's are 4 KiB: a request of more than
// that, headers and body, goes out in two writes or more, the second after
// a copy buffer of up to 32 KiB is allocated. A turn of a conversation
// whose tool results make a few KiB paid a system call and that buffer
// more than it needs to. Up to 64 KiB, a request goes out in one write.
const BufferSize = 64 << 10

// stdTransport is [http.DefaultTransport] as net/http made it: while a
// program leaves it and [http.DefaultClient] as they are, DefaultHTTP
// uses a clone of it; once it replaces them, it gets them.
var stdTransport = http.DefaultTransport

// bufferedHTTP is the client of DefaultHTTP, built at first use. It is a
// variable for the tests.
var bufferedHTTP = sync.OnceValue(func() *http.Client { return withBuffers(stdTransport) })

// withBuffers returns a client whose transport is a clone of rt with
// buffers of BufferSize, or nil if rt is not an [*http.Transport].
func withBuffers(rt http.RoundTripper) *http.Client {
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil
	}
	t = t.Clone()
	t.WriteBufferSize = BufferSize
	t.ReadBufferSize = BufferSize
	return &http.Client{Transport: t}
}

// DefaultHTTP returns the client of a provider given none: one like
// [http.DefaultClient], whose transport is a clone of
// [http.DefaultTransport] (proxies from the environment, TLS settings,
// HTTP/2, timeouts and the bounds on idle connections the same), made at
// first use, with buffers of [BufferSize] on each connection. Its
// connections are its own, not shared with http.DefaultClient. A program
// that has replaced http.DefaultTransport, or set any field of
// http.DefaultClient, gets http.DefaultClient, as before.
func DefaultHTTP() *http.Client {
	dc := http.DefaultClient
	if dc.Transport == nil && dc.CheckRedirect == nil && dc.Jar == nil && dc.Timeout == 0 && http.DefaultTransport == stdTransport {
		if hc := bufferedHTTP(); hc != nil {
			return hc
		}
	}
	return dc
}

// ctxBody is a response body that ctx closes when it ends.
type ctxBody struct {
	io.ReadCloser
	stop func() bool // stops ctx closing the body
}

// Close stops ctx closing the body, then closes it. It first reads what is
// left of the body, up to [drainBytes] and for at most [drainTime]: the end
// of a chunked response (after the stream's last event) is usually already
// there, and reading it lets the connection go back to the pool instead of
// being torn down, which would cost the next request a new connection (and
// a TLS handshake).
func (b *ctxBody) Close() error {
	if b.stop() {
		// ctx had not closed the body: it may still hold a tail.
		t := time.AfterFunc(drainTime, func() { b.ReadCloser.Close() })
		io.CopyN(io.Discard, b.ReadCloser, drainBytes)
		t.Stop()
	}
	return b.ReadCloser.Close()
}

// The bounds of the read before a stream's body is closed.
const (
	drainBytes = 4 << 10
	drainTime  = 50 * time.Millisecond
)

// GetJSON GETs url and decodes its JSON answer, of at most [MaxBody] bytes,
// into v. what names the answer in errors: "model list" gives
// "openai: decoding model list: ...".
func (c *Client) GetJSON(ctx context.Context, url, what string, v any) error {
	resp, err := c.Send(ctx, http.MethodGet, url, nil, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("%s: reading %s: %w", c.Provider, what, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: decoding %s: %w", c.Provider, what, err)
	}
	return nil
}

// MediaType returns the bare, lower-case media type of a Content-Type.
func MediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// HTMLPage reports whether resp is a web page rather than an API's answer
// (a wrong base URL, or a proxy's login page: sending the request again
// will not help), and if so returns at most the first n bytes of its body.
func HTMLPage(resp *http.Response, n int64) (page []byte, ok bool) {
	if MediaType(resp.Header.Get("Content-Type")) != "text/html" {
		return nil, false
	}
	page, _ = io.ReadAll(io.LimitReader(resp.Body, n))
	return page, true
}

// ErrorBody reads the body of an error response, or as much of it as is
// worth keeping. It does not close the body.
func ErrorBody(resp *http.Response) []byte {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return body
}

// Excerpt returns b as text to quote in an error: without surrounding
// white space, and at most n bytes of it (see [Truncate]).
func Excerpt(b []byte, n int) string {
	return Truncate(strings.TrimSpace(string(b)), n)
}

// Truncate shortens s to at most n bytes without splitting a rune, marking
// the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// RetryAfter returns how long an error response asks the client to wait:
// its Retry-After header, or for a 429 without one, what reset reads from
// the API's own rate-limit headers. As with [llm.ParseRetryAfter], the wait
// is never negative nor longer than [llm.RetryAfterLimit].
func RetryAfter(resp *http.Response, reset func(http.Header) time.Duration) time.Duration {
	wait := llm.ParseRetryAfter(resp.Header, time.Now())
	if wait == 0 && resp.StatusCode == http.StatusTooManyRequests {
		wait = min(max(reset(resp.Header), 0), llm.RetryAfterLimit)
	}
	return wait
}

// Seconds reads v, a number of seconds such as an API's rate-limit reset
// header may hold, as [llm.ParseRetryAfter] reads Retry-After: 0 for
// anything but a positive number (NaN and infinities included), and at
// most [llm.RetryAfterLimit].
func Seconds(v string) time.Duration {
	v = strings.TrimSpace(v)
	if _, err := strconv.ParseFloat(v, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0 // not a number: do not let Retry-After's date form read it
	}
	return llm.ParseRetryAfter(http.Header{"Retry-After": {v}}, time.Time{})
}

// Relay passes the chunks a provider's stream decoder produces to yield:
// next returns the chunks of one event and whether the stream is done. A
// decoding error ends the stream, reported as ctx's error when ctx has
// ended (the body was closed because of it); a consumer that stops ends
// it too.
func Relay(ctx context.Context, next func() (chunks []llm.Chunk, done bool, err error), yield func(llm.Chunk, error) bool) {
	for {
		chunks, done, err := next()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			yield(llm.Chunk{}, err)
			return
		}
		for _, ch := range chunks {
			if !yield(ch, nil) {
				return
			}
		}
		if done {
			return
		}
	}
}
