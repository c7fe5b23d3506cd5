package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hrns-dev/hrns/store"
)

// Timing of the listening connection. A connection that dies without
// closing (a network partition) is found by the ping after a quiet
// minute at the latest; TCP keepalives may find it sooner.
const (
	pingEvery       = time.Minute
	pingTimeout     = 10 * time.Second
	reconnectFirst  = 100 * time.Millisecond
	reconnectLatest = 5 * time.Second
)

// channelName is the NOTIFY channel of the store whose tables are in
// schema: one channel per schema, so that stores in other schemas of the
// database (other deployments, other test runs) never wake this one.
// Channel names are identifiers of at most 63 bytes.
func channelName(schema string) string {
	name := "hrns_" + schema
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(schema))
		name = "hrns_" + hex.EncodeToString(sum[:16])
	}
	return name
}

// dispatch delivers one notification to the subscribers of this process.
// A commit announces the session's id, marked with a leading "!" when the
// change may give workers something to claim; allPayload wakes every
// subscriber (a notifier that held too many). The notifications this
// process's notifier sent are left out: its subscribers were told at once
// (see Store.announce).
func (s *Store) dispatch(n *pgconn.Notification) {
	if n.PID == s.notifier.pid.Load() {
		return
	}
	payload := n.Payload
	switch payload {
	case helloPayload:
		s.peers.hello(n.PID)
		return
	case allPayload:
		s.hub.NotifyAll()
		return
	}
	id, work := cutWork(payload)
	// Workers first: a subscriber of the session that wakes up finds the
	// work announced too.
	if work {
		s.hub.Notify(store.WorkTopic)
	}
	s.hub.Notify(id)
}

// connectListener opens the dedicated connection that listens on the
// store's channel.
func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.connConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// listen receives the notifications of conn and dispatches them until ctx
// is done, reconnecting when the connection is lost. After a reconnection
// every subscriber is notified: what was committed while no connection
// listened went unannounced.
func (s *Store) listen(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listenDone)
	delay := reconnectFirst
	for {
		if conn == nil {
			var err error
			conn, err = s.connectListener(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("postgres store: reconnecting the listening connection", "err", err, "retry_in", delay)
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				delay = min(2*delay, reconnectLatest)
				continue
			}
			delay = reconnectFirst
			s.log.Info("postgres store: listening again")
			s.hub.NotifyAll()
		}
		err := s.receive(ctx, conn)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		conn.Close(cctx)
		cancel()
		conn = nil
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("postgres store: listening connection lost", "err", err)
		s.hub.NotifyAll()
	}
}

// receive dispatches the notifications of conn until it fails or ctx is
// done, pinging it after each quiet pingEvery.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, s.pingEvery)
		n, err := conn.WaitForNotification(wctx)
		quiet := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			s.dispatch(n)
		case ctx.Err() != nil:
			return ctx.Err()
		case quiet:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
