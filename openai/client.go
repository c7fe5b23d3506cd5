package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// DefaultBaseURL is the endpoint a [Client] uses when BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// providerName is the Provider of every [llm.APIError] this package returns.
const providerName = "openai"

// userAgent identifies this package to servers.
const userAgent = "hrns-openai/1"

// A Client calls an OpenAI-compatible Chat Completions endpoint.
//
// The zero value is ready to use and talks to OpenAI with no API key. Set
// the fields before the first call and do not change them afterwards; a
// Client is then safe for concurrent use.
type Client struct {
	// BaseURL is the API root, such as "http://localhost:11434/v1" for
	// Ollama. Requests go to BaseURL + "/chat/completions" and
	// BaseURL + "/models". Empty means [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header, as local servers expect.
	APIKey string
	// Model is the model used when [llm.Request.Model] is empty.
	Model string
	// HTTPClient sends the requests. Nil means [http.DefaultClient]. A
	// client with a Timeout also bounds how long a stream may run, so
	// prefer per-request contexts for deadlines.
	HTTPClient *http.Client
	// Headers are added to every request. They replace any header of the
	// same name this package sets, including Authorization.
	Headers http.Header
	// Organization, when set, is sent as the OpenAI-Organization header.
	Organization string
	// UseMaxCompletionTokens sends [llm.Request.MaxTokens] as
	// max_completion_tokens instead of max_tokens. OpenAI's reasoning models
	// require it; most other compatible servers only know max_tokens.
	UseMaxCompletionTokens bool
}

// Options configures [New]. Each field sets the [Client] field of the same
// name.
type Options struct {
	BaseURL                string
	APIKey                 string
	Model                  string
	HTTPClient             *http.Client
	Headers                http.Header
	Organization           string
	UseMaxCompletionTokens bool
}

// New returns a client configured by opts. A nil opts gives the zero
// [Client].
func New(opts *Options) *Client {
	if opts == nil {
		return &Client{}
	}
	return &Client{
		BaseURL:                opts.BaseURL,
		APIKey:                 opts.APIKey,
		Model:                  opts.Model,
		HTTPClient:             opts.HTTPClient,
		Headers:                opts.Headers.Clone(),
		Organization:           opts.Organization,
		UseMaxCompletionTokens: opts.UseMaxCompletionTokens,
	}
}

// NewFromEnv returns a client configured from the environment variables
// OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL. Unset variables leave the
// defaults.
func NewFromEnv() *Client {
	return &Client{
		APIKey:  os.Getenv("OPENAI_API_KEY"),
		BaseURL: os.Getenv("OPENAI_BASE_URL"),
		Model:   os.Getenv("OPENAI_MODEL"),
	}
}

var (
	_ llm.Model       = (*Client)(nil)
	_ llm.ModelLister = (*Client)(nil)
)

// Stream sends req to {BaseURL}/chat/completions and returns the answer as
// it arrives, as described by [llm.Model].
//
// req is rendered when Stream is called, so the caller may change it as soon
// as Stream returns; an error in it (such as content the endpoint cannot
// take) is yielded by the iterator before anything is sent. Each range over
// the returned iterator sends the request again.
func (c *Client) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	body, err := c.marshalRequest(req)
	return func(yield func(llm.Chunk, error) bool) {
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		c.stream(ctx, body, yield)
	}
}

// stream sends one rendered request and yields its chunks.
func (c *Client) stream(ctx context.Context, body []byte, yield func(llm.Chunk, error) bool) {
	resp, err := c.send(ctx, http.MethodPost, "/chat/completions", body, "text/event-stream")
	if err != nil {
		yield(llm.Chunk{}, err)
		return
	}
	defer resp.Body.Close()
	// The transport aborts reads when ctx ends, but a caller-supplied
	// RoundTripper may not: closing the body unblocks any reader.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()

	ct := resp.Header.Get("Content-Type")
	if mediaType(ct) == "text/html" {
		// A proxy, a login page or a wrong BaseURL: not worth a retry.
		page, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorText+1))
		yield(llm.Chunk{}, fmt.Errorf("openai: %s answered with an HTML page, not an event stream (is BaseURL right?): %s",
			c.url("/chat/completions"), truncate(strings.TrimSpace(string(page)), maxErrorText)))
		return
	}

	var d decoder
	d.init(resp.Body, mediaType(ct) == "application/json")
	d.requestID = requestID(resp.Header)
	for {
		chunks, err := d.next()
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
		if d.done {
			return
		}
	}
}

// send performs one HTTP request. It returns an *llm.APIError for an HTTP
// status of 400 or more, and ctx's error if ctx ended.
func (c *Client) send(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), rd)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	c.setHeaders(req.Header, body != nil, accept)
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("openai: %w", err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		apiErr := errorFromResponse(resp)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, apiErr
	}
	return resp, nil
}

// url joins the base URL and an endpoint path.
func (c *Client) url(path string) string {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + path
}

// setHeaders sets the headers of every request, then the caller's own.
func (c *Client) setHeaders(h http.Header, hasBody bool, accept string) {
	if hasBody {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Accept", accept)
	h.Set("User-Agent", userAgent)
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
	if c.Organization != "" {
		h.Set("OpenAI-Organization", c.Organization)
	}
	for k, vs := range c.Headers {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}

// mediaType returns the lower-case media type of a Content-Type header.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// errNilRequest is returned by Stream for a nil request.
var errNilRequest = errors.New("openai: nil request")
