package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"time"
)

// SignalContext returns a context cancelled by the first of sigs, as
// signal.NotifyContext's, and the function that stops it. Its handler is
// installed when the command needs it, not at the start: hrns run and hrns
// chat install it once their flags are parsed, every other command before
// its own parsing (Run), and anything that asks the context whether it is
// done, for its error or for a value installs it first. So `hrns run
// --help` and a mistyped flag print and return without it: the first
// signal.Notify of a process starts the runtime's signal-mask thread and
// two goroutines, a tenth of what such a start costs beyond a bare Go
// process's (docs/performance.md, target 4).
func SignalContext(sigs ...os.Signal) (context.Context, context.CancelFunc) {
	c := &signalContext{sigs: sigs}
	return c, c.stop
}

// signalContext is the context SignalContext returns.
type signalContext struct {
	sigs   []os.Signal
	once   sync.Once
	ctx    context.Context // signal.NotifyContext's, once installed
	cancel context.CancelFunc
}

// install installs the handler, once, and returns its context.
func (c *signalContext) install() context.Context {
	c.once.Do(func() { c.ctx, c.cancel = signal.NotifyContext(context.Background(), c.sigs...) })
	return c.ctx
}

// stop stops the handler, or keeps it from being installed.
func (c *signalContext) stop() {
	c.once.Do(func() { c.ctx, c.cancel = context.WithCancel(context.Background()) })
	c.cancel()
}

func (c *signalContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *signalContext) Done() <-chan struct{}       { return c.install().Done() }
func (c *signalContext) Err() error                  { return c.install().Err() }

// Value is the installed context's: context.WithCancel finds the
// cancelCtx under it there and registers with it, where it would
// otherwise start a goroutine to watch Done.
func (c *signalContext) Value(key any) any { return c.install().Value(key) }

func (c *signalContext) String() string { return "cli.SignalContext" }

// listen installs ctx's signal handler if it is a SignalContext's that is
// not yet installed.
func listen(ctx context.Context) {
	if c, ok := ctx.(*signalContext); ok {
		c.install()
	}
}
