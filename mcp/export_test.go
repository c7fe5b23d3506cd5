package mcp

// PID returns the process ID of a stdio server, or 0 when it is not
// running.
func (m *Mounted) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil || m.conn.cmd == nil || m.conn.cmd.Process == nil {
		return 0
	}
	return m.conn.cmd.Process.Pid
}
