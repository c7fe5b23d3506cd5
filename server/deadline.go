package server

import (
	"net/http"
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

func newBoundedWriter(w http.ResponseWriter) *boundedWriter {
	b := &boundedWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	// Bounds net/http's writes before the handler's first (a 100
	// Continue); the handler's writes each set their own.
	b.deadline(0)
	return b
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
