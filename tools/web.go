package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/loop"
)

// WebOptions configure web_fetch, the tool of [Web]. A nil *WebOptions, and
// the zero value of each field, mean the documented defaults.
type WebOptions struct {
	// Timeout bounds one fetch, redirects and reading the body included.
	// 0 means 30 seconds.
	Timeout time.Duration
	// MaxBodyBytes caps the bytes of a response body that are read; a
	// longer body is cut there, and the result says so. 0 means 2 MiB.
	MaxBodyBytes int64
	// MaxTextBytes caps the text returned to the model, after HTML is
	// converted to Markdown; a longer text is cut, and the result says
	// so. It also bounds the conversion: an HTML page is cut once the
	// Markdown it would give passes about twice as much (see
	// [HTMLToMarkdown]). 0 means 64 KiB.
	MaxTextBytes int
	// MaxRedirects caps the redirects followed. 0 means 5; a negative
	// value follows none.
	MaxRedirects int
	// UserAgent is sent with every request. "" means "hrns-web-fetch/1".
	UserAgent string
	// AllowPrivate lets web_fetch connect to addresses that are not on the
	// public internet: loopback, private, link-local, unspecified,
	// multicast, reserved and cloud metadata addresses. By default they
	// are refused, which keeps a model from reaching services on the
	// machine or its network. Tests against httptest servers need it.
	AllowPrivate bool
	// Allow, when set, lets the addresses it accepts through the policy:
	// an operator's allow-list (hrns run --web-allow 127.0.0.1:8080; see
	// netpolicy.ParseAllowList), judged on the address dialled.
	Allow func(netip.AddrPort) bool
	// RefusalHint, when set, ends the message of a refused address: the
	// way out for the person who runs the tool (the CLI names its flag).
	RefusalHint string
	// Logger receives what the model is not told of a failed fetch: a
	// refusal of the address policy with the address the URL's name
	// resolved to, a failed connection or TLS handshake with the
	// transport's full error (a certificate's names among them). It is
	// called with the call's context (InfoContext), so that a handler can
	// add what the context says (hrns serve adds the session); nil
	// discards them.
	Logger *slog.Logger

	// exempt, when set, lets single addresses through the default policy
	// (tests only).
	exempt func(netip.AddrPort) bool
}

func (o *WebOptions) withDefaults() WebOptions {
	var v WebOptions
	if o != nil {
		v = *o
	}
	if v.Timeout <= 0 {
		v.Timeout = 30 * time.Second
	}
	if v.MaxBodyBytes <= 0 {
		v.MaxBodyBytes = 2 << 20
	}
	if v.MaxTextBytes <= 0 {
		v.MaxTextBytes = 64 << 10
	}
	if v.MaxRedirects == 0 {
		v.MaxRedirects = 5
	}
	if v.UserAgent == "" {
		v.UserAgent = "hrns-web-fetch/1"
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// Web returns web_fetch, a tool that fetches a URL with HTTP GET and
// returns its status and its body as text, HTML converted to Markdown.
//
// Only http and https URLs are fetched. Unless opts.AllowPrivate is set,
// every connection, the first one and those of redirects, is checked at
// connect time, after DNS resolution: addresses that are not on the public
// internet are refused (see [WebOptions.AllowPrivate]), so that neither a
// redirect nor a DNS answer that changes between lookups can lead the
// request to them. Proxies from the environment are not used, since a
// proxy would connect on the tool's behalf, unchecked. web_fetch is
// Concurrent and needs no approval.
func Web(opts *WebOptions) *loop.Toolset {
	w := newWeb(opts.withDefaults())
	return loop.MustToolset(w.tool())
}

type web struct {
	o      WebOptions
	client *http.Client
}

func newWeb(o WebOptions) *web {
	exempt := o.exempt
	if o.Allow != nil {
		allow, test := o.Allow, o.exempt
		exempt = func(ap netip.AddrPort) bool { return allow(ap) || test != nil && test(ap) }
	}
	dialer := newDialer(o.AllowPrivate, exempt)
	dialer.Timeout = o.Timeout
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
	}
	w := &web{o: o}
	w.client = &http.Client{
		Transport: transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > max(o.MaxRedirects, 0) {
				return fmt.Errorf("stopped after %d redirects", max(o.MaxRedirects, 0))
			}
			return checkURL(req.URL)
		},
	}
	return w
}

type webFetchArgs struct {
	URL string `json:"url" jsonschema:"the http or https URL to fetch"`
}

func (w *web) tool() *loop.ToolDef {
	where := " on the public internet"
	if w.o.AllowPrivate {
		where = ""
	}
	desc := fmt.Sprintf("Fetches a web page or file with HTTP GET and returns the final URL, the status code and the "+
		"content as text: HTML is converted to Markdown (links, headings, lists and code kept; scripts, styles and "+
		"navigation dropped), other text is returned as it is, binary content is refused. Only http and https URLs"+
		"%s are fetched. The text is cut after %s.", where, size(w.o.MaxTextBytes))
	def := loop.NewTool("web_fetch", desc, func(ctx context.Context, in webFetchArgs) (*loop.Output, error) {
		return w.fetch(ctx, in.URL)
	})
	def.Concurrent = true
	def.Timeout = w.o.Timeout + 5*time.Second
	// It reads a page and changes nothing here; rules match its URL
	// (web_fetch(domain:go.dev)).
	def.Access, def.Subject = loop.AccessRead, loop.Subject{Kind: loop.SubjectURL, Argument: "url"}
	return def
}

