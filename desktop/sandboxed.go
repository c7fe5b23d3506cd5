package desktop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// SandboxOptions configure a sandboxed desktop ([Start]).
type SandboxOptions struct {
	Options
	// Width and Height are the screen's size; 0 means 1280×800.
	Width, Height int
	// WindowManager is the window manager's command line; nil means
	// twm if it is installed, else none. An empty, non-nil slice means
	// none.
	WindowManager []string
	// Apps are the command lines of the applications started on the
	// desktop, in order; nil means [DefaultApps].
	Apps [][]string
	// Dir, if set, is the folder the desktop's processes may write, kept
	// when it ends (home, the apps' output, the display's log); by
	// default a temporary one, removed when the desktop ends.
	Dir string
	// ReadOnly lists more files and folders the desktop's processes may
	// read (the system's folders are readable: see the sandbox package).
	ReadOnly []string
	// AllowNetwork lets the desktop's processes use the network (the
	// sandbox's rule: all of it or none). By default they have none: the
	// display is then reachable only from inside the sandbox.
	AllowNetwork bool
	// Lifetime bounds how long the desktop lives; 0 means 24 hours.
	Lifetime time.Duration
	// Unconfined starts the desktop without Landlock and namespaces,
	// for machines whose kernel refuses them (the sandbox says so); the
	// display is still private by its cookie.
	Unconfined bool
}

// DefaultApps returns the applications a sandboxed desktop starts unless
// told otherwise: a terminal (st, Debian's stterm) and the browser
// (Chromium), each if it is installed. (xterm does not run in the sandbox
// as root: its shell's process drops supplementary groups, which needs a
// capability the sandbox takes away, and it exits.)
func DefaultApps() [][]string {
	var apps [][]string
	if _, err := exec.LookPath("stterm"); err == nil {
		apps = append(apps, []string{"stterm", "-g", "100x30+20+20"})
	}
	if _, err := exec.LookPath("chromium"); err == nil {
		apps = append(apps, []string{"chromium", "--no-sandbox", "--no-first-run", "--disable-gpu",
			"--disable-dev-shm-usage", "--no-default-browser-check", "--password-store=basic"})
	}
	return apps
}

// agentEnv marks this binary, re-executed in the sandbox, as a desktop's
// agent: the package's init enters agentMain.
const agentEnv = "HRNS_DESKTOP_AGENT"

// agentConfig is what the agent is told, in its environment.
type agentConfig struct {
	Width  int        `json:"width"`
	Height int        `json:"height"`
	WM     []string   `json:"wm,omitempty"`
	Apps   [][]string `json:"apps,omitempty"`
	Dir    string     `json:"dir"`
}

// agentRequest is one tool run the agent is asked for; agentReply its
// answer: a line, followed by Size bytes of the tool's output as they
// are (a screen's dump is megabytes: not worth encoding). The first line
// the agent writes is an agentReply with Display set (or Error).
type agentRequest struct {
	ID      uint64   `json:"id"`
	Argv    []string `json:"argv"`
	Max     int      `json:"max"`
	Timeout int64    `json:"timeout_ms"`
}

type agentReply struct {
	ID      uint64 `json:"id"`
	Size    int    `json:"size,omitempty"`
	Out     []byte `json:"-"`
	Error   string `json:"error,omitempty"`
	Timeout bool   `json:"timeout,omitempty"`
	Display string `json:"display,omitempty"`
}

