package browser

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNoFrame is returned by [Browser.Frame] and [Live.Frame] when there
// is no picture to show: the browser has not started, has closed, or
// keeps none ([Options.LiveFrames] is off), or no browser has the name.
var ErrNoFrame = errors.New("browser: no live frame")

// A Frame is a picture of the browser's current tab, for a person
// watching it live.
type Frame struct {
	// JPEG is the viewport, at most maxFrameBytes.
	JPEG []byte
	// At is when it was taken; Seq counts the frames taken, from 1.
	At  time.Time
	Seq int64
}

const (
	// maxFrameBytes bounds a live frame.
	maxFrameBytes = 256 << 10
	// frameFresh is how old a frame may be before Frame takes another
	// between tool calls: a bound on the captures any number of viewers
	// can cause.
	frameFresh = 500 * time.Millisecond
	// frameTimeout bounds taking one.
	frameTimeout = 5 * time.Second
)

// takeFrame takes a frame of the current tab. b.mu is held.
func (b *Browser) takeFrame(ctx context.Context) {
	if !b.started || b.closed || len(b.tabs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, frameTimeout)
	defer cancel()
	img, err := b.tabs[b.cur].screenshot(ctx, min(maxFrameBytes, b.o.MaxScreenshotBytes))
	if err != nil {
		b.o.Logger.Debug("browser: live frame", "err", err)
		return
	}
	b.fmu.Lock()
	b.frame = Frame{JPEG: img, At: time.Now(), Seq: b.frame.Seq + 1}
	b.fmu.Unlock()
}

// Frame returns the latest picture of the current tab's viewport, with
// [Options.LiveFrames]: while a tool call runs, the one taken at the end
// of the call before; between calls, a new one when the latest is older
// than half a second. It never waits for a tool call, and never starts
// the browser: before it starts and once it has closed, the error is
// [ErrNoFrame].
func (b *Browser) Frame(ctx context.Context) (Frame, error) {
	if !b.o.LiveFrames {
		return Frame{}, ErrNoFrame
	}
	b.fmu.Lock()
	f := b.frame
	b.fmu.Unlock()
	if time.Since(f.At) >= frameFresh && b.mu.TryLock() {
		closed := b.closed || !b.started
		if !closed {
			b.takeFrame(ctx)
		}
		b.mu.Unlock()
		if closed {
			return Frame{}, ErrNoFrame
		}
		b.fmu.Lock()
		f = b.frame
		b.fmu.Unlock()
	}
	if f.JPEG == nil {
		return Frame{}, ErrNoFrame
	}
	return f, nil
}

// Live holds browsers by name (hrns serve names each by its session's
// ID), so that a live view finds the browser of a session while it runs.
// Its zero value is ready; it is safe for concurrent use.
type Live struct {
	mu sync.Mutex
	m  map[string]*Browser
}

// Add makes b the browser of name.
func (l *Live) Add(name string, b *Browser) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*Browser{}
	}
	l.m[name] = b
}

// Remove forgets b as the browser of name; a browser added since under
// the same name stays.
func (l *Live) Remove(name string, b *Browser) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[name] == b {
		delete(l.m, name)
	}
}

// Frame returns the latest frame of the browser of name (see
// [Browser.Frame]), or [ErrNoFrame] when there is none.
func (l *Live) Frame(ctx context.Context, name string) (Frame, error) {
	l.mu.Lock()
	b := l.m[name]
	l.mu.Unlock()
	if b == nil {
		return Frame{}, ErrNoFrame
	}
	return b.Frame(ctx)
}
