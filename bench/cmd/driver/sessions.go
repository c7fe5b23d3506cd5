package main

import "context"

// sessionsResult will hold the sessions server's measures that issue 8
// asks for: sessions created per second; the round trip of a tool result
// (its POST to the next model request), p50 and p99; the wake-up latency of
// a long poll; and the memory of a parked session at 1k and 10k sessions,
// against SQLite.
type sessionsResult struct {
	err error
}

// measureSessions is the hook for the sessions server's benchmark. The
// server is being built (server/, session/, store/) and is not measured
// yet; the report says so in its sessions section rather than show numbers.
// When it lands, this starts it (pinned to the mock's CPU or a third one)
// against the mock and a SQLite file in e.work, and fills a sessionsResult.
func measureSessions(_ context.Context, _ *env) *sessionsResult {
	return &sessionsResult{err: errSessionsPending}
}
