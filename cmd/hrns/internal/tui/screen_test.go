package tui

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/openai"
)

// fakeClock is a screen's clock that moves, and fires the timers set on
// it, only when the test says.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []fakeTimer
	set    int // timers set so far
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) after(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set++
	c.timers = append(c.timers, fakeTimer{c.t.Add(d), f})
}

// advance moves the clock by d and fires the timers then due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.t) {
			keep = append(keep, tm)
		} else {
			due = append(due, tm.f)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *fakeClock) tune(s *screen) { s.now, s.after = c.now, c.after }

// writes is a terminal that keeps each write apart.
type writes struct {
	mu sync.Mutex
	w  []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.w...)
}

// TestScreenDrawsOnChange: a change after a quiet time is written at
// once, without a timer; changes closer together wait for the end of the
// frame and are written as one; the draws of a stream of changes stay
// within chatFPS a second; nothing changing, nothing is written and no
// timer is set.
func TestScreenDrawsOnChange(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	out := &writes{}
	s := newScreen(out, nil, colorprofile.Ascii, true, 20, 3)
	clock.tune(s)

	s.set("one")
	if w := out.all(); len(w) != 1 || !strings.Contains(w[0], "one") || clock.set != 0 {
		t.Fatalf("the first view: writes %q, timers %d; want one write at once", w, clock.set)
	}
	// Changes in a burst (closer than quietChange) wait for the frame.
	clock.advance(quietChange / 10)
	s.set("two")
	s.set("three")
	s.set("four")
	if w := out.all(); len(w) != 1 || clock.pending() != 1 {
		t.Fatalf("a burst within the frame: %d writes, %d timers pending; want them held for one timer", len(w), clock.pending())
	}
	clock.advance(frameInterval - quietChange/10 - 1)
	if len(out.all()) != 1 {
		t.Fatal("written before the frame's end")
	}
	clock.advance(1)
	if w := out.all(); len(w) != 2 || !strings.Contains(w[1], "four") || strings.Contains(w[1], "two") {
		t.Fatalf("at the frame's end: writes %q; want one more, of the last view", w)
	}
	// The first change after a quiet time is written at once, even
	// within the frame of the last draw (the first token after a
	// question's frames).
	clock.advance(2 * quietChange)
	s.set("five")
	if w := out.all(); len(w) != 3 || !strings.Contains(w[2], "five") || clock.pending() != 0 {
		t.Fatalf("a change after a quiet time: writes %q, %d timers pending; want one write at once", w, clock.pending())
	}

	// A burst of 100 changes over 10 frames: about 10 frames.
	clock.advance(time.Second)
	n := len(out.all())
	for i := range 100 {
		clock.advance(frameInterval / 10)
		s.set(strings.Repeat("x", i%7+1))
	}
	clock.advance(time.Second)
	if d := len(out.all()) - n; d < 9 || d > 11+burstFrames {
		t.Errorf("a burst of 100 changes over 10 frames wrote %d frames", d)
	}
	// A stream of changes each after a quiet time, for a second: at most
	// chatFPS frames and the burst.
	n = len(out.all())
	for i := range 500 {
		clock.advance(2 * quietChange)
		s.set(strings.Repeat("y", i%7+1))
	}
	clock.advance(time.Second)
	if d := len(out.all()) - n; d < chatFPS-10 || d > chatFPS+burstFrames+1 {
		t.Errorf("a change every %v for a second wrote %d frames; want at most %d", 2*quietChange, d, chatFPS+burstFrames+1)
	}

	// Idle: the same view again writes nothing and sets no timer.
	n, timers := len(out.all()), clock.set
	s.set(strings.Repeat("y", 499%7+1))
	clock.advance(time.Second)
	if len(out.all()) != n || clock.set != timers {
		t.Errorf("an unchanged view wrote %d frames and set %d timers", len(out.all())-n, clock.set-timers)
	}
	s.set("six")
	if w := out.all(); len(w) != n+1 || !strings.Contains(w[n], "six") || clock.set != timers {
		t.Errorf("a change after a quiet second: %d writes, %d timers; want one write at once", len(w)-n, clock.set-timers)
	}
}

