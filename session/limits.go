package session

import (
	"errors"
	"fmt"

	"github.com/hrns-dev/hrns/llm"
)

// MaxUnreadBytes is the default bound on what a session holds of input
// its agent has not read yet (Options.MaxUnreadBytes): messages sent to it and errors posted without a call
// (tool_results with an error_event and no tool_req), kept in its state
// until its next step. A session waiting for tool results does not step,
// so without the bound one key's posts grew a waiting session's state, and
// what each commit encodes, without end.
const MaxUnreadBytes = 16 << 20

// ErrSessionFull: input would take what a session holds unread past
// Options.MaxUnreadBytes; nothing of it is recorded. The server answers
// 413.
var ErrSessionFull = errors.New("session full")

// messageBytes is the size of a message's text and inline media.
func messageBytes(msg *llm.Message) int {
	n := 0
	for _, p := range msg.Parts {
		n += len(p.Text)
		if p.Media != nil {
			n += len(p.Media.Data) + len(p.Media.URL)
		}
	}
	return n
}

// checkUnread returns an error wrapping [ErrSessionFull] when input of
// adding bytes would take st's unread input past the bound.
func (m *Manager) checkUnread(st *state, adding int) error {
	limit := m.opts.MaxUnreadBytes
	if limit <= 0 {
		limit = MaxUnreadBytes
	}
	held := 0
	for i := range st.Inbox {
		held += messageBytes(&st.Inbox[i].Message)
	}
	if held+adding > limit {
		return fmt.Errorf("%w: it holds %d bytes of input its agent has not read, and at most %d: wait until the agent has read them (a session waiting for tool results reads them once it runs again)",
			ErrSessionFull, held, limit)
	}
	return nil
}
