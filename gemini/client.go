package gemini

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// DefaultBaseURL is the endpoint a [Client] uses when BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// apiVersion is the version of the API the paths name.
const apiVersion = "v1beta"

// providerName is the Provider of every [llm.APIError] this package returns.
const providerName = "gemini"

// userAgent identifies this package to servers.
const userAgent = "hrns-gemini/1"

// A Client calls the Gemini API (POST
// {BaseURL}/v1beta/models/{model}:streamGenerateContent?alt=sse).
//
// The zero value is ready to use and talks to Google with no API key. Set
// the fields before the first call and do not change them afterwards; a
// Client is then safe for concurrent use.
type Client struct {
	// BaseURL is the API root, without the version: requests go to
	// BaseURL + "/v1beta/...". Empty means [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as the x-goog-api-key header. Empty sends none.
	APIKey string
	// Model is the model used when [llm.Request.Model] is empty, such as
	// "gemini-2.5-flash". A name holding a slash ("models/x",
	// "tunedModels/y") is used as the resource name as it is.
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
	// same name this package sets, including x-goog-api-key.
	Headers http.Header
	// IncludeThoughts asks for the model's thought summaries
	// (thinkingConfig.includeThoughts) on every request. A request with
	// [llm.Request.Reasoning] set asks for them too.
	IncludeThoughts bool
}

// Options configures [New]. Each field sets the [Client] field of the same
// name.
type Options struct {
	BaseURL         string
	APIKey          string
	Model           string
	HTTPClient      *http.Client
	Headers         http.Header
	IncludeThoughts bool
}

// New returns a client configured by opts. A nil opts gives the zero
// [Client].
func New(opts *Options) *Client {
	if opts == nil {
		return &Client{}
	}
	return &Client{
		BaseURL:         opts.BaseURL,
		APIKey:          opts.APIKey,
		Model:           opts.Model,
		HTTPClient:      opts.HTTPClient,
		Headers:         opts.Headers.Clone(),
		IncludeThoughts: opts.IncludeThoughts,
	}
}

// NewFromEnv returns a client configured from the environment: the key
// from GEMINI_API_KEY, or GOOGLE_API_KEY when that is unset or empty; the
// base URL from GEMINI_BASE_URL and the model from GEMINI_MODEL. Unset
// variables leave the defaults.
func NewFromEnv() *Client {
	key := os.Getenv("GEMINI_API_KEY")
	if key == "" {
		key = os.Getenv("GOOGLE_API_KEY")
	}
	return &Client{
		APIKey:  key,
		BaseURL: os.Getenv("GEMINI_BASE_URL"),
		Model:   os.Getenv("GEMINI_MODEL"),
	}
}

var (
	_ llm.Model       = (*Client)(nil)
	_ llm.ModelLister = (*Client)(nil)
)

// Stream sends req to the model's streamGenerateContent method and returns
// the answer as it arrives, as described by [llm.Model].
//
// req is rendered when Stream is called, so the caller may change it as soon
// as Stream returns; an error in it (such as content the API cannot take)
// is yielded by the iterator before anything is sent. Each range over the
// returned iterator sends the request again.
//
// With req.Conversation set, the contents its earlier requests sent are
// not encoded again (see [llm.Conversation]): a turn encodes the messages
// new since the last and the last content, which a later message may merge
// with, and the body is the same as without it.
func (c *Client) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	endpoint, body, err := c.prepare(req)
	return func(yield func(llm.Chunk, error) bool) {
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		c.stream(ctx, endpoint, body, yield)
	}
}

// prepare renders req, in pieces, and the URL it goes to.
func (c *Client) prepare(req *llm.Request) (endpoint string, body [][]byte, err error) {
	if req == nil {
		return "", nil, errNilRequest
	}
	model := req.Model
	if model == "" {
		model = c.Model
	}
	resource, err := modelResource(model)
	if err != nil {
		return "", nil, err
	}
	body, err = c.encodeRequest(req)
	if err != nil {
		return "", nil, err
	}
	return c.url("/" + resource + ":streamGenerateContent?alt=sse"), body, nil
}

// modelResource returns the resource name of a model, escaped for a URL
// path: "models/NAME" for a bare name, the name itself when it holds a
// slash.
func modelResource(model string) (string, error) {
	if model == "" {
		return "", fmt.Errorf("%s: no model: set Request.Model or Client.Model", providerName)
	}
	segs := strings.Split(model, "/")
	if len(segs) == 1 {
		segs = []string{"models", model}
	}
	for i, s := range segs {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, ":?#") {
			return "", fmt.Errorf("%s: invalid model name %q", providerName, model)
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/"), nil
}

// stream sends one rendered request, in pieces, and yields its chunks.
func (c *Client) stream(ctx context.Context, endpoint string, body [][]byte, yield func(llm.Chunk, error) bool) {
	resp, err := c.api().StreamPieces(ctx, endpoint, body)
	if err != nil {
		yield(llm.Chunk{}, err)
		return
	}
	defer resp.Body.Close()

	if page, ok := httpapi.HTMLPage(resp, httpapi.MaxErrorText+1); ok {
		// A proxy, a login page or a wrong BaseURL: not worth a retry.
		yield(llm.Chunk{}, fmt.Errorf("%s: %s answered with an HTML page, not an event stream (is BaseURL right?): %s",
			providerName, redactKey(endpoint), httpapi.Excerpt(page, httpapi.MaxErrorText)))
		return
	}

	var d decoder
	d.init(resp.Body, httpapi.MediaType(resp.Header.Get("Content-Type")) == "application/json")
	d.requestID = requestID(resp.Header)
	httpapi.Relay(ctx, func() ([]llm.Chunk, bool, error) {
		chunks, err := d.next()
		return chunks, d.done, err
	}, yield)
}

// redactKey returns u without its query, where a key could be.
func redactKey(u string) string {
	base, _, _ := strings.Cut(u, "?")
	return base
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

// url joins the base URL, the API version and an endpoint path.
func (c *Client) url(path string) string {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + "/" + apiVersion + path
}

// setHeaders sets the authentication header of every request.
func (c *Client) setHeaders(h http.Header) {
	if c.APIKey != "" {
		h.Set("X-Goog-Api-Key", c.APIKey)
	}
}

// errNilRequest is returned by Stream for a nil request.
var errNilRequest = errors.New(providerName + ": nil request")
