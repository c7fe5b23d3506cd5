package tui

import "charm.land/lipgloss/v2"

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
