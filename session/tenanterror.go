package session

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// What a session's caller reads of a failed model request.
//
// An API key is a tenant of the deployment: the model endpoints, their
// addresses and their paths are the operator's (docs/serve.md, "Tenants
// do not see the deployment"). The errors of the library keep the full
// URL, for the person at the terminal of `hrns run`; the runtime turns
// them into tenant text here, wherever it records an error a caller
// reads (an error_event, the session's error field, and so the page,
// the event streams and the webhooks' payloads), and writes the full
// error to the server's log.
//
//   - The provider answered with an error (an *llm.APIError): its HTTP
//     status, type and message, which are the caller's business (their
//     request failed), clipped to maxTenantError.
//   - The request got no answer (the transport's *url.Error,
//     *net.OpError, *net.DNSError): what happened in words ("the model
//     server could not be reached (connection refused)", "timed out"),
//     without the URL, host or address.
//   - An MCP server's stored values that do not decrypt (an
//     *undecryptableError, whose text names the operator's key):
//     undecryptableText, fixed.
//   - Anything else (an environment that could not be set up on this
//     server, most often): its text, with URLs, addresses, host:port
//     pairs and the server's file paths taken out (scrubAddresses),
//     clipped.

// maxTenantError bounds the text of a model error a caller reads: a
// provider's message is untrusted text and may be long.
const maxTenantError = 2000

// tenantError returns what a session's caller reads of err, an error of
// the run (a model request's, most often). "" for nil.
func tenantError(err error) string {
	if err == nil {
		return ""
	}
	if _, ok := errors.AsType[*undecryptableError](err); ok {
		return undecryptableText
	}
	full := err.Error()
	text := ""
	if _, ok := errors.AsType[*llm.APIError](err); !ok {
		if what, ok := unreached(err); ok {
			text = what
			if errors.Is(err, loop.ErrRetriesExhausted) {
				// "model request retries exhausted after 3 attempts": the
				// loop's words, before the first colon.
				prefix := loop.ErrRetriesExhausted.Error()
				if head, _, ok := strings.Cut(full, ": "); ok && strings.HasPrefix(head, prefix) {
					prefix = head
				}
				text = prefix + ": " + text
			}
		}
	}
	if text == "" {
		text = scrubAddresses(scrubPaths(err, full))
	}
	return clip(text, maxTenantError)
}

// unreached describes err when the model request got no answer from
// the server (the connection, the name, TLS, a timeout), without naming
// the server; ok is false when err is something else.
func unreached(err error) (string, bool) {
	_, isURL := errors.AsType[*url.Error](err)
	_, isOp := errors.AsType[*net.OpError](err)
	dns, isDNS := errors.AsType[*net.DNSError](err)
	if !isURL && !isOp && !isDNS {
		return "", false
	}
	const base = "the model server could not be reached"
	var ne net.Error
	switch {
	case isDNS && dns.IsNotFound:
		return base + " (its name does not resolve)", true
	case isDNS:
		return base + " (looking up its name failed)", true
	case errors.As(err, &ne) && ne.Timeout():
		return "the model request timed out", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return base + " (connection refused)", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return base + " (no route to it)", true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection to the model server was lost", true
	}
	if text, ok := netpolicy.DescribeTLS(err); ok {
		// Not the x509 text, which lists the names in its certificate.
		return base + " (" + text + ")", true
	}
	return base, true
}

// addressShapes are the shapes of an address in an error's text, built on
// first use (no package-level regexp: TestStartupInitWork).
var addressShapes = sync.OnceValue(func() (r struct{ url, netAddr, lookup, ipv4, ipv6, path *regexp.Regexp }) {
	r.url = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>]+`)
	// "dial tcp 10.0.0.5:11434", "read tcp 10.0.0.1:5000->10.0.0.5:11434"
	r.netAddr = regexp.MustCompile(`\b(tcp|udp)[46]? [^\s]+?(:\s|$|\s)`)
	// "lookup ollama.internal on 10.0.0.2:53"
	r.lookup = regexp.MustCompile(`\blookup [^\s:]+( on [^\s]+?)?(:\s|$|\s)`)
	r.ipv4 = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?\b`)
	r.ipv6 = regexp.MustCompile(`\[[0-9A-Fa-f:.%]*:[0-9A-Fa-f:.%]*\](:\d{1,5})?`)
	// "mkdir /srv/hrns/profiles/x: not a directory": an absolute path,
	// at the start of a word (URLs are taken out first).
	r.path = regexp.MustCompile(`(^|[\s"'(=\[])/[A-Za-z0-9._~@%+\-][^\s"'<>:;,)]*`)
	return r
})

// scrubAddresses returns s without the URLs, network addresses and
// looked-up names in it, each replaced by a word saying what was there.
func scrubAddresses(s string) string {
	re := addressShapes()
	s = re.url.ReplaceAllString(s, "[URL]")
	s = re.netAddr.ReplaceAllString(s, "$1 [address]$2")
	s = re.lookup.ReplaceAllString(s, "lookup [name]$2")
	s = re.ipv4.ReplaceAllString(s, "[address]")
	s = re.ipv6.ReplaceAllString(s, "[address]")
	s = re.path.ReplaceAllString(s, "$1[path]")
	return s
}

// scrubPaths returns full, the text of err, without the absolute file
// paths of err's *fs.PathError and *os.LinkError (which may hold spaces,
// where the shape of a path in scrubAddresses stops).
func scrubPaths(err error, full string) string {
	var paths []string
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		paths = append(paths, pe.Path)
	}
	if le, ok := errors.AsType[*os.LinkError](err); ok {
		paths = append(paths, le.Old, le.New)
	}
	for _, p := range paths {
		if filepath.IsAbs(p) {
			full = strings.ReplaceAll(full, p, "[path]")
		}
	}
	return full
}
