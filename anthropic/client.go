package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// DefaultBaseURL is the endpoint a [Client] uses when BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the output cap sent when neither the request nor the
// client sets one. The Messages API requires max_tokens on every request.
const DefaultMaxTokens = 8192

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

// providerName is the Provider of every [llm.APIError] this package returns.
const providerName = "anthropic"

// userAgent identifies this package to servers.
const userAgent = "hrns-anthropic/1"

// A Client calls the Anthropic Messages API, or a server that speaks it.
//
// The zero value is ready to use and talks to Anthropic with no API key. Set
// the fields before the first call and do not change them afterwards; a
// Client is then safe for concurrent use.
type Client struct {
	// BaseURL is the API root without the version, such as
	// "https://api.anthropic.com". Requests go to BaseURL + "/v1/messages"
	// and BaseURL + "/v1/models". Empty means [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as the x-api-key header. Empty sends none.
	APIKey string
	// Model is the model used when [llm.Request.Model] is empty.
	Model string
	// MaxTokens is the output cap used when [llm.Request.MaxTokens] is 0.
	// 0 means [DefaultMaxTokens].
	MaxTokens int
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
	// same name this package sets, including x-api-key and
	// anthropic-version. Use them for anthropic-beta flags.
	Headers http.Header
	// Cache says where requests carry prompt-caching breakpoints. Nil
	// means [DefaultCache]: the system prompt, the tools and the
	// conversation are all cached. Set it to &CachePolicy{} to send no
	// breakpoints.
	Cache *CachePolicy
	// Thinking, when set, is sent as the request's thinking configuration.
	// Nil sends none and leaves thinking to the model's default.
	Thinking *Thinking
	// Effort, when set, is sent as output_config.effort ("low", "medium",
	// "high" or "max" on models that support it).
	Effort string
}

// CachePolicy says which parts of a request carry a prompt-caching
// breakpoint (cache_control {"type": "ephemeral"}). A breakpoint caches the
// whole prefix of the request up to it: tools, then system, then messages.
// The full policy uses all four breakpoints the API allows.
type CachePolicy struct {
	// System marks the last block of the system prompt.
	System bool
	// Tools marks the last tool definition.
	Tools bool
	// Conversation marks the last content block of the last message, so
	// that the next turn of an agent loop reads the whole conversation so
	// far from the cache; and the last block of the user turn before the
	// last assistant turn, where the previous request ended, so that this
	// request reads what that one wrote, however long the model's turn.
	Conversation bool
	// TTL is the cache lifetime, "5m" or "1h"; empty means the API's
	// default (5 minutes).
	TTL string
}

// DefaultCache is the caching of a [Client] whose Cache is nil.
var DefaultCache = CachePolicy{System: true, Tools: true, Conversation: true}

// ThinkingType selects how the model thinks before it answers.
type ThinkingType string

// Thinking types.
const (
	// ThinkingAdaptive lets the model decide when and how much to think;
	// tune it with [Client.Effort]. Newer models support only this mode.
	ThinkingAdaptive ThinkingType = "adaptive"
	// ThinkingEnabled is extended thinking with a fixed budget of
	// [Thinking.BudgetTokens]. Older models support only this mode.
	ThinkingEnabled ThinkingType = "enabled"
	// ThinkingDisabled turns thinking off.
	ThinkingDisabled ThinkingType = "disabled"
)

// Thinking configures the model's thinking, sent as the request's
// "thinking" object. Thinking blocks come back as [llm.PartReasoning] parts
// carrying the signature the API needs to accept them on later turns.
type Thinking struct {
	Type ThinkingType
	// BudgetTokens is the thinking budget of [ThinkingEnabled]: at least
	// 1024, and less than the request's max tokens.
	BudgetTokens int
	// Display, when set, says how thinking is returned: "summarized" or
	// "omitted" (signatures only, which are still sent back).
	Display string
}

// Options configures [New]. Each field sets the [Client] field of the same
// name.
type Options struct {
	BaseURL    string
	APIKey     string
	Model      string
	MaxTokens  int
	HTTPClient *http.Client
	Headers    http.Header
	Cache      *CachePolicy
	Thinking   *Thinking
	Effort     string
}

// New returns a client configured by opts. A nil opts gives the zero
// [Client].
func New(opts *Options) *Client {
	if opts == nil {
		return &Client{}
	}
	c := &Client{
		BaseURL:    opts.BaseURL,
		APIKey:     opts.APIKey,
		Model:      opts.Model,
		MaxTokens:  opts.MaxTokens,
		HTTPClient: opts.HTTPClient,
		Headers:    opts.Headers.Clone(),
		Effort:     opts.Effort,
	}
	if opts.Cache != nil {
		cp := *opts.Cache
		c.Cache = &cp
	}
	if opts.Thinking != nil {
		th := *opts.Thinking
		c.Thinking = &th
	}
	return c
}

