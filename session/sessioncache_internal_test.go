package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/store"
)

// TestSessionCache: a copy comes back, the latest version put wins, the least
// recently used go first, and the bytes held stay within the bound.
func TestSessionCache(t *testing.T) {
	doc := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	c := newSessionCache(10 * (sessionSize(&store.Session{State: doc})))
	if c.get("a") != nil {
		t.Fatal("an empty cache returned a session")
	}
	c.put(&store.Session{ID: "a", Version: 1, State: doc})
	c.put(&store.Session{ID: "a", Version: 2, State: doc})
	got := c.get("a")
	if got == nil || got.Version != 2 {
		t.Fatalf("get = %+v, want version 2", got)
	}
	got.Version = 99
	if c.get("a").Version != 2 {
		t.Error("changing what get returned changed the cache")
	}
	// Two commits put out of order: the later version stays.
	c.put(&store.Session{ID: "a", Version: 1, State: doc})
	if got := c.get("a"); got == nil || got.Version != 2 {
		t.Fatalf("after an older version was put, get = %+v, want version 2", got)
	}
	for i := range 20 {
		c.put(&store.Session{ID: fmt.Sprint(i), State: doc})
		c.get("a") // kept recent
	}
	if c.get("a") == nil {
		t.Error("the most recently used session was dropped")
	}
	if c.get("0") != nil {
		t.Error("the least recently used session was kept")
	}
	if c.size > c.max || len(c.entries) != c.order.Len() {
		t.Errorf("size %d over max %d, or %d entries for %d in order", c.size, c.max, len(c.entries), c.order.Len())
	}
	c.put(&store.Session{ID: "big", State: json.RawMessage(strings.Repeat("y", int(c.max)))})
	if c.get("big") != nil {
		t.Error("a session larger than the bound was kept")
	}
}

// TestSessionCacheConcurrentPuts: commits of one session put at once, in
// any order, leave its latest version, and their gets see versions put.
func TestSessionCacheConcurrentPuts(t *testing.T) {
	c := newSessionCache(1 << 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for v := g; v < 400; v += 8 {
				c.put(&store.Session{ID: "a", Version: int64(v)})
				if got := c.get("a"); got == nil || got.Version < int64(v) {
					t.Errorf("after version %d was put, get = %+v", v, got)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := c.get("a"); got == nil || got.Version != 399 {
		t.Fatalf("get = %+v, want version 399", got)
	}
}
