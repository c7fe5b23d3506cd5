package server

import (
	"math"
	"net/http"
	"runtime"
	"sync"
)

// MaxLongPollsPerKey is the default of Options.MaxLongPollsPerKey: the
// long-polls and event streams one API key has waiting at once on a
// server. A client following hundreds of sessions of one key holds one
// long-poll each; one that opens thousands is refused past the bound
// (429), so that what a key's waits make the server hold (a goroutine,
// a connection and a subscription each, about 20 KiB) stays bounded.
const MaxLongPollsPerKey = 1024

// pollSlots counts the long-polls and streams of each key waiting.
type pollSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more wait for owner and reports whether it is within
// limit; the caller calls give when it ends.
func (p *pollSlots) take(owner string, limit int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[owner] >= limit {
		return false
	}
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[owner]++
	return true
}

func (p *pollSlots) give(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[owner]--; p.n[owner] <= 0 {
		delete(p.n, owner)
	}
}

// takePoll counts a long-poll or stream of owner, or answers 429 and
// reports false when the key has Options.MaxLongPollsPerKey waiting.
// The caller calls s.polls.give(owner) when it ends.
func (s *Server) takePoll(w http.ResponseWriter, owner string) bool {
	limit := s.opts.MaxLongPollsPerKey
	if limit == 0 {
		limit = MaxLongPollsPerKey
	}
	if limit < 0 {
		limit = math.MaxInt
	}
	if s.polls.take(owner, limit) {
		return true
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set(headerQuota, quotaLongPolls)
	writeError(w, http.StatusTooManyRequests, "This key has too many long-polls and event streams waiting at once: retry after Retry-After seconds, or follow fewer sessions at once")
	return false
}

// The values of the Hrns-Quota header on a 429 that paces a key's reads
// (its long-polls, its reads of events): a client waits Retry-After and
// asks again. "tokens" (quota_tokens.go) is the token quota.
const (
	headerQuota    = "Hrns-Quota"
	quotaReads     = "reads"
	quotaLongPolls = "long-polls"
)

// yieldToWoken lets the goroutines a caller's input made runnable run
// before its handler answers: the long-polls its commit woke, and the
// worker it started when it claimed the session, which sends the next
// model request. The input is committed (on disk) before this is called,
// so the order of the answers changes nothing of what is acknowledged.
// On one P (a server pinned to one CPU) they would otherwise wait for the
// handler to write its 202 and for the connection's next read to park its
// goroutine: a long-poll's answer came about 90 µs after the 202 that
// acknowledged the message that woke it. With more Ps, idle ones take
// them anyway, and this costs a trip through the scheduler.
func yieldToWoken() { runtime.Gosched() }
