package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
)

// The chat's screen is written by its own renderer, screen, not Bubble
// Tea's: Bubble Tea (v2.1) writes a changed view only on its frame
// ticker, at most 120 times a second, so a streamed token waited up to a
// frame (5.6 ms at the median) for the screen, and the ticker woke the
// process 120 times a second while nothing changed. Bubble Tea offers no
// way to ask for a frame now, so the program runs without its renderer
// (tea.WithoutRenderer: it still runs the model and reads the keyboard)
// and screen draws each view with the same cell renderer Bubble Tea uses
// (ultraviolet's TerminalRenderer), on change:
//
//   - a change after a quiet time (no change in the last quietChange, or
//     no draw in the last frameInterval) is written at once, from Update;
//   - changes closer together are coalesced into one draw at the end of
//     the frame of the last draw;
//   - a budget bounds the draws: it fills at chatFPS frames a second, up
//     to burstFrames, and each draw spends a frame; so a burst of
//     tokens costs at most chatFPS draws a second (and burstFrames more),
//     as Bubble Tea's ticker did;
//   - with nothing changing, nothing runs: no ticker.
//
// What the chat asked of Bubble Tea's renderer is done here the same
// way: the alternate screen, the window title, bracketed paste, the
// keyboard enhancements (modifyOtherKeys and the Kitty protocol), a hidden
// cursor, synchronized output and Unicode widths when the terminal says
// it has them, the colour profile, raw mode and resizes (SIGWINCH), and
// the terminal restored as it was when the chat ends.

// chatFPS is the most frames a second the chat draws: Bubble Tea's
// highest rate, which the chat used before it drew on change.
const chatFPS = 120

// frameInterval is the time of a frame: the screen draws at most one a
// frame over time, and up to burstFrames at once after a quiet time.
const (
	frameInterval = time.Second / chatFPS
	burstFrames   = 3
	// quietChange is the least time without a change after which a
	// change is drawn at once (budget allowing): changes closer together
	// (a burst of tokens in one read, keys pasted or typed at once) are
	// coalesced into frames.
	quietChange = time.Millisecond
)

// screen draws the chat's views to the terminal. Its methods may be
// called from any goroutine.
type screen struct {
	mu            sync.Mutex
	out           io.Writer
	scr           *uv.TerminalRenderer // writes to buf
	buf           bytes.Buffer         // a frame, written to out at once
	cells         uv.ScreenBuffer
	width, height int
	syncd         bool   // the terminal takes synchronized output (mode 2026)
	erase         bool   // the next draw repaints it all (a resize)
	sized         bool   // the program reported the size
	content       string // the latest view
	dirty         bool   // content is not on the screen yet
	started       bool   // the alternate screen is on
	closed        bool   // the terminal is given back: draw no more

	// Frame pacing. now and after are the clock (time.Now and
	// time.AfterFunc; a test's own).
	now        func() time.Time
	after      func(time.Duration, func())
	last       time.Time     // when the last frame was written
	lastChange time.Time     // when the content last changed
	credit     time.Duration // the frame budget at creditAt
	creditAt   time.Time
	pending    bool // a draw is due at the end of the frame
}

func newScreen(out io.Writer, env []string, profile colorprofile.Profile, mapNewline bool, width, height int) *screen {
	s := &screen{
		out: out, width: width, height: height,
		cells: uv.NewScreenBuffer(width, height),
		now:   time.Now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
	}
	s.scr = uv.NewTerminalRenderer(&s.buf, env)
	s.scr.SetColorProfile(profile)
	s.scr.SetRelativeCursor(true)
	s.scr.SetFullscreen(false)
	s.scr.SetTabStops(-1)
	s.scr.SetMapNewline(mapNewline)
	s.scr.SetScrollOptim(runtime.GOOS != "windows")
	return s
}

// start enters the alternate screen and turns on the terminal modes the
// chat uses; queryModes asks the terminal whether it has synchronized
// output and Unicode widths (the answers come as tea.ModeReportMsg).
func (s *screen) start(queryModes bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	if queryModes {
		b.WriteString(ansi.RequestModeSynchronizedOutput + ansi.RequestModeUnicodeCore)
	}
	b.WriteString(ansi.ResetModifyOtherKeys)
	b.WriteString(ansi.SetModeAltScreenSaveCursor)
	b.WriteString(ansi.ResetModeTextCursorEnable)
	b.WriteString(ansi.SetModeBracketedPaste)
	b.WriteString(ansi.SetWindowTitle("hrns"))
	b.WriteString(ansi.SetModifyOtherKeys2)
	b.WriteString(ansi.PushKittyKeyboard(1)) // key disambiguation, as Bubble Tea's default
	b.WriteString(ansi.RequestKittyKeyboard)
	s.scr.SaveCursor()
	s.scr.SetFullscreen(true)
	s.scr.SetRelativeCursor(false)
	s.scr.Erase()
	s.started = true
	_, err := s.out.Write(b.Bytes())
	return err
}

