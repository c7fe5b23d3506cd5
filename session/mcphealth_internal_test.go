package session

import (
	"fmt"
	"testing"
)

// TestMCPSecretsHealthBounded: the sessions the operator's count tells
// apart are bounded; past the bound every run that leaves a server out
// still counts, and a session seen before the bound counts once.
func TestMCPSecretsHealthBounded(t *testing.T) {
	var m Manager
	h := &m.mcpHealth
	for i := range maxCountedSessions {
		h.leftOut(fmt.Sprintf("s%d", i))
	}
	h.leftOut("s0") // already counted
	if got := m.MCPSecretsHealth().SessionsSinceStart; got != maxCountedSessions {
		t.Fatalf("after %d sessions and one again: %d", maxCountedSessions, got)
	}
	for i := range 3 {
		h.leftOut(fmt.Sprintf("late%d", i))
	}
	h.leftOut("late0") // past the bound: runs, not sessions
	if got, want := m.MCPSecretsHealth().SessionsSinceStart, maxCountedSessions+4; got != want {
		t.Errorf("past the bound: %d, want %d", got, want)
	}
	if len(h.sessions) != maxCountedSessions {
		t.Errorf("the set holds %d sessions, want at most %d", len(h.sessions), maxCountedSessions)
	}
}
