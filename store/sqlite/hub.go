package sqlite

import "sync"

// hub fans notifications out to in-process subscribers. A send never
// blocks: each subscriber's channel holds at most one pending value, so
// notifications coalesce and none is lost after the last receive.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func (h *hub) init() { h.subs = make(map[string]map[chan struct{}]struct{}) }

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
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
