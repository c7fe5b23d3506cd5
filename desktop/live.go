package desktop

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"sync"
	"time"
)

// ErrNoFrame is returned by [Desktop.Frame], [Lazy.Frame] and [Live.Frame]
// when there is no picture to show: the desktop has not started, has
// ended, or keeps none ([Options.LiveFrames] is off), or no desktop has
// the name.
var ErrNoFrame = errors.New("desktop: no live frame")

// A Frame is a picture of the desktop, for a person watching it live: the
// model's view of the screen (its coordinates are the view's).
type Frame struct {
	// JPEG is the view, at most maxFrameBytes.
	JPEG []byte
	// Width and Height are the view's size.
	Width, Height int
	// At is when it was taken; Seq counts the frames taken, from 1.
	At  time.Time
	Seq int64
}

const (
	// maxFrameBytes bounds a live frame.
	maxFrameBytes = 256 << 10
	// frameFresh is how old a frame may be before Frame takes another
	// between actions: a bound on the screenshots any number of viewers
	// can cause.
	frameFresh = time.Second
)

// liveFrames is the part of a Desktop that keeps its latest frame.
type liveFrames struct {
	fmu    sync.Mutex
	frame  Frame
	closed bool
}

// keepFrame keeps img (the view) as the latest frame, with
// [Options.LiveFrames]. It is called with every screenshot taken.
func (d *Desktop) keepFrame(img image.Image) {
	if !d.o.LiveFrames {
		return
	}
	var b bytes.Buffer
	for _, q := range []int{70, 50, 30} {
		b.Reset()
		if jpeg.Encode(&b, img, &jpeg.Options{Quality: q}) == nil && b.Len() <= maxFrameBytes {
			break
		}
	}
	if b.Len() == 0 || b.Len() > maxFrameBytes {
		return
	}
	d.fmu.Lock()
	defer d.fmu.Unlock()
	if d.closed {
		return
	}
	d.frame = Frame{JPEG: bytes.Clone(b.Bytes()), Width: d.vw, Height: d.vh, At: time.Now(), Seq: d.frame.Seq + 1}
}

// Frame returns the latest picture of the desktop, with
// [Options.LiveFrames]: while an action runs, the one taken after the
// action before; between actions, a new one when the latest is older than
// a second. It never waits for an action; once the desktop has ended, the
// error is [ErrNoFrame].
func (d *Desktop) Frame(ctx context.Context) (Frame, error) {
	if !d.o.LiveFrames {
		return Frame{}, ErrNoFrame
	}
	d.fmu.Lock()
	f, closed := d.frame, d.closed
	d.fmu.Unlock()
	if closed {
		return Frame{}, ErrNoFrame
	}
	if time.Since(f.At) >= frameFresh && d.mu.TryLock() {
		_, _, err := d.screenshot(ctx)
		d.mu.Unlock()
		if err == nil {
			d.fmu.Lock()
			f, closed = d.frame, d.closed
			d.fmu.Unlock()
		}
	}
	if closed || f.JPEG == nil {
		return Frame{}, ErrNoFrame
	}
	return f, nil
}

// endFrames forgets the frame of a desktop that ends.
func (d *Desktop) endFrames() {
	d.fmu.Lock()
	defer d.fmu.Unlock()
	d.closed = true
	d.frame = Frame{}
}

// Frame returns the latest frame of the desktop once it has started (see
// [Desktop.Frame]), or [ErrNoFrame].
func (l *Lazy) Frame(ctx context.Context) (Frame, error) {
	l.mu.Lock()
	d, closed := l.d, l.closed
	l.mu.Unlock()
	if d == nil || closed {
		return Frame{}, ErrNoFrame
	}
	return d.Frame(ctx)
}

// Live holds desktops by name (hrns serve names each by its session's ID),
// so that a live view finds the desktop of a session while it runs. Its
// zero value is ready; it is safe for concurrent use.
type Live struct {
	mu sync.Mutex
	m  map[string]*Lazy
}

// Add makes l the desktop of name.
func (lv *Live) Add(name string, l *Lazy) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.m == nil {
		lv.m = map[string]*Lazy{}
	}
	lv.m[name] = l
}

// Remove forgets l as the desktop of name; a desktop added since under
// the same name stays.
func (lv *Live) Remove(name string, l *Lazy) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.m[name] == l {
		delete(lv.m, name)
	}
}

// Frame returns the latest frame of the desktop of name (see
// [Desktop.Frame]), or [ErrNoFrame] when there is none.
func (lv *Live) Frame(ctx context.Context, name string) (Frame, error) {
	lv.mu.Lock()
	l := lv.m[name]
	lv.mu.Unlock()
	if l == nil {
		return Frame{}, ErrNoFrame
	}
	return l.Frame(ctx)
}
