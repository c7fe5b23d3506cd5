package browser_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hrns-dev/hrns/browser"
)

// TestLiveNoFrame: no frame comes from a browser that keeps none, that
// has not started (Frame never starts it) or that has closed, nor from a
// name without a browser; Remove forgets only the browser it is given.
func TestLiveNoFrame(t *testing.T) {
	ctx := context.Background()
	off := browser.New(nil)
	on := browser.New(&browser.Options{LiveFrames: true, ExecPath: "/nonexistent/chromium"})
	var live browser.Live
	live.Add("a", off)
	live.Add("b", on)
	for _, tt := range []struct {
		name string
		got  func() (browser.Frame, error)
	}{
		{"frames off", func() (browser.Frame, error) { return off.Frame(ctx) }},
		{"not started", func() (browser.Frame, error) { return on.Frame(ctx) }},
		{"by name, frames off", func() (browser.Frame, error) { return live.Frame(ctx, "a") }},
		{"by name, not started", func() (browser.Frame, error) { return live.Frame(ctx, "b") }},
		{"no such name", func() (browser.Frame, error) { return live.Frame(ctx, "c") }},
	} {
		if f, err := tt.got(); !errors.Is(err, browser.ErrNoFrame) || f.JPEG != nil {
			t.Errorf("%s: %v, %d bytes", tt.name, err, len(f.JPEG))
		}
	}
	live.Remove("b", off) // not b's browser: b stays
	live.Add("c", on)
	live.Remove("c", on)
	on.Close()
	if _, err := on.Frame(ctx); !errors.Is(err, browser.ErrNoFrame) {
		t.Errorf("closed: %v", err)
	}
	if _, err := live.Frame(ctx, "c"); !errors.Is(err, browser.ErrNoFrame) {
		t.Errorf("removed: %v", err)
	}
}
