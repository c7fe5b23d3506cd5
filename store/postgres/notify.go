package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hrns-dev/hrns/store"
)

// Why the commits do not notify. PostgreSQL serialises the commits of
// transactions that called pg_notify: each takes a lock on the notify
// queue (an object lock on pg_database, for the whole server) before it
// commits and keeps it until its commit is durable. With the notification
// in every commit's statement, the store's commits waited for one another
// to be flushed, one at a time, whatever rows they wrote
// (BenchmarkTokenCommitsOneKey: 14 of 16 connections waiting on it).
// So a commit announces its change after it returns (Store.announce): to
// this process's subscribers at once, and to the other processes through
// the notifier, which sends the notifications pending, coalesced, in one
// statement on a connection of its own, the next batch gathering while
// one is sent.
const (
	// maxPending bounds the notifications the notifier holds: past it
	// they are replaced by one that wakes every subscriber of every
	// process (allPayload).
	maxPending = 4096
	// allPayload wakes every subscriber of the processes that receive it.
	allPayload = "*all*"
	// helloPayload is a notifier's first on each connection: it tells the
	// other processes the connection's server process (see watchPeers).
	helloPayload = "+"
	// uncertainAfter is when a change whose commit may or may not have
	// happened (its statement's answer was lost) is announced, in case it
	// did: late enough that a commit still under way is visible by then.
	uncertainAfter = time.Second
	// flushTimeout bounds the last send of Close.
	flushTimeout = 5 * time.Second
	// sendTimeout bounds a send: a connection that does not answer by
	// then (a network partition) is given up for a new one.
	sendTimeout = 10 * time.Second
	// peerCheckEvery is how often a store looks for notifiers of other
	// processes that went away (see watchPeers).
	peerCheckEvery = time.Second
)

// testPeerCheckEvery, when set, replaces peerCheckEvery in the stores
// opened after (tests).
var testPeerCheckEvery atomic.Int64

// notifierName is the application_name of the notifying connections of
// the stores on channel, by which each store finds the others' (see
// watchPeers). It fits in the 63 bytes PostgreSQL keeps.
func notifierName(channel string) string {
	sum := sha256.Sum256([]byte(channel))
	return "hrns notifier " + hex.EncodeToString(sum[:12])
}

// A notifier sends a store's notifications to the other processes, on a
// connection of its own, after the commits they announce.
//
// The notifications pending are a set (a session's id, marked when the
// change may give workers something to claim, or a topic), so that a
// session changed many times while a batch is sent is announced once in
// the next. A batch that fails (the connection is lost) is kept and sent
// again on a new connection: a notification is lost only when the process
// ends without sending it (see watchPeers for what covers that).
type notifier struct {
	cfg     *pgx.ConnConfig
	channel string
	log     *slog.Logger

	mu      sync.Mutex
	pending map[string]bool // session id or topic: whether it wakes the workers
	all     bool            // pending overflowed: wake everything
	closed  bool
	held    bool // tests: no batch is taken

	kick chan struct{} // buffer 1: something is pending
	pid  atomic.Uint32 // the connection's server process; 0 while none
	stop context.CancelFunc
	done chan struct{}
}

