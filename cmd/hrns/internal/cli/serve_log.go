package cli

import (
	"context"
	"log/slog"

	"github.com/hrns-dev/hrns/session"
)

// sessionLog is log for the tools of sessions' runs (web_fetch, the MCP
// servers' tools): a record written with a run's context (slog's
// ...Context methods) gets the session's ID as "session", which the
// tools, shared by every session, do not know.
func sessionLog(log *slog.Logger) *slog.Logger {
	return slog.New(sessionHandler{log.Handler()})
}

type sessionHandler struct{ slog.Handler }

func (h sessionHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := session.IDFromContext(ctx); ok {
		r = r.Clone()
		r.AddAttrs(slog.String("session", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h sessionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sessionHandler{h.Handler.WithAttrs(as)}
}

func (h sessionHandler) WithGroup(name string) slog.Handler {
	return sessionHandler{h.Handler.WithGroup(name)}
}
