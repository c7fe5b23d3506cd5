package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

// desktopTools starts the sandboxed desktop of --desktop and returns its
// computer tool, with a func that ends the desktop (every process of it)
// when the run ends. Without --desktop it returns nil.
func desktopTools(ctx context.Context, o *runOptions, note func(string)) (*loop.Toolset, func(), error) {
	if !o.desktop {
		if o.desktopSize != "" || len(o.desktopApps) > 0 || o.desktopWM != "" || o.desktopNetwork || o.desktopDir != "" {
			return nil, nil, usagef("the --desktop-* flags need --desktop")
		}
		return nil, func() {}, nil
	}
	so := &desktop.SandboxOptions{AllowNetwork: o.desktopNetwork, Dir: o.desktopDir, Unconfined: o.noSandbox}
	if o.desktopSize != "" {
		w, h, ok := strings.Cut(o.desktopSize, "x")
		var err1, err2 error
		so.Width, err1 = strconv.Atoi(w)
		so.Height, err2 = strconv.Atoi(h)
		if !ok || err1 != nil || err2 != nil || so.Width < 320 || so.Height < 240 || so.Width > desktop.MaxScreen || so.Height > desktop.MaxScreen {
			return nil, nil, usagef("--desktop-size %q: want WIDTHxHEIGHT, from 320x240 to %dx%d", o.desktopSize, desktop.MaxScreen, desktop.MaxScreen)
		}
	}
	switch o.desktopWM {
	case "":
	case "none":
		so.WindowManager = []string{}
	default:
		argv, err := splitCommand(o.desktopWM)
		if err != nil || len(argv) == 0 {
			return nil, nil, usagef("--desktop-wm %q: not a command line", o.desktopWM)
		}
		so.WindowManager = argv
	}
	for _, app := range o.desktopApps {
		if app == "none" {
			so.Apps = [][]string{}
			continue
		}
		argv, err := splitCommand(app)
		if err != nil || len(argv) == 0 {
			return nil, nil, usagef("--desktop-app %q: not a command line", app)
		}
		so.Apps = append(so.Apps, argv)
	}
	d, err := desktop.Start(ctx, so)
	if err != nil {
		return nil, nil, fmt.Errorf("--desktop: %w", err)
	}
	sw, sh := d.Screen()
	vw, vh := d.View()
	where := "sandboxed"
	if o.noSandbox {
		where = "unconfined (--no-sandbox)"
	}
	note(fmt.Sprintf("desktop: a %s display of %dx%d, seen by the model as %dx%d; its folder: %s", where, sw, sh, vw, vh, d.Dir()))
	return d.Tools(), func() { d.Close() }, nil
}

// liveDesktopFrame is the server's LiveDesktopFrame: the latest picture of
// a session's desktop while it runs.
func (o *serveOptions) liveDesktopFrame(ctx context.Context, id string) ([]byte, time.Time, error) {
	f, err := o.liveDesktops.Frame(ctx, id)
	return f.JPEG, f.At, err
}

// desktopInstalled reports whether the X tools a sandboxed desktop needs
// are installed, and names the first one missing.
func desktopInstalled() (ok bool, missing string) {
	for _, tool := range []string{"Xvfb", "xdotool", "xwd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool
		}
	}
	return true, ""
}

// workstationDesktop is the desktop of a workstation (serve_workstation.go):
// a sandboxed desktop (desktop.Lazy: started on the computer tool's first
// call) for each run of a session, ended when the run stops. A session
// that waits (for a client's tool result, an approval, a message) holds
// no environment, so its next run gets a fresh desktop. While the run
// goes on, the desktop is in live under the session's ID, keeping frames
// for the page's live view.
func workstationDesktop(log *slog.Logger, live *desktop.Live) session.EnvironmentFunc {
	return func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		l := desktop.NewLazy(&desktop.SandboxOptions{Options: desktop.Options{LiveFrames: p.Session != ""}})
		if p.Session == "" {
			return l.Tools(), nil, nil // validating a request: nothing starts
		}
		live.Add(p.Session, l)
		return l.Tools(), func(bool) {
			live.Remove(p.Session, l)
			if err := l.Close(); err != nil {
				log.Warn("closing a session's desktop", "session", p.Session, "err", err)
			}
		}, nil
	}
}
