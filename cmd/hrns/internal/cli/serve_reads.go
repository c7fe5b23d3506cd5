package cli

import (
	"flag"
	"time"

	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
)

// The largest values hrns serve takes for the per-key bounds of reads
// and long-polls: past them a bound bounds nothing a server could hold
// (each read loads up to session.MaxReadBytes; each waiting read or
// long-poll holds a goroutine and a connection), so such a value is a
// mistake, refused as one.
const (
	maxReadsFlag        = 4096
	maxWaitersFlag      = 1 << 16
	maxTotalWaitersFlag = 1 << 18
	maxReadWaitFlag     = 10 * time.Minute
)

// readFlags are hrns serve's bounds of what one key's reads of events
// and long-polls make the server hold ("What one key can make the
// server hold" in docs/serve.md). 0 means the default of
// session.Options and server.Options.
type readFlags struct {
	perKey, total, queue, longPolls int
	// queueTotal and longPollsTotal bound the waits of all keys together.
	queueTotal, longPollsTotal int
	wait                       time.Duration
}

func (r *readFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.perKey, "max-reads-per-key", 0, "reads of events (a page of /events, an answer of /changes, a turn of the event stream) of one API key loading at once, on each replica; more wait in the key's queue (a freed slot goes to the waiting key with the fewest loading), then get 429 with Retry-After and Hrns-Quota: reads past --max-read-queue-per-key or --max-read-wait (default 4, at most --max-reads)")
	fs.IntVar(&r.total, "max-reads", 0, "reads of events loading at once, all keys together, on each replica; more wait as past --max-reads-per-key (default 16)")
	fs.IntVar(&r.queue, "max-read-queue-per-key", 0, "reads of events of one API key waiting for a slot, on each replica; one more is 429 with Retry-After and Hrns-Quota: reads (default 1024)")
	fs.DurationVar(&r.wait, "max-read-wait", 0, "how long a read of events waits in its key's queue; past it the read is 429 with Retry-After and Hrns-Quota: reads (default 30s)")
	fs.IntVar(&r.queueTotal, "max-read-queue", 0, "reads of events waiting for a slot, all keys together, on each replica; one more is 503 with Retry-After, and past three quarters a read of a key with 8 or more waiting is 429 (its share) (default 8192, at least --max-read-queue-per-key)")
	fs.IntVar(&r.longPolls, "max-long-polls-per-key", 0, "long-polls (/changes with wait_for_seconds) and event streams of one API key waiting at once, on each replica; one more is 429 with Retry-After and Hrns-Quota: long-polls (default 1024)")
	fs.IntVar(&r.longPollsTotal, "max-long-polls", 0, "long-polls and event streams waiting at once, all keys together, on each replica; one more is 503 with Retry-After, and past three quarters one of a key with 8 or more waiting is 429 (its share) (default 16384, at least --max-long-polls-per-key)")
}

// setSession sets opts' bounds of reads from the flags.
func (r *readFlags) setSession(opts *session.Options) {
	opts.MaxReadsPerOwner, opts.MaxReads, opts.MaxReadQueue, opts.MaxReadQueueTotal, opts.MaxReadWait = r.perKey, r.total, r.queue, r.queueTotal, r.wait
}

// setServer sets opts' bounds of long-polls from the flags.
func (r *readFlags) setServer(opts *server.Options) {
	opts.MaxLongPollsPerKey, opts.MaxLongPolls = r.longPolls, r.longPollsTotal
}

// validate refuses negative and absurd bounds, and a per-key bound above
// the bound of all keys' together (reads loading, reads waiting,
// long-polls).
func (r *readFlags) validate() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"--max-reads-per-key", r.perKey, maxReadsFlag},
		{"--max-reads", r.total, maxReadsFlag},
		{"--max-read-queue-per-key", r.queue, maxWaitersFlag},
		{"--max-long-polls-per-key", r.longPolls, maxWaitersFlag},
		{"--max-read-queue", r.queueTotal, maxTotalWaitersFlag},
		{"--max-long-polls", r.longPollsTotal, maxTotalWaitersFlag},
	} {
		if f.v < 0 || f.v > f.max {
			return usagef("%s %d: want a number from 1 to %d, or 0 for the default", f.name, f.v, f.max)
		}
	}
	if r.wait < 0 || r.wait > maxReadWaitFlag {
		return usagef("--max-read-wait %v: want a positive duration up to %v, such as 5s, or 0 for the default (%v)", r.wait, maxReadWaitFlag, session.MaxReadWait)
	}
	perKey, total := firstNonZero(r.perKey, session.MaxReadsPerOwner), firstNonZero(r.total, session.MaxReads)
	if perKey > total {
		return usagef("--max-reads-per-key %d is more than --max-reads %d, which bounds all keys' reads together: raise --max-reads too", perKey, total)
	}
	queue, queueTotal := firstNonZero(r.queue, session.MaxReadQueue), firstNonZero(r.queueTotal, session.MaxReadQueueTotal)
	if queue > queueTotal {
		return usagef("--max-read-queue-per-key %d is more than --max-read-queue %d, which bounds all keys' waiting reads together: raise --max-read-queue too", queue, queueTotal)
	}
	polls, pollsTotal := firstNonZero(r.longPolls, server.MaxLongPollsPerKey), firstNonZero(r.longPollsTotal, server.MaxLongPolls)
	if polls > pollsTotal {
		return usagef("--max-long-polls-per-key %d is more than --max-long-polls %d, which bounds all keys' long-polls together: raise --max-long-polls too", polls, pollsTotal)
	}
	return nil
}