// stop draws the last view (when draw) and gives the terminal back as
// start found it. Nothing is drawn after it.
func (s *screen) stop(draw bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if draw && s.dirty {
		s.drawLocked(s.now())
	}
	s.closed = true
	if !s.started {
		return nil
	}
	s.buf.WriteString(ansi.ResetModifyOtherKeys)
	s.buf.WriteString(ansi.PopKittyKeyboard(1))
	s.scr.MoveTo(0, s.cells.Height()-1)
	_ = s.scr.Flush()
	s.scr.Erase()
	s.scr.SetRelativeCursor(true)
	s.scr.SetFullscreen(false)
	s.buf.WriteString(ansi.ResetModeAltScreenSaveCursor)
	s.scr.RestoreCursor()
	_, _ = s.scr.WriteString(ansi.SetModeTextCursorEnable + ansi.ResetModeBracketedPaste + ansi.SetWindowTitle(""))
	if s.cells.Method == ansi.GraphemeWidth {
		_, _ = s.scr.WriteString(ansi.ResetModeUnicodeCore)
	}
	_ = s.scr.Flush()
	_, err := s.out.Write(s.buf.Bytes())
	s.buf.Reset()
	return err
}

// observe takes what the program tells the renderer: the terminal's
// size, colour profile and modes.
func (s *screen) observe(msg tea.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		first := !s.sized
		s.sized = true
		if first && msg.Width == s.width && msg.Height == s.height {
			return // the size the screen started with, which the program reports first
		}
		s.scr.Erase()
		s.width, s.height = msg.Width, msg.Height
		s.scr.Resize(s.width, s.height)
		s.erase, s.dirty = true, true
	case tea.ColorProfileMsg:
		s.scr.SetColorProfile(msg.Profile)
	case tea.ModeReportMsg:
		switch msg.Mode {
		case ansi.ModeSynchronizedOutput:
			if msg.Value == ansi.ModeReset {
				s.syncd = true
			}
		case ansi.ModeUnicodeCore:
			if msg.Value == ansi.ModeReset || msg.Value == ansi.ModeSet || msg.Value == ansi.ModePermanentlySet {
				_, _ = s.scr.WriteString(ansi.SetModeUnicodeCore)
				s.cells.Method = ansi.GraphemeWidth
			}
		}
	}
}

// set makes content the screen's view. It is drawn at once when the
// frame budget allows it and the screen was quiet: no change in the last
// quietChange (the first token after the model thought), or no draw in
// the last frameInterval. Otherwise it is drawn once the frame is over,
// with what else changes until then.
func (s *screen) set(content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.now()
	quiet := now.Sub(s.lastChange) >= quietChange
	if content != s.content {
		s.content, s.dirty, s.lastChange = content, true, now
	}
	if !s.dirty {
		return
	}
	credit := s.creditLocked(now)
	if credit >= frameInterval && (quiet || now.Sub(s.last) >= frameInterval) {
		s.drawLocked(now)
		return
	}
	s.scheduleLocked(now, credit)
}

// scheduleLocked sets the timer of the next frame, unless it is set: the
// end of the frame of the last draw, or later if the budget is spent.
func (s *screen) scheduleLocked(now time.Time, credit time.Duration) {
	if s.pending {
		return
	}
	wait := max(s.last.Add(frameInterval).Sub(now), frameInterval-credit)
	s.pending = true
	s.after(wait, s.frameDue)
}

// creditLocked is the frame budget at now, in time: it fills as time
// passes (a frame each frameInterval), up to burstFrames frames, and each
// draw spends a frameInterval.
func (s *screen) creditLocked(now time.Time) time.Duration {
	return min(s.credit+now.Sub(s.creditAt), burstFrames*frameInterval)
}

// frameDue draws what changed during the frame that just ended.
func (s *screen) frameDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = false
	if !s.dirty || s.closed {
		return
	}
	now := s.now()
	if credit := s.creditLocked(now); credit < frameInterval {
		s.scheduleLocked(now, credit) // an immediate draw spent it
		return
	}
	s.drawLocked(now)
}

// drawLocked writes the content to the terminal: what changed since the
// last frame, in one write. s.mu is held.
func (s *screen) drawLocked(now time.Time) {
	s.credit, s.creditAt = s.creditLocked(now)-frameInterval, now
	s.dirty, s.last = false, now
	area := uv.Rect(0, 0, s.width, s.height)
	if len(s.content) == 0 {
		area.Max.Y = 0
	}
	if area != s.cells.Bounds() {
		s.scr.Erase()
		s.cells.Touched = nil
		s.cells.Resize(area.Dx(), area.Dy())
	}
	s.erase = false
	s.cells.Clear()
	uv.NewStyledString(s.content).Draw(s.cells, s.cells.Bounds())
	s.scr.Render(s.cells.RenderBuffer)
	_ = s.scr.Flush()
	if s.buf.Len() == 0 {
		return
	}
	var frame []byte
	if s.syncd {
		frame = make([]byte, 0, len(ansi.SetModeSynchronizedOutput)+s.buf.Len()+len(ansi.ResetModeSynchronizedOutput))
		frame = append(frame, ansi.SetModeSynchronizedOutput...)
		frame = append(frame, s.buf.Bytes()...)
		frame = append(frame, ansi.ResetModeSynchronizedOutput...)
	} else {
		frame = s.buf.Bytes()
	}
	_, _ = s.out.Write(frame) // as Bubble Tea's renderer, a failed write is not the chat's end
	s.buf.Reset()
}

