package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a [Desktop]. The zero value is usable.
type Options struct {
	// MaxWidth and MaxHeight bound the model's view of the screen: a
	// larger screen is shown scaled down, its aspect ratio kept, and
	// the model's coordinates are scaled back. 0 means 1280×800
	// (Anthropic's recommendation for computer use; XGA, 1024×768, is
	// another good choice).
	MaxWidth, MaxHeight int
	// ActionTimeout bounds one input action (typing gets more, by its
	// length); 0 means 10 seconds. An action that does not finish in
	// time is abandoned and reported, and a screenshot still taken.
	ActionTimeout time.Duration
	// ScreenshotTimeout bounds taking one screenshot; 0 means 10
	// seconds.
	ScreenshotTimeout time.Duration
	// Settle is how long to wait after an action before its screenshot,
	// for the screen to show what it did; 0 means 300 ms, negative none.
	Settle time.Duration
	// MaxImageBytes bounds an encoded screenshot: a PNG larger than
	// this is sent as a JPEG, lower in quality until it fits. 0 means
	// 4 MiB.
	MaxImageBytes int
	// LiveFrames keeps the latest screenshot as a JPEG frame for a
	// person watching the desktop live ([Desktop.Frame]).
	LiveFrames bool
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxWidth <= 0 {
		c.MaxWidth = 1280
	}
	if c.MaxHeight <= 0 {
		c.MaxHeight = 800
	}
	if c.ActionTimeout <= 0 {
		c.ActionTimeout = 10 * time.Second
	}
	if c.ScreenshotTimeout <= 0 {
		c.ScreenshotTimeout = 10 * time.Second
	}
	if c.Settle == 0 {
		c.Settle = 300 * time.Millisecond
	}
	if c.MaxImageBytes <= 0 {
		c.MaxImageBytes = 4 << 20
	}
	return c
}

// A runner runs one of the X tools (xdotool, xwd) against the display and
// returns its standard output, at most max bytes of it.
type runner interface {
	run(ctx context.Context, argv []string, max int) ([]byte, error)
}

// A Desktop is an X display the model controls: it takes screenshots of
// the whole screen and sends input through the X test extension (XTEST),
// with the distribution's xwd and xdotool. Actions are sequential.
type Desktop struct {
	o      Options
	r      runner
	mu     sync.Mutex // one action at a time
	sw, sh int        // the screen
	vw, vh int        // the model's view of it
	stop   func() error
	dir    string // a sandboxed desktop's folder
	liveFrames
}

// Dir returns the folder of a sandboxed desktop ([Start]): its processes'
// home (home/), their output (app-N.log, wm.log) and the display's log
// (desktop.log). It is "" for an opened display.
func (d *Desktop) Dir() string { return d.dir }

// Open returns a desktop on an X display this process can reach: display
// as in $DISPLAY (":1"), with the cookie file xauthority ("" for none).
// This is the user's own display, or one a test started: nothing confines
// what the model does there. [Start] gives a sandboxed one.
func Open(ctx context.Context, display, xauthority string, o *Options) (*Desktop, error) {
	if display == "" {
		return nil, errors.New("desktop: no display")
	}
	env := []string{"DISPLAY=" + display, "PATH=" + os.Getenv("PATH")}
	if xauthority != "" {
		env = append(env, "XAUTHORITY="+xauthority)
	}
	return newDesktop(ctx, &execRunner{env: env}, o)
}