// Start starts a private desktop in the sandbox: an Xvfb display, the
// window manager and the apps, all confined by the sandbox package (a root
// of the system's folders and o.Dir only, no network unless
// o.AllowNetwork, its own PID namespace, Landlock). The display has no
// Unix socket in the host's file system, and its cookie stays in the
// sandbox's folder: nothing outside connects to it, and nothing on it
// reaches the user's display, home or files. Input and screenshots are
// made in the sandbox by an agent (this binary, re-executed), which runs
// only xdotool and xwd for the desktop. [Desktop.Close] ends every process
// of it; a desktop also ends when ctx is done or o.Lifetime has passed.
func Start(ctx context.Context, o *SandboxOptions) (d *Desktop, err error) {
	var so SandboxOptions
	if o != nil {
		so = *o
	}
	if so.Width <= 0 || so.Height <= 0 {
		so.Width, so.Height = 1280, 800
	}
	if so.Width > MaxScreen || so.Height > MaxScreen {
		return nil, fmt.Errorf("desktop: a screen of %dx%d is larger than %dx%d", so.Width, so.Height, MaxScreen, MaxScreen)
	}
	if so.WindowManager == nil {
		if _, err := exec.LookPath("twm"); err == nil {
			so.WindowManager = []string{"twm"}
		}
	}
	if so.Apps == nil {
		so.Apps = DefaultApps()
	}
	if so.Lifetime <= 0 {
		so.Lifetime = 24 * time.Hour
	}
	for _, tool := range []string{"Xvfb", "xdotool", "xwd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("desktop: %s is not installed (Debian: apt-get install xvfb xdotool x11-apps)", tool)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	keep := so.Dir != ""
	dir := so.Dir
	if !keep {
		if dir, err = os.MkdirTemp("", "hrns-desktop-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(agentConfig{Width: so.Width, Height: so.Height, WM: so.WindowManager, Apps: so.Apps, Dir: dir})
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &agentRunner{in: inW, replies: map[uint64]chan agentReply{}, gone: make(chan struct{}),
		// A screenshot's dump, with room for the rest.
		maxLine: so.Width*so.Height*4 + 2<<20}
	done := make(chan struct{})
	var runErr error
	var result *sandbox.Result
	go func() {
		defer close(done)
		defer outW.Close()
		result, runErr = sandbox.Run(rctx, &sandbox.Spec{
			Command: []string{exe},
			Dir:     home,
			Scratch: filepath.Join(dir, "tmp"),
			ReadOnly: append([]string{exe, "/etc/fonts", "/etc/X11", "/usr/share/fonts", "/usr/share/X11",
				"/etc/xdg", "/etc/alternatives", "/etc/machine-id", "/etc/chromium.d", "/etc/chromium"}, so.ReadOnly...),
			ReadWrite: []string{dir},
			Env: []string{agentEnv + "=" + string(cfg), "HOME=" + home, "XAUTHORITY=" + filepath.Join(dir, "Xauthority"),
				"LANG=C.UTF-8", "PATH=" + sandbox.DefaultPath},
			PrivateTmp:   true,
			Terminals:    true,
			Stdin:        inR,
			Output:       outW,
			AllowNetwork: so.AllowNetwork,
			Limits:       sandbox.Limits{AddressSpace: 0, FileSize: 1 << 30, Processes: 1024},
			Timeout:      so.Lifetime,
			Grace:        2 * time.Second,
			Unconfined:   so.Unconfined,
			// Where this machine isolates commands, a desktop that
			// cannot be isolated (no private /tmp nor terminals) is
			// refused, not run with less.
			RequireIsolation: !so.Unconfined && sandbox.Isolation() == nil,
		})
	}()
	var stopOnce sync.Once
	var stopErr error
	stop := func() error {
		stopOnce.Do(func() {
			inW.Close() // the agent ends its processes and exits
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cancel() // the sandbox kills what is left
				<-done
			}
			cancel()
			outR.Close()
			<-a.gone
			if !keep {
				stopErr = os.RemoveAll(dir)
			}
		})
		return stopErr
	}
	go a.read(outR)
	defer func() {
		if err != nil {
			_ = stop()
		}
	}()
	// The agent's first line: the display, or why there is none.
	select {
	case rep, ok := <-a.first():
		if !ok || rep.Display == "" {
			<-done
			why := rep.Error
			if why == "" && runErr != nil {
				why = runErr.Error()
			} else if why == "" && result != nil {
				why = fmt.Sprintf("the sandbox ended (exit %d%s): %s", result.ExitCode, result.Signal, logTail(dir))
			}
			return nil, fmt.Errorf("desktop: the sandboxed desktop did not start: %s", why)
		}
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("desktop: the sandboxed desktop did not start within 60s: %s", logTail(dir))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d, err = newDesktop(ctx, a, &so.Options)
	if err != nil {
		return nil, err
	}
	d.stop = stop
	d.dir = dir
	return d, nil
}

// logTail returns the end of a desktop's log.
func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "desktop.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// agentRunner runs the tools through the agent in the sandbox.
type agentRunner struct {
	mu      sync.Mutex
	in      io.WriteCloser
	next    uint64
	replies map[uint64]chan agentReply
	firstCh chan agentReply
	dead    error
	gone    chan struct{}
	maxLine int
}

func (a *agentRunner) first() chan agentReply {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstCh == nil {
		a.firstCh = make(chan agentReply, 1)
	}
	return a.firstCh
}

// read reads the agent's replies until its output ends.
func (a *agentRunner) read(r io.Reader) {
	defer close(a.gone)
	first := a.first()
	br := bufio.NewReaderSize(r, 1<<16)
	seenFirst := false
	for {
		line, err := readLine(br, 64<<10)
		if err != nil {
			break
		}
		var rep agentReply
		if json.Unmarshal(line, &rep) != nil || rep.Size < 0 || rep.Size > a.maxLine {
			break // the agent's diagnostics go to its log: this is broken
		}
		if rep.Size > 0 {
			rep.Out = make([]byte, rep.Size)
			if _, err := io.ReadFull(br, rep.Out); err != nil {
				break
			}
		}
		if !seenFirst {
			seenFirst = true
			first <- rep
			continue
		}
		a.mu.Lock()
		ch := a.replies[rep.ID]
		delete(a.replies, rep.ID)
		a.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	a.mu.Lock()
	a.dead = errors.New("the desktop has ended")
	for id, ch := range a.replies {
		close(ch)
		delete(a.replies, id)
	}
	a.mu.Unlock()
	if !seenFirst {
		close(first)
	}
	_, _ = io.Copy(io.Discard, r)
}

// readLine reads one line of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, errors.New("a line too long")
		}
		if err == nil {
			return line, nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}

func (a *agentRunner) run(ctx context.Context, argv []string, max int) ([]byte, error) {
	a.mu.Lock()
	if a.dead != nil {
		a.mu.Unlock()
		return nil, a.dead
	}
	a.next++
	id := a.next
	ch := make(chan agentReply, 1)
	a.replies[id] = ch
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	b, err := json.Marshal(agentRequest{ID: id, Argv: argv, Max: max, Timeout: timeout.Milliseconds()})
	if err == nil {
		_, err = a.in.Write(append(b, '\n'))
	}
	a.mu.Unlock()
	if err != nil {
		return nil, errors.New("the desktop has ended")
	}
	select {
	case rep, ok := <-ch:
		switch {
		case !ok:
			return nil, errors.New("the desktop has ended")
		case rep.Timeout:
			return nil, context.DeadlineExceeded
		case rep.Error != "":
			return nil, errors.New(rep.Error)
		case len(rep.Out) > max:
			return nil, fmt.Errorf("%s wrote more than %d bytes", argv[0], max)
		}
		return rep.Out, nil
	case <-ctx.Done():
		a.mu.Lock()
		delete(a.replies, id)
		a.mu.Unlock()
		return nil, ctx.Err()
	}
}
