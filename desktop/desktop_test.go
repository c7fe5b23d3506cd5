package desktop

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needX skips a test on a machine without the X tools (.ci/run installs
// them: xvfb, xdotool, x11-apps, stterm, twm).
func needX(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"Xvfb", "xdotool", "xwd", "stterm", "xmessage"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// fruitApps are the test's apps: a dialog whose buttons print their name
// (xmessage -print), and a terminal whose script asks for a name, writes
// what was typed to a file and then paints a green bar.
func fruitApps(out string) [][]string {
	script := `printf 'Name: '; read name; printf '%s\n' "$name" > ` + out + `; printf '\033[42m%60s\033[0m\n' ' '; sleep 600`
	return [][]string{
		{"xmessage", "-print", "-buttons", "Apple,Banana", "-geometry", "+100+100", "Pick a fruit"},
		{"stterm", "-c", "Term", "-g", "60x8+300+300", "-e", "sh", "-c", script},
	}
}

// startFruit starts a sandboxed desktop of 1600x1000 (seen as 1280x800)
// with the fruit apps, and waits until both windows are there.
func startFruit(t *testing.T, o Options) (*Desktop, string) {
	t.Helper()
	needX(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "home", "typed.txt")
	if o.Settle == 0 {
		o.Settle = 200 * time.Millisecond
	}
	// No window manager: windows are where they ask to be, and xdotool
	// reports their places right (with twm's frames it does not).
	d, err := Start(context.Background(), &SandboxOptions{Width: 1600, Height: 1000, Options: o, Dir: dir, Apps: fruitApps(out), WindowManager: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, class := range []string{"Xmessage", "Term"} {
		waitWindow(t, d, class)
	}
	return d, out
}

// window returns the geometry of the first window of an X class, in
// screen pixels: x, y, width, height.
func window(d *Desktop, class string) (r image.Rectangle, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := d.r.run(ctx, []string{"xdotool", "search", "--onlyvisible", "--class", class, "getwindowgeometry", "--shell"}, 4096)
	if err != nil {
		return r, err
	}
	v := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(l, "="); ok {
			if _, seen := v[k]; !seen {
				v[k], _ = strconv.Atoi(val)
			}
		}
	}
	if v["WIDTH"] == 0 {
		return r, fmt.Errorf("no window of class %s: %q", class, b)
	}
	return image.Rect(v["X"], v["Y"], v["X"]+v["WIDTH"], v["Y"]+v["HEIGHT"]), nil
}

func waitWindow(t *testing.T, d *Desktop, class string) image.Rectangle {
	t.Helper()
	var err error
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		var r image.Rectangle
		if r, err = window(d, class); err == nil {
			return r
		}
	}
	logs := ""
	for _, f := range []string{"desktop", "wm", "app-0", "app-1"} {
		b, _ := os.ReadFile(filepath.Join(d.Dir(), f+".log"))
		logs += fmt.Sprintf("\n%s.log: %s", f, b)
	}
	t.Fatalf("no %s window: %v%s", class, err, logs)
	return image.Rectangle{}
}

// viewPoint maps a screen point to the model's view.
func viewPoint(d *Desktop, x, y int) []float64 {
	return []float64{float64(toView(x, d.sw, d.vw)), float64(toView(y, d.sh, d.vh))}
}

// greenIn counts the pixels of a screenshot that are the terminal's green
// (ANSI 42 in xterm: 0x00cd00).
func greenIn(t *testing.T, img []byte) int {
	t.Helper()
	m, _, err := image.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := m.At(x, y).RGBA()
			if r>>8 < 60 && g>>8 > 150 && bl>>8 < 60 {
				n++
			}
		}
	}
	return n
}

// waitFile waits for a file to hold something.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	for range 100 {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s stays empty", p)
	return ""
}

// TestSandboxedDesktop clicks a dialog's button and types into a terminal
// on a sandboxed desktop, and reads the results back from the apps' own
// output and from the screenshot.
func TestSandboxedDesktop(t *testing.T) {
	d, typed := startFruit(t, Options{})
	if w, h := d.View(); w != 1280 || h != 800 {
		t.Fatalf("view %dx%d", w, h)
	}
	ctx := context.Background()
	shot, err := d.Do(ctx, &Action{Action: ActScreenshot})
	if err != nil || shot.Failed {
		t.Fatalf("%v %+v", err, shot)
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(shot.Image)); err != nil || cfg.Width != 1280 || cfg.Height != 800 {
		t.Fatalf("screenshot %+v %v", cfg, err)
	}
	if greenIn(t, shot.Image) != 0 {
		t.Fatal("green before typing")
	}
	// The Banana button is at the dialog's bottom right.
	xm := waitWindow(t, d, "Xmessage")
	res, err := d.Do(ctx, &Action{Action: ActLeftClick, Coordinate: viewPoint(d, xm.Max.X-25, xm.Max.Y-12)})
	if err != nil || res.Failed || res.Image == nil {
		t.Fatalf("%v %+v", err, res)
	}
	if got := waitFile(t, filepath.Join(d.Dir(), "app-0.log")); !strings.HasPrefix(got, "Banana\n") {
		t.Fatalf("the dialog printed %q", got)
	}
	// Into the terminal: the pointer over it gives it the keyboard.
	xt := waitWindow(t, d, "Term")
	for _, a := range []*Action{
		{Action: ActLeftClick, Coordinate: viewPoint(d, xt.Min.X+40, xt.Min.Y+30)},
		{Action: ActType, Text: "Ada Lovelace"},
		{Action: ActKey, Text: "Return"},
	} {
		if res, err := d.Do(ctx, a); err != nil || res.Failed {
			t.Fatalf("%s: %v %+v", a.Action, err, res)
		}
	}
	if got := waitFile(t, typed); got != "Ada Lovelace\n" {
		t.Fatalf("the terminal read %q", got)
	}
	shot, err = d.Do(ctx, &Action{Action: ActScreenshot})
	if err != nil {
		t.Fatal(err)
	}
	if n := greenIn(t, shot.Image); n < 1000 {
		t.Fatalf("%d green pixels after typing", n)
	}
	pos, err := d.Do(ctx, &Action{Action: ActCursorPosition})
	if err != nil || !strings.Contains(pos.Text, fmt.Sprintf("[%d, %d]", toView(xt.Min.X+40, d.sw, d.vw), toView(xt.Min.Y+30, d.sh, d.vh))) {
		t.Fatalf("%v %+v", err, pos)
	}
}

