package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// A shutdown stops hrns serve on SIGTERM: its steps, in order, each
// waited for until one deadline (--shutdown-timeout) counted from the
// signal. A step still running at the deadline is abandoned, not waited
// for: the process exits within the bound even when the store never
// answers (a PostgreSQL server that stopped responding holds every call
// made without a deadline, and the closing of its pool, for ever).
// Sessions whose workers are abandoned stay resumable: another replica,
// or this one restarted, takes them over when their leases expire.
type shutdown struct {
	ctx       context.Context // ends at the deadline
	timeout   time.Duration
	abandoned []string
	errs      []error
}

// newShutdown starts the deadline; cancel releases it.
func newShutdown(parent context.Context, timeout time.Duration) (_ *shutdown, cancel context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), timeout)
	return &shutdown{ctx: ctx, timeout: timeout}, cancel
}

// A stopStep is one thing to stop: what names it in the log, stop stops
// it and returns once it has stopped or its context ends (then with the
// context's error).
type stopStep struct {
	what string
	stop func(context.Context) error
}

// wait runs steps at once and waits for each until it returns or the
// deadline passes. A step that returns the deadline's error, or has not
// returned by then, is abandoned; it keeps running, unwaited.
func (s *shutdown) wait(steps ...stopStep) {
	done := make([]chan error, len(steps))
	for i, st := range steps {
		done[i] = make(chan error, 1)
		go func() { done[i] <- st.stop(s.ctx) }()
	}
	for i, st := range steps {
		select {
		case err := <-done[i]:
			switch {
			case err == nil:
			case s.ctx.Err() != nil && errors.Is(err, s.ctx.Err()):
				s.abandoned = append(s.abandoned, st.what)
			default:
				s.errs = append(s.errs, fmt.Errorf("%s: %w", st.what, err))
			}
		case <-s.ctx.Done():
			s.abandoned = append(s.abandoned, st.what)
		}
	}
}

// err is what went wrong: the steps' errors and, when some were
// abandoned, the error that names them.
func (s *shutdown) err() error {
	errs := s.errs
	if len(s.abandoned) > 0 {
		errs = append(errs, fmt.Errorf("the shutdown deadline (--shutdown-timeout %s) passed; abandoned: %s", s.timeout, strings.Join(s.abandoned, ", ")))
	}
	return errors.Join(errs...)
}

// serving is what serveCommand starts and stops on SIGTERM.
type serving struct {
	srv            *http.Server
	cancelRequests context.CancelFunc // ends long-polls and event streams
	stopSchedules  context.CancelFunc
	schedDone      <-chan struct{} // closed when the schedules' worker returns
	m              *session.Manager
	hooks          *webhook.Service
	st             store.Store
}

// stop stops it all within timeout of now: the HTTP server (requests in
// progress end), the schedules' worker, the session workers and the
// webhook deliveries (at once), then the store. Each waits only until
// the deadline; the error names what was abandoned.
func (s *serving) stop(parent context.Context, timeout time.Duration) error {
	down, cancel := newShutdown(parent, timeout)
	defer cancel()
	s.cancelRequests()
	down.wait(stopStep{"the requests in progress", s.srv.Shutdown})
	s.stopSchedules()
	// A firing in progress finishes its store write, or its run is
	// taken over.
	down.wait(stopStep{"the schedules' worker", func(ctx context.Context) error {
		select {
		case <-s.schedDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	down.wait(stopStep{"the session workers", s.m.Stop}, stopStep{"the webhook deliveries", s.hooks.Stop})
	down.wait(stopStep{"the store's close", func(context.Context) error { return s.st.Close() }})
	return down.err()
}
