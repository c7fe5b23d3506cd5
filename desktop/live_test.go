package desktop

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestLiveFrames: a desktop with LiveFrames keeps its latest screenshot as
// a JPEG of the view; between actions Frame takes one at most once a
// second, whatever the viewers; while an action holds the desktop it
// answers at once with the frame it has; once the desktop ends there is
// none. Without LiveFrames, and for a lazy desktop not started, there is
// none either.
func TestLiveFrames(t *testing.T) {
	ctx := context.Background()
	r := &scriptRunner{w: 640, h: 400}
	off, err := newDesktop(ctx, r, &Options{Settle: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.Frame(ctx); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("without LiveFrames: %v", err)
	}
	d, err := newDesktop(ctx, r, &Options{Settle: -1, LiveFrames: true, MaxWidth: 320, MaxHeight: 200})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Frame(ctx)
	if err != nil || f.Seq != 1 || f.Width != 320 || f.Height != 200 || !bytes.HasPrefix(f.JPEG, []byte{0xff, 0xd8}) || len(f.JPEG) > maxFrameBytes {
		t.Fatalf("first frame: %v seq %d %dx%d %d bytes", err, f.Seq, f.Width, f.Height, len(f.JPEG))
	}
	shots := func() int { return strings.Count(strings.Join(r.lines(), "\n"), "xwd") }
	before := shots()
	for range 50 {
		if g, err := d.Frame(ctx); err != nil || g.Seq != 1 {
			t.Fatalf("a fresh frame again: %v seq %d", err, g.Seq)
		}
	}
	if shots() != before {
		t.Fatalf("%d screenshots for viewers of a fresh frame", shots()-before)
	}
	// An action's screenshot is the next frame.
	a, _ := ParseAction([]byte(`{"action":"left_click","coordinate":[1,2]}`), 320, 200)
	if _, err := d.Do(ctx, a); err != nil {
		t.Fatal(err)
	}
	if g, _ := d.Frame(ctx); g.Seq != 2 {
		t.Fatalf("after an action, frame %d", g.Seq)
	}
	// While an action holds the desktop, Frame does not wait.
	d.mu.Lock()
	d.fmu.Lock()
	d.frame.At = d.frame.At.Add(-2 * frameFresh)
	d.fmu.Unlock()
	if g, err := d.Frame(ctx); err != nil || g.Seq != 2 {
		t.Fatalf("during an action: %v seq %d", err, g.Seq)
	}
	d.mu.Unlock()
	if g, _ := d.Frame(ctx); g.Seq != 3 {
		t.Fatalf("a stale frame between actions is taken again: seq %d", g.Seq)
	}
	d.Close()
	if _, err := d.Frame(ctx); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("after Close: %v", err)
	}

	var live Live
	l := NewLazy(&SandboxOptions{Options: Options{LiveFrames: true}})
	live.Add("s1", l)
	if _, err := live.Frame(ctx, "s1"); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("a lazy desktop not started: %v", err)
	}
	if _, err := live.Frame(ctx, "s2"); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("no desktop of that name: %v", err)
	}
	live.Remove("s1", NewLazy(nil))
	if live.m["s1"] != l {
		t.Fatal("Remove of another desktop removed it")
	}
	live.Remove("s1", l)
	if len(live.m) != 0 {
		t.Fatal("not removed")
	}
}
