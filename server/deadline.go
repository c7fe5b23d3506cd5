package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// pageWriteTimeout bounds the time a client may take to receive one
// piece of a page of events (at most the read budget plus one event),
// one turn of an event stream, and, for each MiB begun, one write of
// any other answer (writeBudget). Tests shorten it (export_test.go).
var pageWriteTimeout = time.Minute

// writeBudget is the time a client has to take one write of n bytes of
// an answer: pageWriteTimeout for each MiB begun, at least one; a client
// that takes about 17 KiB a second or more is never cut off, and one
// that stops reading loses its connection at most a few minutes after
// (an answer of the sessions API is at most 4 MiB plus one event).
func writeBudget(n int) time.Duration {
	return pageWriteTimeout * time.Duration(1+n>>20)
}

// boundedWriter gives every write of an answer a write deadline, set
// right before it (so a long-poll's wait before its answer is not cut):
// a client that stops reading can hold its connection, and the answer's
// bytes the server keeps for it, only until then; the write then fails,
// the handler returns and net/http closes the connection. The server
// sets no http.Server WriteTimeout (hrns serve's), which would count
// from the request's start and cut long-polls.
//
// A handler that paces its own writes (an event stream, a page asked by
// number: a deadline a turn or a piece) calls ownWriteDeadline and sets
// them itself. Once the handler returns, finish sets a last deadline for
// net/http's own writes after it (the rest it buffers, the end of a
// chunked body); it stays until the next request on the connection sets
// its own.
type boundedWriter struct {
	http.ResponseWriter
	rc  *http.ResponseController
	own bool // the handler sets its write deadlines
}

// init makes b the boundedWriter of w.
func (b *boundedWriter) init(w http.ResponseWriter) {
	*b = boundedWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	// Bounds net/http's writes before the handler's first (a 100
	// Continue); the handler's writes each set their own.
	b.deadline(0)
}

func (b *boundedWriter) deadline(n int) {
	b.rc.SetWriteDeadline(time.Now().Add(writeBudget(n)))
}

func (b *boundedWriter) WriteHeader(code int) {
	if !b.own {
		b.deadline(0)
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if !b.own {
		b.deadline(len(p))
	}
	return b.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (b *boundedWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// finish sets the write deadline of net/http's writes after the handler:
// the answer's rest it still buffers, the end of a chunked body.
func (b *boundedWriter) finish() {
	b.deadline(0)
}

// ownWriteDeadline tells w's boundedWriter, if any, that the handler sets
// its write deadlines itself.
func ownWriteDeadline(w http.ResponseWriter) {
	for {
		switch x := w.(type) {
		case *boundedWriter:
			x.own = true
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// bodyReadTimeout is the time a client has to send each MiB begun of a
// request's body (its Content-Length, or the route's limit when it sends
// none). Tests shorten it (export_test.go).
var bodyReadTimeout = time.Minute

// limitBody bounds r's body: at most n bytes (http.MaxBytesReader), sent
// within bodyReadTimeout for each MiB begun. A client that stops sending
// a body (or sends it a byte at a time) otherwise held its connection
// and the handler's goroutine for as long as it liked: hrns serve sets
// no http.Server ReadTimeout, which would count from the request's start
// and, once the body is read, cut long-polls (net/http's read for the
// client's going away would fail at it and cancel the request). The
// deadline is lifted once the body is read to its end; a body not read
// to its end (over the limit, or a route that ignores it) keeps it, so
// that what net/http reads of the rest after the handler is bounded too.
// A read past the deadline fails with os.ErrDeadlineExceeded (408). A
// request without a body (http.NoBody, a GET's) is left as it is: there
// is nothing to bound.
//
// MaxBytesReader is given the writer net/http made, under the
// boundedWriter and any other wrapper: a body over n then tells net/http,
// through that writer, to close the connection after the answer, rather
// than first read up to 256 KiB more of the body, before the answer is
// even written.
func limitBody(w http.ResponseWriter, r *http.Request, n int64) {
	if r.Body == nil || r.Body == http.NoBody {
		return // nothing to read or bound (a GET's)
	}
	size := r.ContentLength
	if size < 0 || size > n {
		size = n
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(bodyReadTimeout*time.Duration(1+size>>20))) == nil {
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
	}
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	r.Body = http.MaxBytesReader(w, r.Body, n)
}

// bodyDeadline gives a request's body its time from the request's start:
// bodyReadTimeout, over which a route's limitBody sets its own. A request
// refused before its route reads the body (its Host, Origin, key,
// Content-Type or path) leaves the body unread, and net/http then reads up
// to 256 KiB of it, to keep the connection, before it writes the answer:
// without a deadline, a client that sent the start of a body and stopped
// held its connection and a goroutine, without a key, for as long as it
// liked.
func bodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	}
}

// errBodyTimeout is a body not sent within its time (limitBody): 408.
var errBodyTimeout = errors.New("the request's body did not arrive in time")

// deadlineBody lifts its connection's read deadline at the body's end.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		b.rc.SetReadDeadline(time.Time{})
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}