// checkURL refuses URLs web_fetch does not fetch: other schemes, no host,
// credentials, and numeric hosts in loose notations. Addresses are checked
// when connecting.
func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("web_fetch only fetches http and https URLs, not %q", u.Scheme+":")
	}
	if u.Hostname() == "" {
		return errors.New("the URL has no host")
	}
	if u.User != nil {
		return errors.New("web_fetch does not send credentials in URLs")
	}
	return checkHost(u.Hostname())
}

func (w *web) fetch(ctx context.Context, raw string) (*loop.Output, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a valid URL: %v", err)
	}
	if err := checkURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("not a valid URL: %v", err)
	}
	req.Header.Set("User-Agent", w.o.UserAgent)
	req.Header.Set("Accept", "text/html, text/markdown, text/plain, application/json, application/xhtml+xml, */*;q=0.5")
	resp, err := w.client.Do(req)
	if err != nil {
		told := explainFetchError(err, w.o.RefusalHint)
		w.logFailure(ctx, err, told)
		return nil, told
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, w.o.MaxBodyBytes+1))
	if err != nil && len(body) == 0 {
		told := fmt.Errorf("reading %s: %v", resp.Request.URL, explainFetchError(err, w.o.RefusalHint))
		w.logFailure(ctx, err, told)
		return nil, told
	}
	readErr := err
	bodyCut := int64(len(body)) > w.o.MaxBodyBytes
	if bodyCut {
		body = body[:w.o.MaxBodyBytes]
	}

	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %s\n", resp.Request.URL, resp.Status)
	ctype := resp.Header.Get("Content-Type")
	if ctype != "" {
		fmt.Fprintf(&b, "Content-Type: %s\n", ctype)
	}
	mediatype, _, _ := mime.ParseMediaType(ctype)
	if mediatype == "" {
		mediatype = strings.ToLower(strings.TrimSpace(strings.Split(http.DetectContentType(body), ";")[0]))
	}
	var (
		text    string
		textCut bool // the HTML converter stopped at MaxTextBytes
	)
	switch {
	case mediatype == "text/html" || mediatype == "application/xhtml+xml":
		md, err := HTMLToMarkdown(ctx, string(body), resp.Request.URL, w.o.MaxTextBytes)
		if err != nil {
			return nil, fmt.Errorf("converting %s to Markdown: %w", resp.Request.URL, err)
		}
		if md.Title != "" {
			fmt.Fprintf(&b, "Title: %s\n", md.Title)
		}
		text, textCut = md.Text, md.Cut
	case isTextType(mediatype):
		if looksBinary(body[:min(len(body), sniffLen)], len(body) > sniffLen) {
			return w.result(resp, &b, "[the body is not valid UTF-8 text; it was not returned]\n"), nil
		}
		text = strings.ToValidUTF8(string(body), "\uFFFD")
	default:
		fmt.Fprintf(&b, "\n[%d bytes of %s content, which is not text; it was not returned]\n", len(body), mediatype)
		return w.result(resp, &b, ""), nil
	}
	b.WriteByte('\n')
	switch {
	case len(text) > w.o.MaxTextBytes:
		cut := cutString(text, w.o.MaxTextBytes)
		b.WriteString(cut)
		fmt.Fprintf(&b, "\n\n[text cut at %d of %d bytes]", len(cut), len(text))
	case textCut:
		b.WriteString(text)
		fmt.Fprintf(&b, "\n\n[text cut at %d bytes; the page holds more]", len(text))
	default:
		b.WriteString(text)
	}
	if bodyCut {
		fmt.Fprintf(&b, "\n\n[the response body was cut at %d bytes]", w.o.MaxBodyBytes)
	} else if readErr != nil {
		fmt.Fprintf(&b, "\n\n[reading the body failed after %d bytes: %v]", len(body), readErr)
	}
	return w.result(resp, &b, ""), nil
}

// result returns the text in b, marked as an error for a 4xx or 5xx status.
func (w *web) result(resp *http.Response, b *strings.Builder, extra string) *loop.Output {
	b.WriteString(extra)
	out := loop.TextOutput(strings.TrimRight(b.String(), "\n"))
	out.IsError = resp.StatusCode >= 400
	return out
}

func isTextType(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"):
		return true
	case mt == "application/json", mt == "application/xml", mt == "application/javascript",
		mt == "application/x-yaml", mt == "application/yaml", mt == "application/toml",
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return false
}

// logFailure writes a failed fetch to the log when the model was told
// less than the error says: a refusal of the address policy (with the
// address refused), another failure that was reworded (a connection, a
// TLS certificate). The URL's query values are left out
// (httpapi.RedactURL).
func (w *web) logFailure(ctx context.Context, err, told error) {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		ue.URL = httpapi.RedactURL(ue.URL)
	}
	full := err.Error()
	if _, refused := errors.AsType[*netpolicy.BlockedError](err); refused {
		w.o.Logger.InfoContext(ctx, "web_fetch: the address policy refused a URL", "tool", "web_fetch", "err", full, "told", told.Error())
		return
	}
	if full != told.Error() {
		w.o.Logger.InfoContext(ctx, "web_fetch: a fetch failed", "tool", "web_fetch", "err", full, "told", told.Error())
	}
}

// explainFetchError unwraps the errors of the HTTP client to what the
// model needs: a refused address, a timeout, or the cause.
func explainFetchError(err error, hint string) error {
	if be, ok := errors.AsType[*netpolicy.BlockedError](err); ok {
		return blockedError(be, hint)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("fetching %s timed out", ue.URL)
		}
		if text, ok := netpolicy.Describe(ue.Err); ok {
			// Without the address the name resolved to.
			return fmt.Errorf("fetching %s: %s", ue.URL, text)
		}
		return fmt.Errorf("fetching %s: %v", ue.URL, ue.Err)
	}
	if text, ok := netpolicy.Describe(err); ok {
		return errors.New(text)
	}
	return err
}
