package cli

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

// workstationTools are the tools of a workstation besides its browser:
// the file tools and run_command in the session's workspace, and the
// agent's plan.
var workstationTools = []string{"read_file", "list_files", "write_file", "edit_file", "grep", "run_command", "todo_write"}

// addWorkstation offers the environment kind "workstation" of the
// sessions API (hrns serve --workstation): H's workstation is a computer
// the agent drives from a shell, with a browser and files; hrns maps it
// to its sandboxed shell (run_command: the sandbox's confinement, no
// network unless --workstation-network or --command-network, and then
// the public internet only, through the sandbox's proxy, approval as for any call that
// requires it), its file tools in the session's workspace (the directory
// the session files operations serve), and the web environment's browser
// and web_fetch, and, where the X tools are installed (Xvfb, xdotool,
// xwd), a sandboxed desktop of the session's own through the computer
// tool (desktop.go, docs/desktop.md). Since it gives the caller's agent a
// shell on the server, the operator opts in; it needs --workdir.
func (o *serveOptions) addWorkstation(opts *session.Options, log *slog.Logger) error {
	if !o.workstation {
		return nil
	}
	if o.workdir == "" {
		return usagef("--workstation needs --workdir DIR: a workstation's files are the session's workspace in DIR/sessions")
	}
	// The workstation's commands have the network an agent's have (none,
	// or the public internet through the sandbox's proxy, with the
	// operator's allow list): --workstation-network gives it to this
	// environment alone, --command-network to every agent and to it.
	on, allow, err := o.commandNetworkOf(commandNet{on: o.workstationNetwork})
	if err != nil {
		return usagef("--workstation-network: %v", err)
	}
	env := func(dir string) *toolEnv {
		return &toolEnv{Dir: dir, Shell: &tools.ShellOptions{DenyNetwork: !on, PublicNetwork: on, NetworkAllow: allow}}
	}
	files, err := o.workspace(workstationTools, env)
	if err != nil {
		return err
	}
	if opts.SessionEnvironments == nil {
		opts.SessionEnvironments = map[string]session.EnvironmentFunc{}
	}
	web := opts.SessionEnvironments["web"] // the browser, when the server has Chromium
	var screen session.EnvironmentFunc
	if ok, missing := desktopInstalled(); ok {
		screen = workstationDesktop(log, &o.liveDesktops)
	} else {
		log.Info("hrns serve: workstations without a desktop", "missing", missing)
	}
	opts.SessionEnvironments["workstation"] = func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		if err := checkWorkstation(p.Config); err != nil {
			return nil, nil, err
		}
		name := ""
		if p.Session != "" {
			// The workspace of a session whose agent is not the
			// operator's: its ID without dashes (session.WorkspaceName).
			name = strings.ToLower(strings.ReplaceAll(p.Session, "-", ""))
		}
		ts, err := files(name)
		if err != nil {
			return nil, nil, err
		}
		var browser *loop.Toolset
		var closeBrowser func(bool)
		if web != nil {
			if browser, closeBrowser, err = web(&session.EnvironmentParams{Session: p.Session, Profile: p.Profile, Files: p.Files}); err != nil {
				return nil, nil, err
			}
		} else {
			browser = tools.Web(&tools.WebOptions{Logger: sessionLog(log)})
		}
		sets := []*loop.Toolset{ts, browser}
		var closeScreen func(bool)
		if screen != nil {
			var d *loop.Toolset
			if d, closeScreen, err = screen(p); err != nil {
				if closeBrowser != nil {
					closeBrowser(false)
				}
				return nil, nil, err
			}
			sets = append(sets, d)
		}
		closeAll := func(ok bool) {
			if closeBrowser != nil {
				closeBrowser(ok)
			}
			if closeScreen != nil {
				closeScreen(ok)
			}
		}
		all, err := loop.Join(sets...)
		if err != nil {
			closeAll(false)
			return nil, nil, err
		}
		return all, closeAll, nil
	}
	return nil
}

// checkWorkstation checks a workstation entry: hrns runs it on the
// server, so host may be "cloud" (or absent), not "user_device".
func checkWorkstation(raw json.RawMessage) error {
	if b := strings.TrimSpace(string(raw)); b == "" || b == "null" || strings.HasPrefix(b, `"`) {
		return nil
	}
	var e struct {
		Host *string `json:"host"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return errors.New("the workstation environment: " + err.Error())
	}
	if e.Host != nil && *e.Host != "cloud" {
		return errors.New(`the workstation environment: host must be "cloud": hrns runs the workstation on its server (a sandboxed shell, a browser and the session's files), not on a user's device`)
	}
	return nil
}
