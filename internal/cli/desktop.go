package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/loop"
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
