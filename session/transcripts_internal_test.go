package session

import (
	"fmt"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

func TestTranscriptCache(t *testing.T) {
	msgs := func(n int) []llm.Message {
		out := make([]llm.Message, n, n+10) // room to append: the cache must not share it
		for i := range out {
			out[i] = llm.UserMessage(fmt.Sprint(i))
		}
		return out
	}
	c := newTranscriptCache(100)
	c.put("a", "t1", msgs(3), 40)
	tests := []struct {
		id, tag string
		n       int64
		hit     bool
	}{
		{"a", "t1", 3, true},
		{"a", "t2", 3, false}, // committed since, elsewhere
		{"a", "t1", 4, false}, // another length: not this checkpoint
		{"a", "", 3, false},   // a checkpoint without a tag
		{"b", "t1", 3, false},
	}
	for _, tt := range tests {
		got, ok := c.get(tt.id, tt.tag, tt.n)
		if ok != tt.hit || ok && len(got) != int(tt.n) {
			t.Errorf("get(%s, %s, %d) = %d messages, %v; want hit %v", tt.id, tt.tag, tt.n, len(got), ok, tt.hit)
		}
	}
	// A caller appending to what it got does not change the entry.
	got, _ := c.get("a", "t1", 3)
	got = append(got, llm.UserMessage("x"))
	again, _ := c.get("a", "t1", 3)
	if cap(got) == cap(again) && &got[0] == &again[0] || len(again) != 3 {
		t.Errorf("the cached transcript shares its backing array with a caller's")
	}
	// The budget: b and c push a out, the least recently used.
	c.put("b", "t1", msgs(1), 40)
	c.get("a", "t1", 3)
	c.put("c", "t1", msgs(1), 40)
	if _, ok := c.get("b", "t1", 1); ok {
		t.Error("b stayed in the cache beyond its budget")
	}
	if _, ok := c.get("a", "t1", 3); !ok {
		t.Error("a, used last, was evicted")
	}
	if c.size != 80 {
		t.Errorf("size %d, want 80", c.size)
	}
	// Too big for the budget: not kept, and the old entry is gone.
	c.put("a", "t2", msgs(3), 1000)
	if _, ok := c.get("a", "t1", 3); ok || c.sizeOf("a") != 0 {
		t.Error("a replaced by a transcript too big to keep is still cached")
	}
	c.drop("c")
	if c.size != 0 || len(c.entries) != 0 || c.order.Len() != 0 {
		t.Errorf("after dropping all: size %d, %d entries", c.size, len(c.entries))
	}
}