// TestFirstTokenWithoutFrameTick drives the chat's program against a
// streaming endpoint with a screen clock that fires no timer by itself:
// the clock is moved on (a quiet second, the frame's timers fired) just
// before the chunk holding the first token reaches Update, and the token
// must then reach the terminal from Update itself, with no timer fired
// after it. With a renderer that writes only on a frame tick (Bubble
// Tea's), the token never comes.
func TestFirstTokenWithoutFrameTick(t *testing.T) {
	srv := newFirstTokenServer(t)
	srv.token = "Tok0zq"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	watch := &screenWatch{}
	c := newChat(ctx, &Config{
		Model:     openai.New(&openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m"}),
		ModelName: "m",
		Workdir:   t.TempDir(),
		Input:     inR,
		Output:    watch,
	})
	defer c.stop()
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var fired, pendingAfter int
	filter := tea.WithFilter(func(_ tea.Model, msg tea.Msg) tea.Msg {
		if m, ok := msg.(chunkMsg); ok && strings.Contains(m.chunk.Content, "Tok0zq") {
			clock.advance(time.Second) // the frame's timers fire
			clock.advance(time.Second) // a quiet second
			fired, pendingAfter = clock.set, clock.pending()
		}
		return msg
	})
	done := make(chan error, 1)
	go func() { done <- runProgram(ctx, c, inR, watch, clock.tune, tea.WithWindowSize(100, 30), filter) }()
	shown, _ := watch.await("Tok0zq", "endTok0zq.")
	if _, err := io.WriteString(inW, "q0\r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-shown:
	case err := <-done:
		t.Fatalf("the chat ended: %v", err)
	case <-time.After(30 * time.Second): // a hang, not a speed check
		t.Fatal("the token was never written: it waited for a frame timer")
	}
	clock.mu.Lock()
	set := clock.set
	clock.mu.Unlock()
	if pendingAfter != 0 || set != fired {
		t.Errorf("timers: %d pending when the token came, %d set after it; want none", pendingAfter, set-fired)
	}
	srv.release <- struct{}{}
	cancel()
	inW.Close()
	<-done
}

// TestScreenGivesTerminalBack: the chat's program enters the alternate
// screen with the modes Bubble Tea's renderer turned on for it, and on
// /exit leaves them as Bubble Tea's renderer did.
func TestScreenGivesTerminalBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	c := newChat(ctx, &Config{ModelName: "m", Workdir: t.TempDir(), Input: inR, Output: w})
	defer c.stop()
	done := make(chan error, 1)
	go func() { done <- runProgram(ctx, c, inR, w, nil, tea.WithWindowSize(60, 20)) }()
	if _, err := io.WriteString(inW, "/exit\r"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a hang, not a speed check
		t.Fatal("/exit did not end the chat")
	}
	inW.Close()
	mu.Lock()
	got := out.String()
	mu.Unlock()
	in := strings.Index(got, ansi.SetModeAltScreenSaveCursor)
	leave := strings.LastIndex(got, ansi.ResetModeAltScreenSaveCursor)
	if in < 0 || leave < in {
		t.Fatalf("the alternate screen is not entered then left: %q", got)
	}
	for _, seq := range []string{ansi.ResetModeTextCursorEnable, ansi.SetModeBracketedPaste, ansi.SetWindowTitle("hrns"),
		ansi.SetModifyOtherKeys2, ansi.PushKittyKeyboard(1), "Ask, or /help"} {
		if i := strings.Index(got, seq); i < in || i > leave {
			t.Errorf("%q is not written on the alternate screen", seq)
		}
	}
	for _, seq := range []string{ansi.PopKittyKeyboard(1), ansi.ResetModifyOtherKeys} {
		if i := strings.LastIndex(got, seq); i < 0 || i > leave {
			t.Errorf("%q is not written before leaving the alternate screen", seq)
		}
	}
	for _, seq := range []string{ansi.SetModeTextCursorEnable, ansi.ResetModeBracketedPaste, ansi.SetWindowTitle("")} {
		if i := strings.LastIndex(got, seq); i < leave {
			t.Errorf("%q is not written after leaving the alternate screen", seq)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
