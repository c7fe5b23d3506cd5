//go:build unix

package tui

import (
	"os"
	"os/signal"
	"syscall"
)

// onResize calls f on each change of the terminal's size (SIGWINCH)
// until stop is called.
func onResize(f func()) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-sig:
				f()
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		<-finished
	}
}
