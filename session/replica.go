package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// defaultReplicaID names a process by its host and a random suffix, so
// that operators see where a replica runs and two processes on one host
// differ.
func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "hrns"
	}
	host, _, _ = strings.Cut(host, ".")
	return host + "-" + randomHex(4)
}

// ReplicaID returns the name of this process in leases and in the list of
// replicas.
func (m *Manager) ReplicaID() string { return m.owner }

// heartbeat records this replica in the store every third of the lease
// TTL, when the store keeps replicas ([store.Replicas]), until ctx is
// done; it then removes the record.
func (m *Manager) heartbeat(ctx context.Context, rs store.Replicas) {
	tick := time.NewTicker(m.opts.LeaseTTL / 3)
	defer tick.Stop()
	for {
		m.beat(ctx, rs)
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
			defer cancel()
			if err := rs.Leave(lctx, m.owner); err != nil {
				m.log.Warn("removing this replica's record", "err", err)
			}
			return
		case <-tick.C:
		}
	}
}

func (m *Manager) beat(ctx context.Context, rs store.Replicas) {
	host, _ := os.Hostname()
	now := time.Now().UTC()
	m.mu.Lock()
	running := len(m.running)
	m.mu.Unlock()
	err := rs.Beat(ctx, &store.Replica{
		ID: m.owner, Host: host, PID: os.Getpid(),
		StartedAt: m.started, SeenAt: now, ExpiresAt: now.Add(m.opts.LeaseTTL),
		Workers: m.opts.Workers, Running: running,
	})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("recording this replica's heartbeat", "err", err)
		}
		return
	}
	m.mu.Lock()
	m.lastBeat = now
	m.mu.Unlock()
}

// ErrUnhealthy is returned by [Manager.Health] when this replica could not
// record its heartbeat in the store for a lease TTL: it cannot keep its
// leases either, and other replicas take its sessions over.
var ErrUnhealthy = errors.New("replica unhealthy")

// Health reports whether this replica can work: nil, or an error matching
// [ErrUnhealthy] when the store keeps replicas and this one has not
// recorded a heartbeat for a lease TTL (it cannot reach the store).
func (m *Manager) Health() error {
	if _, ok := m.st.(store.Replicas); !ok {
		return nil
	}
	m.mu.Lock()
	last, started := m.lastBeat, m.done != nil
	m.mu.Unlock()
	if !started {
		return nil
	}
	if last.IsZero() {
		last = m.started
	}
	if since := time.Since(last); since > m.opts.LeaseTTL {
		return fmt.Errorf("%w: no heartbeat recorded in the store for %v (lease TTL %v)", ErrUnhealthy, since.Round(time.Millisecond), m.opts.LeaseTTL)
	}
	return nil
}

// Replicas lists the server processes sharing the store, this one
// included. A store that does not keep replicas ([store.Replicas]) is
// used by this process alone, which is the only one listed.
func (m *Manager) Replicas(ctx context.Context) ([]Replica, error) {
	m.mu.Lock()
	running := len(m.running)
	m.mu.Unlock()
	rs, ok := m.st.(store.Replicas)
	if !ok {
		host, _ := os.Hostname()
		return []Replica{{ID: m.owner, Host: host, PID: os.Getpid(), Self: true, Healthy: true,
			StartedAt: m.started, LastSeenAt: time.Now().UTC(), Workers: m.opts.Workers, Running: running, Leases: running}}, nil
	}
	now := time.Now().UTC()
	recs, err := rs.Replicas(ctx, now)
	if err != nil {
		return nil, err
	}
	out := []Replica{}
	for _, r := range recs {
		out = append(out, Replica{ID: r.ID, Host: r.Host, PID: r.PID, Self: r.ID == m.owner, Healthy: now.Before(r.ExpiresAt),
			StartedAt: r.StartedAt, LastSeenAt: r.SeenAt, Workers: r.Workers, Running: r.Running, Leases: r.Leases})
	}
	return out, nil
}
