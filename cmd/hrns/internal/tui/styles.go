package tui

import (
	"charm.land/lipgloss/v2"

	"github.com/hrns-dev/hrns/loop"
)

// styles are the chat's colours. They are the only escape sequences the
// chat writes besides Bubble Tea's own.
type styles struct {
	dim, accent, warn, add, del, user, tool, command, rule lipgloss.Style
	mark                                                   func(string) string
}

func newStyles() *styles {
	rev := lipgloss.NewStyle().Reverse(true)
	return &styles{
		dim:     lipgloss.NewStyle().Faint(true),
		accent:  lipgloss.NewStyle().Foreground(lipgloss.Color("12")).Bold(true),
		warn:    lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
		add:     lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		del:     lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		user:    lipgloss.NewStyle().Foreground(lipgloss.Color("13")).Bold(true),
		tool:    lipgloss.NewStyle().Bold(true),
		command: lipgloss.NewStyle().Bold(true),
		rule:    lipgloss.NewStyle().Faint(true),
		mark:    func(s string) string { return rev.Render(s) },
	}
}

// mode is the style of the permission mode on the status line: the modes
// that run more without asking stand out.
func (s *styles) mode(m loop.PermissionMode) lipgloss.Style {
	switch m {
	case loop.ModeAcceptEdits:
		return s.warn
	case loop.ModeBypass:
		return s.del.Bold(true)
	case loop.ModePlan:
		return s.accent
	}
	return s.dim
}