func newDesktop(ctx context.Context, r runner, o *Options) (*Desktop, error) {
	d := &Desktop{o: o.withDefaults(), r: r}
	ctx, cancel := context.WithTimeout(ctx, d.o.ActionTimeout)
	defer cancel()
	out, err := r.run(ctx, []string{"xdotool", "getdisplaygeometry"}, 64)
	if err != nil {
		return nil, fmt.Errorf("desktop: reading the screen's size: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return nil, fmt.Errorf("desktop: the screen's size reads %q", out)
	}
	d.sw, _ = strconv.Atoi(f[0])
	d.sh, _ = strconv.Atoi(f[1])
	if d.sw <= 0 || d.sh <= 0 || d.sw > MaxScreen || d.sh > MaxScreen {
		return nil, fmt.Errorf("desktop: a screen of %dx%d", d.sw, d.sh)
	}
	d.vw, d.vh = fit(d.sw, d.sh, d.o.MaxWidth, d.o.MaxHeight)
	return d, nil
}

// Screen returns the size of the screen in its own pixels.
func (d *Desktop) Screen() (w, h int) { return d.sw, d.sh }

// View returns the size of the model's view of the screen: the size of
// its screenshots, in which its coordinates are given.
func (d *Desktop) View() (w, h int) { return d.vw, d.vh }

// Close ends the desktop. For a sandboxed one ([Start]) it stops the
// display and every process on it; for an opened one it does nothing.
func (d *Desktop) Close() error {
	d.endFrames()
	if d.stop == nil {
		return nil
	}
	return d.stop()
}

// A Result is what an action did.
type Result struct {
	// Text says what was done, or why it was not, for the model.
	Text string
	// Failed is set when the action failed or did not finish in time;
	// Text says why.
	Failed bool
	// Image is the screenshot taken after the action (all actions but
	// cursor_position), encoded as MIMEType; nil if it could not be
	// taken, and Text then says why.
	Image    []byte
	MIMEType string
	// Width and Height are the screenshot's size (the view).
	Width, Height int
}

// Do carries out one action (or the actions of a batch, in turn), already
// checked by [ParseAction] against [Desktop.View], and returns what it did
// with a screenshot taken after it (a batch's, after its last action).
// An action that fails or times out is reported in the result (Failed) with
// the screenshot still taken, so that the model sees the state it left; the
// error is for a desktop that cannot be used at all (no screenshot either),
// or ctx done.
func (d *Desktop) Do(ctx context.Context, a *Action) (*Result, error) {
	if err := a.check(d.vw, d.vh); err != nil {
		return &Result{Text: err.Error(), Failed: true}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if a.Action == ActCursorPosition {
		x, y, err := d.cursor(ctx)
		if err != nil {
			return nil, err
		}
		return &Result{Text: fmt.Sprintf("The pointer is at [%d, %d].", x, y)}, nil
	}
	res := &Result{}
	steps := []*Action{a}
	if a.Action == ActBatch {
		steps = steps[:0]
		for i := range a.Actions {
			steps = append(steps, &a.Actions[i])
		}
	}
	var texts []string
	input := false
	for i, s := range steps {
		if i > 0 && input {
			// A moment between the actions of a batch, for the apps to
			// take each before the next.
			if err := sleep(ctx, min(d.o.Settle, batchGap)); err != nil {
				return nil, err
			}
		}
		text, failed, isInput, err := d.act(ctx, s)
		if err != nil {
			return nil, err
		}
		input = input || isInput
		texts = append(texts, text)
		if failed {
			res.Failed = true
			if left := len(steps) - i - 1; left > 0 {
				texts = append(texts, fmt.Sprintf("The %d actions after it were not done.", left))
			}
			break
		}
	}
	res.Text = strings.Join(texts, " ")
	if input && d.o.Settle > 0 {
		if err := sleep(ctx, d.o.Settle); err != nil {
			return nil, err
		}
	}
	img, mime, err := d.screenshot(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if a.Action == ActScreenshot {
			return nil, err
		}
		res.Text += " No screenshot: " + err.Error()
		return res, nil
	}
	res.Image, res.MIMEType, res.Width, res.Height = img, mime, d.vw, d.vh
	if res.Text == "" || a.Action == ActScreenshot {
		res.Text = fmt.Sprintf("Screenshot (%dx%d).", d.vw, d.vh)
	}
	return res, nil
}

// batchGap is the most time between two actions of a batch.
const batchGap = 100 * time.Millisecond

// act carries out one action of a call, without its screenshot: what it
// did (or why it did not), whether it failed, and whether it was input
// (the screen may change: a settle before the screenshot). The error is
// ctx's.
func (d *Desktop) act(ctx context.Context, a *Action) (text string, failed, input bool, err error) {
	switch a.Action {
	case ActScreenshot:
		return "Took a screenshot.", false, false, nil
	case ActCursorPosition:
		x, y, err := d.cursor(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return "", false, false, ctx.Err()
			}
			return err.Error(), true, false, nil
		}
		return fmt.Sprintf("The pointer was at [%d, %d].", x, y), false, false, nil
	case ActWait:
		if err := sleep(ctx, seconds(a.Duration)); err != nil {
			return "", false, false, err
		}
		return fmt.Sprintf("Waited %gs.", a.Duration), false, false, nil
	}
	argv, timeout, what, err := d.command(a)
	if err != nil {
		return err.Error(), true, false, nil
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	_, err = d.r.run(actx, argv, 4096)
	cancel()
	if ctx.Err() != nil {
		return "", false, false, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Sprintf("The action (%s) did not finish within %s and was stopped; the screen may show part of it.", what, timeout), true, true, nil
		}
		return fmt.Sprintf("The action (%s) failed: %v", what, err), true, true, nil
	}
	return what + ".", false, true, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// point maps a checked coordinate of the view onto the screen.
func (d *Desktop) point(p []float64) (string, string) {
	x := toScreen(int(p[0]), d.vw, d.sw)
	y := toScreen(int(p[1]), d.vh, d.sh)
	return strconv.Itoa(x), strconv.Itoa(y)
}

// command builds the xdotool command line of an input action, its time
// limit, and a description of it for the model.
func (d *Desktop) command(a *Action) (argv []string, timeout time.Duration, what string, err error) {
	argv = []string{"xdotool"}
	timeout = d.o.ActionTimeout
	moveTo := func(p []float64) {
		if p != nil {
			x, y := d.point(p)
			argv = append(argv, "mousemove", x, y)
		}
	}
	at := func(p []float64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf(" at [%d, %d]", int(p[0]), int(p[1]))
	}
	mods, _ := parseModifiers(a.Text) // checked
	withMods := func(f func()) {
		for _, m := range mods {
			argv = append(argv, "keydown", m)
		}
		f()
		for i := len(mods) - 1; i >= 0; i-- {
			argv = append(argv, "keyup", mods[i])
		}
	}
	held := ""
	if len(mods) > 0 {
		held = " holding " + strings.Join(mods, "+")
	}
	switch a.Action {
	case ActMouseMove:
		withMods(func() { moveTo(a.Coordinate) })
		return argv, timeout, "Moved the pointer" + at(a.Coordinate) + held, nil
	case ActLeftClick, ActRightClick, ActMiddleClick, ActDoubleClick, ActTripleClick:
		button, n, name := "1", "1", "Clicked"
		switch a.Action {
		case ActRightClick:
			button, name = "3", "Right-clicked"
		case ActMiddleClick:
			button, name = "2", "Middle-clicked"
		case ActDoubleClick:
			n, name = "2", "Double-clicked"
		case ActTripleClick:
			n, name = "3", "Triple-clicked"
		}
		moveTo(a.Coordinate)
		withMods(func() { argv = append(argv, "click", "--repeat", n, "--delay", "80", button) })
		return argv, timeout, name + at(a.Coordinate) + held, nil
	case ActLeftMouseDown, ActLeftMouseUp:
		moveTo(a.Coordinate)
		verb, name := "mousedown", "Pressed the left button"
		if a.Action == ActLeftMouseUp {
			verb, name = "mouseup", "Released the left button"
		}
		withMods(func() { argv = append(argv, verb, "1") })
		return argv, timeout, name + at(a.Coordinate) + held, nil
	case ActLeftClickDrag:
		moveTo(a.StartCoordinate)
		withMods(func() {
			argv = append(argv, "mousedown", "1", "sleep", "0.05")
			for _, p := range a.Path {
				moveTo(p)
				argv = append(argv, "sleep", "0.03")
			}
			moveTo(a.Coordinate)
			argv = append(argv, "sleep", "0.05", "mouseup", "1")
		})
		from := "from the pointer"
		if a.StartCoordinate != nil {
			from = fmt.Sprintf("from [%d, %d]", int(a.StartCoordinate[0]), int(a.StartCoordinate[1]))
		}
		return argv, timeout, fmt.Sprintf("Dragged %s to [%d, %d]%s", from, int(a.Coordinate[0]), int(a.Coordinate[1]), held), nil
	case ActScroll:
		button := map[string]string{"up": "4", "down": "5", "left": "6", "right": "7"}[a.ScrollDirection]
		moveTo(a.Coordinate)
		withMods(func() {
			argv = append(argv, "click", "--repeat", strconv.Itoa(a.ScrollAmount), "--delay", "40", button)
		})
		return argv, timeout, fmt.Sprintf("Scrolled %s by %d%s%s", a.ScrollDirection, a.ScrollAmount, at(a.Coordinate), held), nil
	case ActType:
		// xdotool types a character every 12 ms, and more for
		// characters it must map to a free key code first.
		n := len([]rune(a.Text))
		timeout += time.Duration(n) * 40 * time.Millisecond
		argv = append(argv, "type", "--delay", "12", "--", a.Text)
		return argv, timeout, fmt.Sprintf("Typed %d characters", n), nil
	case ActKey:
		keys, err := parseKeys(a.Text)
		if err != nil {
			return nil, 0, "", err
		}
		argv = append(argv, "key", "--delay", "50", "--")
		argv = append(argv, keys...)
		return argv, timeout, "Pressed " + strings.Join(keys, " "), nil
	case ActHoldKey:
		keys, err := parseKeys(a.Text)
		if err != nil {
			return nil, 0, "", err
		}
		argv = append(argv, "keydown", "--")
		argv = append(argv, keys...)
		argv = append(argv, "sleep", strconv.FormatFloat(a.Duration, 'f', 3, 64), "keyup", "--")
		argv = append(argv, keys...)
		timeout += seconds(a.Duration)
		return argv, timeout, fmt.Sprintf("Held %s for %gs", strings.Join(keys, " "), a.Duration), nil
	}
	return nil, 0, "", fmt.Errorf("unknown action %q", a.Action)
}

// cursor returns the pointer's position in the view.
func (d *Desktop) cursor(ctx context.Context) (int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, d.o.ActionTimeout)
	defer cancel()
	out, err := d.r.run(ctx, []string{"xdotool", "getmouselocation", "--shell"}, 256)
	if err != nil {
		return 0, 0, fmt.Errorf("desktop: reading the pointer: %w", err)
	}
	var x, y int
	var okX, okY bool
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "X="); ok {
			x, _ = strconv.Atoi(v)
			okX = true
		}
		if v, ok := strings.CutPrefix(l, "Y="); ok {
			y, _ = strconv.Atoi(v)
			okY = true
		}
	}
	if !okX || !okY {
		return 0, 0, fmt.Errorf("desktop: the pointer's position reads %q", out)
	}
	return toView(x, d.sw, d.vw), toView(y, d.sh, d.vh), nil
}

