package session

import (
	"strings"
	"sync"
)

// maxPersonReason bounds a reason kept for a pending approval, in bytes.
const maxPersonReason = 4096

// personReasons keeps, for the calls a run sent to the approver that only
// a person may decide, why (loop.ApprovalRequest.Person). The approver
// runs on the run's goroutines; the suspension's commit reads it.
type personReasons struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *personReasons) set(id, why string) {
	if len(why) > maxPersonReason {
		why = strings.ToValidUTF8(why[:maxPersonReason], "")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[id] = why
}

func (p *personReasons) get(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[id]
}