// newNotifier connects the notifier of the store whose connections are
// configured as cfg, on channel, says hello on it and starts it: a store
// has its notifier before it commits anything, so that the others can
// tell when it goes away.
func newNotifier(ctx context.Context, cfg *pgx.ConnConfig, channel string, log *slog.Logger) (*notifier, error) {
	cfg = cfg.Copy()
	// Named, so that the other stores find it (watchPeers); not waiting
	// for its commits to be flushed, so that it holds the notify queue's
	// lock only a moment: a notification is no more durable than the
	// listening connections it is for, which learn of a server's crash
	// by losing their connection.
	cfg.RuntimeParams["application_name"] = notifierName(channel)
	cfg.RuntimeParams["synchronous_commit"] = "off"
	n := &notifier{cfg: cfg, channel: channel, log: log, pending: map[string]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	var conn *pgx.Conn
	if err := n.send(ctx, &conn, nil); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go n.run(rctx, conn)
	return n, nil
}

// add makes a notification of topic pending (work: it also wakes the
// workers of the processes that receive it).
func (n *notifier) add(topic string, work bool) {
	n.mu.Lock()
	switch {
	case n.closed || n.all:
	case len(n.pending) >= maxPending && !n.has(topic):
		n.all = true
		clear(n.pending)
	default:
		n.pending[topic] = n.pending[topic] || work
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) has(topic string) bool {
	_, ok := n.pending[topic]
	return ok
}

// hold keeps the notifier from sending until the function it returns is
// called (tests: a commit whose notification has not gone yet).
func (n *notifier) hold() (release func()) {
	n.mu.Lock()
	n.held = true
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		n.held = false
		n.mu.Unlock()
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// drop forgets what is pending and stops the notifier without sending
// it, as a process that crashes does (tests).
func (n *notifier) drop() {
	n.mu.Lock()
	n.closed = true
	clear(n.pending)
	n.all = false
	n.mu.Unlock()
	n.stop()
	<-n.done
}

// take returns the payloads pending, and forgets them.
func (n *notifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.held {
		return nil
	}
	if n.all {
		n.all = false
		return []string{allPayload}
	}
	if len(n.pending) == 0 {
		return nil
	}
	out := make([]string, 0, len(n.pending))
	for topic, work := range n.pending {
		if work {
			topic = "!" + topic
		}
		out = append(out, topic)
	}
	clear(n.pending)
	return out
}

// putBack makes the payloads of a batch that failed pending again.
func (n *notifier) putBack(batch []string) {
	for _, p := range batch {
		if p == helloPayload {
			continue // said again on the next connection
		}
		if p == allPayload {
			n.mu.Lock()
			n.all = true
			clear(n.pending)
			n.mu.Unlock()
			continue
		}
		topic, work := cutWork(p)
		n.add(topic, work)
	}
}

// cutWork splits a payload into its topic and whether it wakes the
// workers.
func cutWork(payload string) (topic string, work bool) {
	return strings.CutPrefix(payload, "!")
}

// sendSQL notifies the store's channel ($1) of each payload of $2, in one
// transaction: the listeners receive them together once it commits.
const sendSQL = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`

// run sends what is pending until ctx is done, then sends what is left
// once more (within flushTimeout).
func (n *notifier) run(ctx context.Context, conn *pgx.Conn) {
	defer close(n.done)
	defer func() {
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(cctx)
			cancel()
		}
	}()
	delay := reconnectFirst
	for {
		select {
		case <-n.kick:
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			if batch := n.take(); len(batch) > 0 {
				n.send(fctx, &conn, batch)
			}
			cancel()
			return
		}
		for {
			batch := n.take()
			if len(batch) == 0 {
				break
			}
			if err := n.send(ctx, &conn, batch); err != nil {
				n.putBack(batch)
				if ctx.Err() != nil {
					break
				}
				n.log.Warn("postgres store: sending notifications", "err", err, "retry_in", delay)
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
				delay = min(2*delay, reconnectLatest)
				continue
			}
			delay = reconnectFirst
		}
	}
}

// send sends batch on *conn, connecting first when it is nil (the
// batch then starts with helloPayload); a connection that fails is
// closed and *conn set to nil.
func (n *notifier) send(ctx context.Context, conn **pgx.Conn, batch []string) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	slices.Sort(batch) // the same order in every batch: nothing depends on it
	if *conn == nil {
		c, err := pgx.ConnectConfig(ctx, n.cfg)
		if err != nil {
			return err
		}
		*conn = c
		n.pid.Store(c.PgConn().PID())
		batch = append([]string{helloPayload}, batch...)
	}
	if _, err := (*conn).Exec(ctx, sendSQL, n.channel, batch); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		(*conn).Close(cctx)
		cancel()
		*conn = nil
		n.pid.Store(0)
		return err
	}
	return nil
}

// close sends what is pending (within flushTimeout) and stops the
// notifier; notifications added afterwards are dropped.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.held = false
	n.mu.Unlock()
	n.stop()
	<-n.done
}

// announce tells the subscribers of this process at once that topic (a
// session's id, or a topic) changed, and the other processes through
// the notifier. work: the change may give workers something to claim.
// Called once the change is committed.
func (s *Store) announce(topic string, work bool) {
	// Workers first: a subscriber of the session that wakes up finds the
	// work announced too, as dispatch does.
	if work {
		s.hub.Notify(store.WorkTopic)
	}
	s.hub.Notify(topic)
	s.notifier.add(topic, work)
}

// announceCommit announces a committed change of the session with the
// id (work: it may give workers something to claim; hooked: it made
// webhook deliveries due).
func (s *Store) announceCommit(id string, work, hooked bool) {
	if hooked {
		s.announce(store.WebhookTopic, false)
	}
	s.announce(id, work)
}

// announceUncertain announces a change whose commit may have happened:
// its statement failed without the server saying so (the connection was
// lost, the context ended while it ran). Announcing a change that did not
// happen only wakes subscribers for nothing; one that did, announced
// before it is visible, would be missed, so it is announced a while
// later.
func (s *Store) announceUncertain(err error, topic string, work bool) {
	if _, ok := errors.AsType[*pgconn.PgError](err); ok || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrNoRows) {
		return // the server said it failed, or it was never sent
	}
	time.AfterFunc(uncertainAfter, func() {
		if !s.closed.Load() {
			s.announce(topic, work)
		}
	})
}

// watchPeers wakes every subscriber of this process when the notifying
// connection of another process sharing the channel goes away: that
// process may have committed changes it had not announced yet (it
// crashed, or its connection broke, between a commit and its
// notification). A process that ends cleanly sends what it holds first,
// so this wakes subscribers for nothing then. It looks every
// peerCheckEvery, so such changes are announced within about that
// (plus the time PostgreSQL takes to see the connection closed: at once
// when the process dies, up to its TCP keepalive when its host or the
// network does; then the session layer's own re-reads bound the delay).
//
// The notifiers it knows are those it found at its last look, at Open
// first, and those that said hello since (a notifier's first
// notification on a connection, sent before its process commits
// anything through it): one that came and went between two looks is
// known too. A server process id taken again by a new notifier between
// two looks would hide the old one's end; Linux hands out process ids
// in turn up to its pid_max before it reuses one.
func (s *Store) watchPeers(ctx context.Context, every time.Duration) {
	defer close(s.peersDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.lookAtPeers(ctx)
	}
}

// lookAtPeers reads the notifiers live now, and wakes every subscriber
// when one it knew is gone.
func (s *Store) lookAtPeers(ctx context.Context) {
	rows, err := s.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, notifierName(s.channel))
	if err != nil {
		return // the next look finds the same, or the listener's reconnection wakes everyone
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return
	}
	if gone := s.peers.update(live, s.notifier.pid.Load()); gone != 0 {
		s.log.Info("postgres store: another process's notifier went away; waking every subscriber", "pid", gone)
		s.hub.NotifyAll()
	}
}

// maxPeers bounds the notifiers a store knows of. Past it, those that
// say hello are not recorded until a look finds them.
const maxPeers = 4096

// peers are the notifiers of the other processes on the store's channel,
// by the server process of their connection.
type peers struct {
	mu    sync.Mutex
	known map[uint32]struct{}
}

// hello records the notifier of pid, which said hello.
func (p *peers) hello(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = map[uint32]struct{}{}
	}
	if len(p.known) < maxPeers {
		p.known[pid] = struct{}{}
	}
}

// update makes live (but own) the notifiers known, and returns one known
// before that is not live any more, or 0.
func (p *peers) update(live []uint32, own uint32) (gone uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid := range p.known {
		if pid != own && !slices.Contains(live, pid) {
			gone = pid
			break
		}
	}
	p.known = make(map[uint32]struct{}, len(live))
	for _, pid := range live {
		if pid != own && len(p.known) < maxPeers {
			p.known[pid] = struct{}{}
		}
	}
	return gone
}
