package session

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/hrns-dev/hrns/loop"
)

// An EnvironmentFunc gives one session an environment of its own, such as
// a browser, each time the session runs (see [Options.SessionEnvironments]).
//
// It returns the environment's tools and a func that the worker calls
// when the run stops: when the session waits (for tool results, an
// approval, a message, its resume), yields, or ends. A waiting session
// holds no goroutine, so it holds no environment either: what must
// outlive a run (a browser profile) is kept by the environment under
// p.Session, and given back the next time the session runs, in this
// process or, if it shares the place where it keeps it, another. ended
// is true when the session has ended: what was kept for it can go. The
// close func may be nil.
//
// While a request is validated it is called with an empty p.Session: it
// must then check p.Config, create nothing, and return a toolset with the
// same tool names, whose tools are never called; its error is reported to
// the caller as a validation error of the environment's entry.
type EnvironmentFunc func(p *EnvironmentParams) (tools *loop.Toolset, close func(ended bool), err error)

// EnvironmentParams are the arguments of an [EnvironmentFunc].
type EnvironmentParams struct {
	// Session is the session's ID; empty while a request is validated.
	Session string
	// Config is the environment's entry as the caller gave it (for
	// example {"kind": "web", "start_url": "https://example.com"}), or
	// nil when the entry was a bare kind or the environment comes with
	// a named agent.
	Config json.RawMessage
	// Profile is the browser profile the entry names
	// (browser_profile_id, or the owner's default with
	// use_default_browser_profile), nil when none. The environment starts
	// its browser from a copy of it, the first time it runs for the
	// session (see [BrowserProfile]).
	Profile *BrowserProfile
	// Files is the session's files folder, the directory "files" of its
	// workspace (absolute; it may not exist yet): where the files of its
	// messages are saved, where a browser saves what it downloads and
	// takes what it uploads, and where files the agent leaves for the
	// user are reported from (AttachmentEvent, origin "agent"). Empty
	// when the manager keeps no workspaces (Options.Workspaces), and
	// while a request is validated.
	Files string
}

// filesFolder is the files folder of session id whose spec is sp, or ""
// without workspaces (see [EnvironmentParams.Files]).
func (m *Manager) filesFolder(sp *spec, id string) string {
	if m.opts.Workspaces == "" || id == "" {
		return ""
	}
	dir, err := filepath.Abs(filepath.Join(m.opts.Workspaces, workspaceOf(sp, id), filesDir))
	if err != nil {
		return ""
	}
	return dir
}

// hasEnvironment reports whether the server offers the environment kind.
func (m *Manager) hasEnvironment(kind string) bool {
	return m.opts.SessionEnvironments[kind] != nil || m.opts.Environments[kind] != nil
}

// environmentKinds lists the kinds offered, for messages.
func (m *Manager) environmentKinds() string {
	all := map[string]bool{}
	for k := range m.opts.Environments {
		all[k] = true
	}
	for k := range m.opts.SessionEnvironments {
		all[k] = true
	}
	return keys(all)
}

// ended reports whether the session has ended, for the close funcs of
// its environments.
func (m *Manager) ended(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.st.GetSession(ctx, id)
	return err == nil && Status(s.Status).Terminal()
}

// joinClosers returns a func that calls each of fs.
func joinClosers(fs []func(bool)) func(bool) {
	return func(ended bool) {
		for _, f := range fs {
			f(ended)
		}
	}
}

var errNoEnvironment = errors.New("environment not configured")
