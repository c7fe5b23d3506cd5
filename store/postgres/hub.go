package postgres

import "sync"

// hub fans notifications out to the subscribers of this process.
//
// Delivery: a send never blocks. Each subscriber's channel holds at most
// one pending value, so notifications coalesce, and none is lost after
// the last receive: notify and notifyAll always leave a value pending in
// every channel they reach.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newHub() *hub { return &hub{subs: make(map[string]map[chan struct{}]struct{})} }

func (h *hub) subscribe(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
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

func (h *hub) notify(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[topic] {
		send(ch)
	}
}

// notifyAll wakes every subscriber: after the listening connection was
// lost, any topic may have changed unannounced.
func (h *hub) notifyAll() {
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
