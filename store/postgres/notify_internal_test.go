package postgres

import (
	"fmt"
	"slices"
	"testing"
)

// TestNotifierCoalesces: the notifications pending are a set, a
// session's marked when any of its changes gives workers something to
// claim, and bounded: past maxPending they become one that wakes
// everything; a batch that failed is pending again, merged with what came
// meanwhile.
func TestNotifierCoalesces(t *testing.T) {
	tests := []struct {
		name string
		add  func(n *notifier)
		want []string
	}{
		{"nothing", func(*notifier) {}, nil},
		{"one session many times", func(n *notifier) {
			for range 100 {
				n.add("s1", false)
			}
		}, []string{"s1"}},
		{"work wins", func(n *notifier) {
			n.add("s1", false)
			n.add("s1", true)
			n.add("s1", false)
			n.add("s2", false)
		}, []string{"!s1", "s2"}},
		{"topics", func(n *notifier) {
			n.add("*webhooks*", false)
			n.add("*schedules*", false)
			n.add("*webhooks*", false)
		}, []string{"*schedules*", "*webhooks*"}},
		{"full: a session already pending", func(n *notifier) {
			for i := range maxPending {
				n.add(fmt.Sprint("s", i), false)
			}
			n.add("s0", true)
		}, nil}, // checked below: maxPending payloads, s0 marked
		{"overflow", func(n *notifier) {
			for i := range maxPending + 1 {
				n.add(fmt.Sprint("s", i), false)
			}
			n.add("later", true)
		}, []string{allPayload}},
		{"failed batch put back", func(n *notifier) {
			n.add("s1", true)
			n.add("s2", false)
			batch := n.take()
			n.add("s2", true)
			n.add("s3", false)
			n.putBack(batch)
		}, []string{"!s1", "!s2", "s3"}},
		{"failed overflow put back", func(n *notifier) {
			for i := range maxPending + 1 {
				n.add(fmt.Sprint("s", i), false)
			}
			batch := n.take()
			n.add("s1", false)
			n.putBack(batch)
		}, []string{allPayload}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &notifier{pending: map[string]bool{}, kick: make(chan struct{}, 1)}
			tt.add(n)
			got := n.take()
			slices.Sort(got)
			if tt.name == "full: a session already pending" {
				if len(got) != maxPending || !slices.Contains(got, "!s0") {
					t.Fatalf("take() = %d payloads (!s0 in them: %v), want %d with !s0", len(got), slices.Contains(got, "!s0"), maxPending)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("take() = %q, want %q", got, tt.want)
			}
			if again := n.take(); again != nil {
				t.Errorf("second take() = %q, want nothing", again)
			}
		})
	}
}
