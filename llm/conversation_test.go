package llm_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

type keyA struct{}
type keyB struct{}

// TestConversationState checks that State makes a key's value once, keeps
// keys apart, and that a nil Conversation keeps nothing.
func TestConversationState(t *testing.T) {
	var c llm.Conversation
	var made atomic.Int32
	init := func() any { made.Add(1); return new(int) }
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.State(keyA{}, init) })
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Fatalf("init called %d times, want 1", made.Load())
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatal("State returned different values for one key")
		}
	}
	if c.State(keyB{}, init) == got[0] {
		t.Error("two keys share a value")
	}
	var nilConv *llm.Conversation
	if nilConv.State(keyA{}, init) == nilConv.State(keyA{}, init) {
		t.Error("a nil Conversation kept a value")
	}
}
