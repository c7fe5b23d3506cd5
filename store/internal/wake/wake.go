// Package wake fans a store's change notifications out to the subscribers
// of one process, by topic (a session ID, or the store's work topic).
//
// Delivery: a send never blocks. Each subscriber's channel holds at most one
// pending value, so notifications coalesce, and none is lost after the last
// receive: Notify and NotifyAll always leave a value pending in every
// channel they reach. Every store backend uses it: SQLite notifies on its
// own commits, PostgreSQL on the notifications its listening connection
// receives.
package wake

import "sync"

// A Hub is a set of subscribers by topic. The zero value is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a value after each Notify of
// topic (coalesced), and a function that ends the subscription; calling it
// more than once is harmless.
func (h *Hub) Subscribe(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[string]map[chan struct{}]struct{})
	}
	set := h.subs[topic]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.subs[topic] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[topic], ch)
			if len(h.subs[topic]) == 0 {
				delete(h.subs, topic)
			}
			h.mu.Unlock()
		})
	}
}

// Notify wakes the subscribers of topic.
func (h *Hub) Notify(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[topic] {
		send(ch)
	}
}

// NotifyAll wakes every subscriber, for when any topic may have changed
// unannounced (a lost listening connection).
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for ch := range set {
			send(ch)
		}
	}
}

func send(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
