package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/internal/openaimodels"
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
	// HTTPClient sends the requests, as given. Nil means a client like
	// [http.DefaultClient] whose transport is a clone of
	// [http.DefaultTransport] (proxies from the environment, TLS, timeouts
	// kept) with buffers of 64 KiB per connection, so that a request of up
	// to 64 KiB goes out in one write; it is http.DefaultClient itself if
	// the program has replaced http.DefaultTransport or set a field of
	// http.DefaultClient. A client with a Timeout also bounds how long a
	// stream may run, so prefer per-request contexts for deadlines.
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
//
// With req.Conversation set, the messages its earlier requests sent are not
// encoded again (see [llm.Conversation]): a turn encodes only the messages
// new since the last, and the body is the same as without it.
func (c *Client) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	body, err := c.encodeRequest(req)
	return func(yield func(llm.Chunk, error) bool) {
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		c.stream(ctx, body, yield)
	}
}

// stream sends one rendered request, in pieces, and yields its chunks.
func (c *Client) stream(ctx context.Context, body [][]byte, yield func(llm.Chunk, error) bool) {
	resp, err := c.api().StreamPieces(ctx, c.url("/chat/completions"), body)
	if err != nil {
		yield(llm.Chunk{}, err)
		return
	}
	defer resp.Body.Close()

	if page, ok := httpapi.HTMLPage(resp, httpapi.MaxErrorText+1); ok {
		// A proxy, a login page or a wrong BaseURL: not worth a retry.
		yield(llm.Chunk{}, fmt.Errorf("openai: %s answered with an HTML page, not an event stream (is BaseURL right?): %s",
			httpapi.RedactURL(c.url("/chat/completions")), httpapi.Excerpt(page, httpapi.MaxErrorText)))
		return
	}

	var d decoder
	d.init(resp.Body, httpapi.MediaType(resp.Header.Get("Content-Type")) == "application/json")
	defer d.sse.Release() // its line buffer, for the next stream
	d.requestID = requestID(resp.Header)
	httpapi.Relay(ctx, func() ([]llm.Chunk, bool, error) {
		chunks, err := d.next()
		return chunks, d.done, err
	}, yield)
}

// api returns the sender of c's HTTP requests.
func (c *Client) api() *httpapi.Client {
	return &httpapi.Client{
		Provider:    providerName,
		HTTP:        c.HTTPClient,
		UserAgent:   userAgent,
		Header:      c.setHeaders,
		Extra:       c.Headers,
		StatusError: func(resp *http.Response) error { return errorFromResponse(resp) },
	}
}

// url joins the base URL and an endpoint path.
func (c *Client) url(path string) string {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + path
}

// setHeaders sets the authentication headers of every request.
func (c *Client) setHeaders(h http.Header) {
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
	if c.Organization != "" {
		h.Set("OpenAI-Organization", c.Organization)
	}
}

// errNilRequest is returned by Stream for a nil request.
var errNilRequest = errors.New("openai: nil request")

// ReasoningSupport reports the reasoning settings of model as OpenAI's
// model families take them (reasoning_effort's levels); a model of
// another vendor behind a compatible server is not Known. It makes the
// client an [llm.ReasoningReporter].
func (c *Client) ReasoningSupport(model string) llm.ReasoningSupport {
	return openaimodels.ReasoningSupport(cmp.Or(model, c.Model))
}
