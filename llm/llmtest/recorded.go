package llmtest

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ServeRecorded starts a loopback server that answers every request with
// a recorded provider answer, raw, named name for messages: a whole HTTP
// response (status line, headers and body) when name ends in ".http", and
// otherwise a server-sent event stream, sent as it is with status 200. The
// server is closed when the test ends.
func ServeRecorded(t testing.TB, name string, raw []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(name, ".http") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(raw)
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), r)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