// drawnModel is the chat as Bubble Tea runs it: after each message, the
// chat's view goes to the screen. Bubble Tea's own renderer is off, so
// View gives it nothing.
type drawnModel struct {
	c        *chat
	s        *screen
	panicked *string // the panic of Update, with its stack
}

func (m drawnModel) Init() tea.Cmd {
	cmd := m.c.Init()
	m.s.set(m.c.View().Content)
	return cmd
}

func (m drawnModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	defer func() {
		if r := recover(); r != nil {
			// Bubble Tea prints the panic on the alternate screen,
			// which the terminal drops: runProgram prints it again once
			// the screen is given back.
			*m.panicked = fmt.Sprintf("%v\r\n\r\n%s", r, strings.ReplaceAll(string(debug.Stack()), "\n", "\r\n"))
			panic(r)
		}
	}()
	m.s.observe(msg)
	_, cmd := m.c.Update(msg)
	m.s.set(m.c.View().Content)
	return m, cmd
}

func (m drawnModel) View() tea.View { return tea.View{} }

// runProgram runs the chat's Bubble Tea program on the terminal in and
// out until the person leaves or ctx is done, and gives the terminal back
// as it found it. tune, if set, is given the screen before the program
// starts (tests set its clock); opts are more of the program's options.
func runProgram(ctx context.Context, c *chat, in io.Reader, out io.Writer, tune func(*screen), opts ...tea.ProgramOption) error {
	env := os.Environ()
	profile := colorprofile.Detect(out, env)
	var inTTY, outTTY term.File
	if f, ok := in.(term.File); ok && term.IsTerminal(f.Fd()) {
		inTTY = f
	}
	if f, ok := out.(term.File); ok && term.IsTerminal(f.Fd()) {
		outTTY = f
	}
	width, height := 80, 24
	if outTTY != nil {
		if w, h, err := term.GetSize(outTTY.Fd()); err == nil && w > 0 && h > 0 {
			width, height = w, h
		}
	}
	s := newScreen(out, env, profile, runtime.GOOS != "windows" && inTTY == nil, width, height)
	if tune != nil {
		tune(s)
	}
	if inTTY != nil {
		old, err := term.MakeRaw(inTTY.Fd())
		if err != nil {
			return fmt.Errorf("entering raw mode: %w", err)
		}
		defer term.Restore(inTTY.Fd(), old)
	}
	var panicked string
	p := tea.NewProgram(drawnModel{c: c, s: s, panicked: &panicked}, append([]tea.ProgramOption{
		tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out),
		tea.WithoutRenderer(), tea.WithColorProfile(profile), tea.WithWindowSize(width, height),
		// Without its renderer, Bubble Tea's frame ticker only writes
		// its own queued sequences, which the chat sends none of: once a
		// second is enough.
		tea.WithFPS(1),
	}, opts...)...)
	if err := s.start(queryModes(env)); err != nil {
		return err
	}
	if outTTY != nil {
		stopResize := onResize(func() {
			if w, h, err := term.GetSize(outTTY.Fd()); err == nil && w > 0 && h > 0 {
				p.Send(tea.WindowSizeMsg{Width: w, Height: h})
			}
		})
		defer stopResize()
	}
	_, err := p.Run()
	s.stop(err == nil)
	if panicked != "" {
		fmt.Fprintf(os.Stderr, "Caught panic:\r\n\r\n%s\r\n", panicked)
	}
	return err
}

// queryModes says whether to ask the terminal for synchronized output
// and Unicode widths: as Bubble Tea does, not over SSH (unless the
// terminal is one known to answer) nor in Apple's Terminal.
func queryModes(env []string) bool {
	e := uv.Environ(env)
	termType := e.Getenv("TERM")
	termProg, okTermProg := e.LookupEnv("TERM_PROGRAM")
	_, okSSH := e.LookupEnv("SSH_TTY")
	_, okWT := e.LookupEnv("WT_SESSION")
	return (!okTermProg && !okSSH) || okWT ||
		(okTermProg && !strings.Contains(termProg, "Apple") && !okSSH) ||
		strings.Contains(termType, "ghostty") || strings.Contains(termType, "wezterm") ||
		strings.Contains(termType, "alacritty") || strings.Contains(termType, "kitty") ||
		strings.Contains(termType, "rio")
}