// desktopProcs lists the processes whose command line or working folder
// is inside dir: the desktop's.
func desktopProcs(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if strings.Contains(string(cmd), dir) || strings.HasPrefix(cwd, dir) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// TestDesktopEndsEverything: the desktop as it starts by default (twm, a
// terminal without a place of its own, which twm places), and after Close
// no process of it is left, and its temporary folder is gone.
func TestDesktopEndsEverything(t *testing.T) {
	needX(t)
	d, err := Start(context.Background(), &SandboxOptions{Width: 800, Height: 600,
		Apps: [][]string{{"stterm", "-c", "Term"}, {"xmessage", "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := d.Dir()
	waitWindow(t, d, "Term")
	if len(desktopProcs(dir)) < 3 { // Xvfb, the window manager, the apps
		t.Fatalf("the desktop's processes: %q", desktopProcs(dir))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if p := desktopProcs(dir); len(p) != 0 {
		t.Fatalf("left after Close: %q", p)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the folder stays: %v", err)
	}
	if _, err := d.Do(context.Background(), &Action{Action: ActScreenshot}); err == nil {
		t.Fatal("a screenshot of a closed desktop")
	}
}

// TestStuckDisplay: with the display frozen, an action and its screenshot
// time out and say so, the call returns, and the desktop works again once
// the display does.
func TestStuckDisplay(t *testing.T) {
	d, _ := startFruit(t, Options{ActionTimeout: time.Second, ScreenshotTimeout: 2 * time.Second})
	var xvfb int
	for _, p := range desktopProcs(d.Dir()) {
		if strings.Contains(p, "Xvfb") {
			xvfb, _ = strconv.Atoi(strings.Fields(p)[0])
		}
	}
	if xvfb == 0 {
		t.Fatal("no Xvfb")
	}
	if err := syscall.Kill(xvfb, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	res, err := d.Do(context.Background(), &Action{Action: ActLeftClick, Coordinate: []float64{10, 10}})
	syscall.Kill(xvfb, syscall.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed || !strings.Contains(res.Text, "did not finish") || !strings.Contains(res.Text, "No screenshot") {
		t.Fatalf("%+v", res)
	}
	var shot *Result
	for range 20 { // the agent finishes the runs it was given first
		if shot, err = d.Do(context.Background(), &Action{Action: ActScreenshot}); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || shot.Image == nil {
		t.Fatalf("after the display woke: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(shot.Image)); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultDesktop: the desktop as it starts by default shows a terminal
// and the browser (Chromium's launcher reads /etc/chromium.d, which the
// sandbox must let it read, or it exits at once).
func TestDefaultDesktop(t *testing.T) {
	needX(t)
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("no chromium")
	}
	d, err := Start(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	waitWindow(t, d, "st-256color")
	waitWindow(t, d, "chromium")
}

// TestDesktopAppsEndGently: Close asks the apps to end before it kills
// them, so an app that saves its work when told to end (SIGTERM) saves
// it, and one that ignores the request is killed once the grace is over;
// nothing of the desktop is left either way.
func TestDesktopAppsEndGently(t *testing.T) {
	needX(t)
	dir := t.TempDir()
	saver := `trap 'echo saved > "$HOME/saved"; exit 0' TERM; echo up > "$HOME/saver"; while :; do sleep 0.1; done`
	stubborn := `trap '' TERM; echo up > "$HOME/stubborn"; while :; do sleep 0.1; done`
	d, err := Start(context.Background(), &SandboxOptions{Width: 800, Height: 600, Dir: dir, WindowManager: []string{},
		Apps: [][]string{{"sh", "-c", saver}, {"sh", "-c", stubborn}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "home", "saver"))
	waitFile(t, filepath.Join(dir, "home", "stubborn"))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "home", "saved")); err != nil || string(got) != "saved\n" {
		t.Fatalf("the app could not save as it ended: %q %v", got, err)
	}
	if p := desktopProcs(dir); len(p) != 0 {
		t.Fatalf("left after Close: %q", p)
	}
}
