package cli

import (
	"net/http"
	"sync"

	"github.com/hrns-dev/hrns/internal/httpapi"
)

// providerIdleConns is how many idle connections to one provider host the
// model clients keep: at least as many as hrns serve runs workers
// (session.Options.Workers defaults to 64), with room for the subagents'.
const providerIdleConns = 128

// providerHTTP is the HTTP client of the model providers. net/http's
// default transport keeps two idle connections per host, so hrns serve,
// with many sessions streaming from one provider at once, closed the
// others after each model turn and dialled again at the next: a TCP (and,
// to a provider on the internet, a TLS) handshake per turn. This one is
// the default transport (proxies from the environment, HTTP/2 where the
// provider speaks it, the same timeouts) keeping one idle connection per
// worker, with the providers' buffer sizes (httpapi.BufferSize: a request
// body up to 64 KiB goes out in one write, as the providers' own default
// client sends it). Built at first use, not at start-up.
var providerHTTP = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = providerIdleConns
	t.MaxIdleConns = 2 * providerIdleConns
	t.WriteBufferSize, t.ReadBufferSize = httpapi.BufferSize, httpapi.BufferSize
	return &http.Client{Transport: t}
})
