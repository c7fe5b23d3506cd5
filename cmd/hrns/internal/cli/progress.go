package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/pricing"
)

// progress shows on a terminal's stderr what a run is waiting for, once it
// has waited a second: "⠹ waiting for the model 4s", "⠹ running
// run_command 12s". The line is erased before anything else is written.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	what  string
	since time.Time
	shown bool
	// paused counts the questions on the screen: while one is, the
	// line is not drawn.
	paused int
	stop   chan struct{}
	done   chan struct{}
}

// set says what the run now waits for ("" for nothing); the caller holds mu.
func (p *progress) set(what string, now time.Time) {
	if what != p.what {
		p.what, p.since = what, now
	}
}

// clear erases the line; the caller holds mu.
func (p *progress) clear() {
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// tick redraws the line as of now.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := now.Sub(p.since)
	if p.what == "" || el < time.Second || p.paused > 0 {
		return
	}
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	fmt.Fprintf(p.w, "\r\x1b[K%s %s %ds", frames[int(el/(250*time.Millisecond))%len(frames)], p.what, int(el.Seconds()))
	p.shown = true
}

// start ticks four times a second until close.
func (p *progress) start() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				p.tick(now)
			case <-p.stop:
				return
			}
		}
	}()
}

func (p *progress) close() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	p.clear()
	p.mu.Unlock()
}

// configure gives the renderer the model's price, and a progress line when
// stderr is a terminal.
func (r *textRenderer) configure(model string, cfg *Config, stdio *IO) {
	r.model = model
	r.prices = pricing.Default().With(demoPrices).With(cfg.Prices)
	if stdio.errTerminal() && r.log == stdio.Err {
		r.prog = &progress{w: r.log}
		r.prog.start()
	}
}
