package server

import (
	"math"
	"net/http"
	"runtime"
	"sync"

	"github.com/hrns-dev/hrns/internal/fairshare"
)

// MaxLongPollsPerKey is the default of Options.MaxLongPollsPerKey: the
// long-polls and event streams one API key has waiting at once on a
// server. A client following hundreds of sessions of one key holds one
// long-poll each; one that opens thousands is refused past the bound
// (429), so that what a key's waits make the server hold (a goroutine,
// a connection and a subscription each, about 20 KiB) stays bounded.
const MaxLongPollsPerKey = 1024

// MaxLongPolls is the default of Options.MaxLongPolls: the long-polls
// and event streams waiting at once on a server, all keys together
// (about 320 MiB at 20 KiB each). [MaxLongPollsPerKey] bounds one key's;
// this bounds what many keys' waits make the server hold. One more is
// 503 with Retry-After: the server is full, whichever key asks. Its last
// quarter is kept for the keys with few waiting (fewer than 8 with the
// default): past three quarters, a key with 8 or more is refused (429,
// as over its own bound), so that keys holding many cannot fill it and
// leave a key that holds none a 503; that takes 512 keys at once
// (internal/fairshare, which admits the reads waiting the same way).
const MaxLongPolls = 16384

// pollSlots counts the long-polls and streams of each key waiting, and
// of all keys.
type pollSlots struct {
	mu    sync.Mutex
	n     map[string]int
	total int
}

// The answers of pollSlots.take.
const (
	pollTaken    = iota // counted: the caller calls give when it ends
	pollKeyFull         // the key has its bound waiting
	pollAllFull         // the server has its bound waiting, all keys
	pollKeyShare        // the key has its share of the server's bound waiting
)

// take counts one more wait for owner if the key has fewer than limit
// waiting, all keys fewer than all, and the key less than its share
// (past three quarters of all, fewer than fairshare.Floor; see
// MaxLongPolls). It is O(1).
func (p *pollSlots) take(owner string, limit, all int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.n[owner]
	if n >= limit {
		return pollKeyFull
	}
	if p.total >= all {
		return pollAllFull
	}
	if !fairshare.Allows(n, p.total, all) {
		return pollKeyShare
	}
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[owner]++
	p.total++
	return pollTaken
}

func (p *pollSlots) give(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[owner]--; p.n[owner] <= 0 {
		delete(p.n, owner)
	}
	p.total--
}

// bound is an Options bound with its default (def for 0) and none for a
// negative value.
func bound(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return math.MaxInt
	}
	return v
}

// takePoll counts a long-poll or stream of owner, or answers and
// reports false: 429 when the key has Options.MaxLongPollsPerKey
// waiting, or its share of Options.MaxLongPolls (see MaxLongPolls), 503
// when the server has Options.MaxLongPolls waiting, all keys together.
// The caller calls s.polls.give(owner) when it ends.
func (s *Server) takePoll(w http.ResponseWriter, owner string) bool {
	switch s.polls.take(owner, bound(s.opts.MaxLongPollsPerKey, MaxLongPollsPerKey), bound(s.opts.MaxLongPolls, MaxLongPolls)) {
	case pollTaken:
		return true
	case pollKeyFull:
		w.Header().Set("Retry-After", "1")
		w.Header().Set(headerQuota, quotaLongPolls)
		writeError(w, http.StatusTooManyRequests, "This key has too many long-polls and event streams waiting at once: retry after Retry-After seconds, or follow fewer sessions at once")
	case pollKeyShare:
		w.Header().Set("Retry-After", "1")
		w.Header().Set(headerQuota, quotaLongPolls)
		writeError(w, http.StatusTooManyRequests, "This key has its share of long-polls and event streams waiting on this server, which other keys nearly fill: retry after Retry-After seconds, or follow fewer sessions at once")
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "This server has too many long-polls and event streams waiting at once, all keys together: retry after Retry-After seconds")
	}
	return false
}

// whilePolling runs wait, a long-poll's wait and read, counted as one of
// owner's long-polls (takePoll), and reports true; or answers as
// takePoll does and reports false. The count ends when wait returns,
// before the answer is written: a client that reads its answer slowly,
// or not at all, holds none of its key's long-polls, nor of the
// server's, meanwhile.
func (s *Server) whilePolling(w http.ResponseWriter, owner string, wait func()) bool {
	if !s.takePoll(w, owner) {
		return false
	}
	defer s.polls.give(owner)
	wait()
	return true
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
// them anyway, and this costs a trip through the scheduler. A commit that
// starts no work (a message to a paused session) has already yielded to
// the long-polls it woke as the store returned (session's commit); this
// one is then a short trip.
func yieldToWoken() { runtime.Gosched() }