// Screenshot returns the screen as the model sees it: scaled to the view,
// encoded as PNG (or JPEG if the PNG is over Options.MaxImageBytes).
func (d *Desktop) Screenshot(ctx context.Context) (img []byte, mimeType string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.screenshot(ctx)
}

func (d *Desktop) screenshot(ctx context.Context) ([]byte, string, error) {
	raw, err := d.capture(ctx)
	if err != nil {
		return nil, "", err
	}
	view := resize(raw, d.vw, d.vh)
	d.keepFrame(view)
	return encode(view, d.o.MaxImageBytes)
}

// capture reads the whole screen in its own pixels.
func (d *Desktop) capture(ctx context.Context) (*image.RGBA, error) {
	ctx, cancel := context.WithTimeout(ctx, d.o.ScreenshotTimeout)
	defer cancel()
	// The dump's header, its window name and a colormap, then the pixels.
	max := d.sw*d.sh*4 + 1<<20
	out, err := d.r.run(ctx, []string{"xwd", "-root", "-silent"}, max)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("desktop: the screenshot took longer than %s", d.o.ScreenshotTimeout)
		}
		return nil, fmt.Errorf("desktop: taking a screenshot: %w", err)
	}
	img, err := decodeXWD(out)
	if err != nil {
		return nil, fmt.Errorf("desktop: reading the screenshot: %w", err)
	}
	if img.Rect.Dx() != d.sw || img.Rect.Dy() != d.sh {
		return nil, fmt.Errorf("desktop: the screenshot is %dx%d, the screen %dx%d", img.Rect.Dx(), img.Rect.Dy(), d.sw, d.sh)
	}
	return img, nil
}