// NewFromEnv returns a client configured from the environment variables
// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and ANTHROPIC_MODEL. Unset variables
// leave the defaults.
func NewFromEnv() *Client {
	return &Client{
		APIKey:  os.Getenv("ANTHROPIC_API_KEY"),
		BaseURL: os.Getenv("ANTHROPIC_BASE_URL"),
		Model:   os.Getenv("ANTHROPIC_MODEL"),
	}
}

var (
	_ llm.Model       = (*Client)(nil)
	_ llm.ModelLister = (*Client)(nil)
)

// Stream sends req to {BaseURL}/v1/messages and returns the answer as it
// arrives, as described by [llm.Model].
//
// req is rendered when Stream is called, so the caller may change it as soon
// as Stream returns; an error in it (such as content the API cannot take) is
// yielded by the iterator before anything is sent. Each range over the
// returned iterator sends the request again.
//
// With req.Conversation set, the turns its earlier requests sent are not
// encoded again (see [llm.Conversation]): a turn encodes the messages new
// since the last and the last turns, whose cache breakpoints move, and the
// body is the same as without it.
func (c *Client) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	body, beta, err := c.encodeRequest(req)
	return func(yield func(llm.Chunk, error) bool) {
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		c.stream(ctx, body, beta, yield)
	}
}

// stream sends one rendered request, in pieces, and yields its chunks.
func (c *Client) stream(ctx context.Context, body [][]byte, beta string, yield func(llm.Chunk, error) bool) {
	resp, err := c.api(beta).StreamPieces(ctx, c.url("/v1/messages"), body)
	if err != nil {
		yield(llm.Chunk{}, err)
		return
	}
	defer resp.Body.Close()

	if page, ok := httpapi.HTMLPage(resp, httpapi.MaxErrorText); ok {
		// A web page, not the API: a wrong BaseURL, or a proxy's login
		// page. Sending the request again will not help.
		yield(llm.Chunk{}, fmt.Errorf("anthropic: %s answered with an HTML page, not an event stream (is BaseURL right?): %q",
			httpapi.RedactURL(c.url("/v1/messages")), httpapi.Excerpt(page, 200)))
		return
	}
	var d decoder
	d.init(resp.Body, httpapi.MediaType(resp.Header.Get("Content-Type")) == "application/json")
	d.requestID = requestID(resp.Header)
	for {
		chunks, err := d.next()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = ctxErr
			}
			if err != io.EOF {
				yield(llm.Chunk{}, err)
			}
			return
		}
		for _, ch := range chunks {
			if !yield(ch, nil) || ch.Kind == llm.ChunkDone {
				// Nothing follows the done chunk, not even an
				// error of a context cancelled after it.
				return
			}
		}
	}
}

// api returns the sender of c's HTTP requests; beta, if set, is an
// anthropic-beta flag the request needs, sent besides those of c.Headers.
func (c *Client) api(beta string) *httpapi.Client {
	extra := c.Headers
	header := c.setHeaders
	if beta != "" {
		if v := c.Headers.Values("Anthropic-Beta"); len(v) > 0 {
			extra = c.Headers.Clone()
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, beta) }) {
				extra.Add("Anthropic-Beta", beta)
			}
		} else {
			header = func(h http.Header) {
				c.setHeaders(h)
				h.Set("Anthropic-Beta", beta)
			}
		}
	}
	return &httpapi.Client{
		Provider:    providerName,
		HTTP:        c.HTTPClient,
		UserAgent:   userAgent,
		Header:      header,
		Extra:       extra,
		StatusError: c.statusError,
	}
}

// statusError builds the error for an HTTP status of 400 or more, with a
// hint when BaseURL holds the version the client adds itself.
func (c *Client) statusError(resp *http.Response) error {
	apiErr := errorFromResponse(resp)
	if base := strings.TrimRight(c.BaseURL, "/"); resp.StatusCode == http.StatusNotFound && strings.HasSuffix(base, "/v1") {
		return fmt.Errorf("anthropic: BaseURL %q ends in /v1, which the client adds itself: %w", c.BaseURL, apiErr)
	}
	return apiErr
}

// url joins the base URL and an endpoint path.
func (c *Client) url(path string) string {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + path
}

// setHeaders sets the version and authentication headers of every request.
func (c *Client) setHeaders(h http.Header) {
	h.Set("Anthropic-Version", APIVersion)
	if c.APIKey != "" {
		h.Set("X-Api-Key", c.APIKey)
	}
}

// errNilRequest is returned by Stream for a nil request.
var errNilRequest = errors.New("anthropic: nil request")