// encode encodes img as PNG, or as JPEG of decreasing quality when the PNG
// is larger than max bytes.
func encode(img image.Image, max int) ([]byte, string, error) {
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, img); err != nil {
		return nil, "", err
	}
	if b.Len() <= max {
		return b.Bytes(), "image/png", nil
	}
	for _, q := range []int{85, 70, 50, 30} {
		b.Reset()
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
			return nil, "", err
		}
		if b.Len() <= max {
			return b.Bytes(), "image/jpeg", nil
		}
	}
	return nil, "", fmt.Errorf("desktop: the screenshot takes more than %d bytes even as a JPEG", max)
}

// execRunner runs the tools as processes of this one, with env.
type execRunner struct{ env []string }

func (r *execRunner) run(ctx context.Context, argv []string, max int) ([]byte, error) {
	return runTool(ctx, argv, r.env, max)
}

// runTool runs one X tool and returns at most max bytes of its output; a
// tool that writes more, fails or outlives ctx is an error.
func runTool(ctx context.Context, argv, env []string, max int) ([]byte, error) {
	switch argv[0] {
	case "xdotool", "xwd":
	default:
		return nil, fmt.Errorf("desktop: %q is not a tool of the desktop", argv[0])
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.WaitDelay = time.Second
	var stderr limitedBuffer
	stderr.max = 2048
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	data, rerr := io.ReadAll(io.LimitReader(out, int64(max)+1))
	if rerr == nil && len(data) > max {
		rerr = fmt.Errorf("%s wrote more than %d bytes", argv[0], max)
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rerr != nil {
		return nil, rerr
	}
	if werr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return nil, fmt.Errorf("%s: %v: %s", argv[0], werr, msg)
		}
		return nil, fmt.Errorf("%s: %v", argv[0], werr)
	}
	return data, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
