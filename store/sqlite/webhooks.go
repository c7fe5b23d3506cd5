package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Webhooks = (*Store)(nil)

const webhookColumns = `id, owner, url, events, description, disabled, secret, previous_secret, previous_secret_until,
	last_delivery_status, last_delivery_error, last_delivery_at, last_success_at, consecutive_failures,
	version, created_at, updated_at`

func scanWebhook(sc scanner) (*store.Webhook, error) {
	var (
		w                                           store.Webhook
		events                                      string
		disabled                                    int
		prevUntil, lastAt, lastOK, created, updated int64
	)
	err := sc.Scan(&w.ID, &w.Owner, &w.URL, &events, &w.Description, &disabled, &w.Secret, &w.PreviousSecret, &prevUntil,
		&w.LastDeliveryStatus, &w.LastDeliveryError, &lastAt, &lastOK, &w.ConsecutiveFailures, &w.Version, &created, &updated)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, fmt.Errorf("webhook %s: events: %w", w.ID, err)
	}
	w.Disabled = disabled != 0
	w.PreviousSecretUntil, w.LastDeliveryAt, w.LastSuccessAt = fromNanos(prevUntil), fromNanos(lastAt), fromNanos(lastOK)
	w.CreatedAt, w.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &w, nil
}

func eventsJSON(events []string) string {
	if events == nil {
		events = []string{}
	}
	b, _ := json.Marshal(events)
	return string(b)
}

// CreateWebhook implements [store.Webhooks].
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook) (*store.Webhook, error) {
	n := *w
	n.Events = append([]string(nil), w.Events...)
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now().UTC()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.Version = 1
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		s.mayHaveHooks(n.Owner)
		_, err := tx.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			n.ID, n.Owner, n.URL, eventsJSON(n.Events), n.Description, boolInt(n.Disabled), n.Secret, n.PreviousSecret, nanos(n.PreviousSecretUntil),
			n.LastDeliveryStatus, n.LastDeliveryError, nanos(n.LastDeliveryAt), nanos(n.LastSuccessAt), n.ConsecutiveFailures,
			n.Version, nanos(n.CreatedAt), nanos(n.UpdatedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create webhook: %w", err)
	}
	return &n, nil
}

// GetWebhook implements [store.Webhooks].
func (s *Store) GetWebhook(ctx context.Context, owner, id string) (*store.Webhook, error) {
	got, err := scanWebhook(s.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrWebhookNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook: %w", s.wrap(err))
	}
	return got, nil
}

// ListWebhooks implements [store.Webhooks].
func (s *Store) ListWebhooks(ctx context.Context, p *store.WebhookListParams) ([]*store.Webhook, int, error) {
	total, err := s.CountWebhooks(ctx, p.Owner)
	if err != nil {
		return nil, 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE owner = ? ORDER BY created_at `+order+`, id `+order+` LIMIT ? + 0 OFFSET ? + 0`,
		p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list webhooks: %w", s.wrap(err))
	}
	out, err := collect(rows, scanWebhook)
	if err != nil {
		return nil, 0, fmt.Errorf("list webhooks: %w", s.wrap(err))
	}
	return out, total, nil
}

// CountWebhooks implements [store.Webhooks].
func (s *Store) CountWebhooks(ctx context.Context, owner string) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE owner = ?`, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("count webhooks: %w", s.wrap(err))
	}
	return n, nil
}

// UpdateWebhook implements [store.Webhooks].
func (s *Store) UpdateWebhook(ctx context.Context, w *store.Webhook) (*store.Webhook, error) {
	now := time.Now().UTC()
	var got *store.Webhook
	var enabled bool
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		cur, err := scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND owner = ?`, w.ID, w.Owner))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrWebhookNotFound
		}
		if err != nil {
			return err
		}
		if cur.Version != w.Version {
			return store.ErrConflict
		}
		enabled = cur.Disabled && !w.Disabled
		s.mayHaveHooks(cur.Owner)
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET url = ?, events = ?, description = ?, disabled = ?, secret = ?,
			previous_secret = ?, previous_secret_until = ?, version = version + 1, updated_at = ?,
			consecutive_failures = CASE WHEN ? THEN 0 ELSE consecutive_failures END
			WHERE id = ?`,
			w.URL, eventsJSON(w.Events), w.Description, boolInt(w.Disabled), w.Secret, w.PreviousSecret, nanos(w.PreviousSecretUntil),
			nanos(now), enabled, w.ID)
		if err != nil {
			return err
		}
		got, err = scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, w.ID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update webhook %s: %w", w.ID, err)
	}
	if enabled {
		s.hub.Notify(store.WebhookTopic)
	}
	return got, nil
}

// DeleteWebhook implements [store.Webhooks].
func (s *Store) DeleteWebhook(ctx context.Context, owner, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND owner = ?`, id, owner)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrWebhookNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	return nil
}

// enqueueDeliveries writes, in tx, the outbox rows of a session whose
// status changes from old to new at version (see [store.Webhooks]), and
// reports whether it wrote any.
func (s *Store) enqueueDeliveries(ctx context.Context, tx *writeTx, owner, sessionID, old, new string, version int64, now time.Time) (bool, error) {
	types := store.WebhookEvents(old, new)
	if len(types) == 0 || s.knownHookless(owner) {
		return false, nil
	}
	rows, err := tx.StmtContext(ctx, s.hooksStmt).QueryContext(ctx, owner)
	if err != nil {
		return false, err
	}
	type hook struct {
		id     string
		events []string
	}
	var hooks []hook
	for rows.Next() {
		var h hook
		var events string
		if err := rows.Scan(&h.id, &events); err != nil {
			rows.Close()
			return false, err
		}
		if err := json.Unmarshal([]byte(events), &h.events); err != nil {
			rows.Close()
			return false, fmt.Errorf("webhook %s: events: %w", h.id, err)
		}
		hooks = append(hooks, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(hooks) == 0 {
		s.noHooks(owner)
	}
	wrote := false
	for _, h := range hooks {
		for _, typ := range types {
			if !store.Subscribes(h.events, typ) {
				continue
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, owner, event_id, event_type, session_id,
				session_status, previous_status, occurred_at, state, next_attempt_at, created_at, updated_at)
				VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
				newID(), h.id, owner, store.WebhookEventID(sessionID, version, typ), typ, sessionID,
				new, old, nanos(now), store.DeliveryPending, nanos(now), nanos(now), nanos(now))
			if err != nil {
				return false, err
			}
			wrote = true
		}
	}
	return wrote, nil
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

const deliveryColumns = `d.id, d.webhook_id, d.owner, d.event_id, d.event_type, d.session_id, d.session_status, d.previous_status,
	d.occurred_at, d.state, d.attempts, d.next_attempt_at, d.lease_owner, d.lease_until, d.last_status_code, d.last_error,
	d.created_at, d.updated_at`

func scanDelivery(sc scanner, more ...any) (*store.Delivery, error) {
	var (
		d                                            store.Delivery
		occurred, next, leaseUntil, created, updated int64
	)
	err := sc.Scan(append([]any{&d.ID, &d.WebhookID, &d.Owner, &d.EventID, &d.EventType, &d.SessionID, &d.SessionStatus, &d.PreviousStatus,
		&occurred, &d.State, &d.Attempts, &next, &d.LeaseOwner, &leaseUntil, &d.LastStatusCode, &d.LastError, &created, &updated}, more...)...)
	if err != nil {
		return nil, err
	}
	d.OccurredAt, d.NextAttemptAt, d.LeaseUntil = fromNanos(occurred), fromNanos(next), fromNanos(leaseUntil)
	d.CreatedAt, d.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &d, nil
}

// ClaimDeliveries implements [store.Webhooks]: for each owner with an
// enabled webhook, it counts the owner's leased deliveries and reads its
// oldest due ones (both through partial indexes on owner), then takes
// them in turn across owners.
func (s *Store) ClaimDeliveries(ctx context.Context, p *store.ClaimParams) ([]*store.Delivery, error) {
	now, until := nanos(p.Now), nanos(p.Now.Add(p.TTL))
	limit := max(p.Limit, 1)
	var out []*store.Delivery
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		out = nil
		if p.Token != "" {
			// A call again of a claim whose answer was lost: what it
			// took, if anything, is the answer.
			rows, err := tx.QueryContext(ctx, deliveriesClaimedSQL, p.Token, p.Owner)
			if err != nil {
				return err
			}
			held, err := collect(rows, func(sc scanner) (*store.Delivery, error) { return scanDelivery(sc) })
			if err != nil {
				return err
			}
			for _, d := range held {
				if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET lease_until = ? WHERE id = ?`, until, d.ID); err != nil {
					return err
				}
				d.LeaseUntil = fromNanos(until)
				if d.Webhook, err = scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, d.WebhookID)); err != nil {
					return err
				}
			}
			if len(held) > 0 {
				out = held
				return nil
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT owner FROM webhooks WHERE disabled = 0`)
		if err != nil {
			return err
		}
		var owners []string
		for rows.Next() {
			var o string
			if err := rows.Scan(&o); err != nil {
				rows.Close()
				return err
			}
			owners = append(owners, o)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		var cands []store.RankedDelivery
		for _, o := range owners {
			var busy int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries
				WHERE owner = ? AND state = 'pending' AND lease_owner <> '' AND lease_until > ?`, o, now).Scan(&busy); err != nil {
				return err
			}
			room := limit
			if p.PerKey > 0 {
				room = min(room, p.PerKey-busy)
			}
			if room <= 0 {
				continue
			}
			rows, err := tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
				WHERE d.owner = ?1 AND d.state = 'pending' AND d.next_attempt_at <= ?2 AND (d.lease_owner = '' OR d.lease_until <= ?2) AND w.disabled = 0
				ORDER BY d.next_attempt_at, d.created_at, d.id LIMIT ?3 + 0`, o, now, room)
			if err != nil {
				return err
			}
			ds, err := collect(rows, func(sc scanner) (*store.Delivery, error) { return scanDelivery(sc) })
			if err != nil {
				return err
			}
			for i, d := range ds {
				cands = append(cands, store.RankedDelivery{Delivery: d, Rank: int64(busy + i)})
			}
		}
		slices.SortFunc(cands, store.CompareRanked)
		for _, c := range cands[:min(limit, len(cands))] {
			d := c.Delivery
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?, claim_token = ?, attempts = attempts + 1 WHERE id = ?`,
				p.Owner, until, p.Token, d.ID); err != nil {
				return err
			}
			d.LeaseOwner, d.LeaseUntil = p.Owner, fromNanos(until)
			d.Attempts++
			if d.Webhook, err = scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, d.WebhookID)); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// deliveriesClaimedSQL reads the pending deliveries the claim of token
// ?1 (of owner ?2) holds, through webhook_deliveries_by_claim_token
// (whose condition it repeats, so that SQLite may use it).
const deliveriesClaimedSQL = `SELECT ` + deliveryColumns + ` FROM webhook_deliveries d
	WHERE d.claim_token = ?1 AND d.claim_token != '' AND d.lease_owner = ?2 AND d.state = 'pending'
	ORDER BY d.next_attempt_at, d.created_at, d.id`

// FinishDelivery implements [store.Webhooks].
func (s *Store) FinishDelivery(ctx context.Context, p *store.DeliveryResult) error {
	now := nanos(p.Now)
	a := &p.Attempt
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var webhookID string
		var attempts int
		err := tx.QueryRowContext(ctx, `SELECT webhook_id, attempts FROM webhook_deliveries WHERE id = ? AND state = 'pending' AND lease_owner = ? AND lease_until > ?`,
			p.ID, p.Owner, now).Scan(&webhookID, &attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		state, next := store.DeliveryPending, nanos(p.RetryAt)
		switch {
		case p.Delivered:
			state, next = store.DeliveryDelivered, 0
		case p.RetryAt.IsZero():
			state = store.DeliveryGaveUp
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (delivery_id, n, at, duration, status_code, error) VALUES (?,?,?,?,?,?)
			ON CONFLICT DO UPDATE SET at = excluded.at, duration = excluded.duration, status_code = excluded.status_code, error = excluded.error`,
			p.ID, attempts, nanos(a.At), int64(a.Duration), a.StatusCode, a.Error); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = ?, next_attempt_at = ?, lease_owner = '', lease_until = 0,
			last_status_code = ?, last_error = ?, updated_at = ? WHERE id = ?`,
			state, next, a.StatusCode, a.Error, now, p.ID); err != nil {
			return err
		}
		if p.Delivered {
			_, err = tx.ExecContext(ctx, `UPDATE webhooks SET last_delivery_status = 'succeeded', last_delivery_error = '', last_delivery_at = ?,
				last_success_at = ?, consecutive_failures = 0 WHERE id = ?`, nanos(a.At), nanos(a.At), webhookID)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE webhooks SET last_delivery_status = 'failed', last_delivery_error = ?1, last_delivery_at = ?2,
				consecutive_failures = consecutive_failures + 1,
				disabled = CASE WHEN ?3 > 0 AND consecutive_failures + 1 >= ?3 THEN 1 ELSE disabled END WHERE id = ?4`,
				a.Error, nanos(a.At), p.DisableAfter, webhookID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish delivery %s: %w", p.ID, err)
	}
	return nil
}

// ListDeliveries implements [store.Webhooks].
func (s *Store) ListDeliveries(ctx context.Context, p *store.DeliveryListParams) ([]*store.Delivery, int, error) {
	if _, err := s.GetWebhook(ctx, p.Owner, p.WebhookID); err != nil {
		return nil, 0, err
	}
	where := `d.webhook_id = ? AND d.owner = ?`
	args := []any{p.WebhookID, p.Owner}
	if p.State != "" {
		where += ` AND d.state = ?`
		args = append(args, p.State)
	}
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries d WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d WHERE `+where+
		` ORDER BY d.created_at DESC, d.id DESC LIMIT ? + 0 OFFSET ? + 0`, append(args, limit, max(p.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	var out []*store.Delivery
	byID := map[string]*store.Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("list deliveries: %w", err)
		}
		d.Log = []store.DeliveryAttempt{}
		out = append(out, d)
		byID[d.ID] = d
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	if len(out) == 0 {
		return out, total, nil
	}
	ids := make([]any, len(out))
	for i, d := range out {
		ids[i] = d.ID
	}
	arows, err := s.r.QueryContext(ctx, `SELECT delivery_id, n, at, duration, status_code, error FROM webhook_attempts
		WHERE delivery_id IN (`+strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`) ORDER BY delivery_id, n`, ids...)
	if err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	defer arows.Close()
	for arows.Next() {
		var id string
		var a store.DeliveryAttempt
		var at, dur int64
		if err := arows.Scan(&id, &a.N, &at, &dur, &a.StatusCode, &a.Error); err != nil {
			return nil, 0, fmt.Errorf("list deliveries: %w", err)
		}
		a.At, a.Duration = fromNanos(at), time.Duration(dur)
		byID[id].Log = append(byID[id].Log, a)
	}
	if err := arows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	return out, total, nil
}

// NextDelivery implements [store.Webhooks].
func (s *Store) NextDelivery(ctx context.Context, now time.Time) (time.Time, error) {
	var next sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MIN(CASE WHEN d.lease_owner != '' AND d.lease_until > ?1 AND d.lease_until > d.next_attempt_at
			THEN d.lease_until ELSE d.next_attempt_at END)
		FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.state = 'pending' AND w.disabled = 0`, nanos(now)).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next delivery: %w", s.wrap(err))
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromNanos(next.Int64), nil
}

// PruneDeliveries implements [store.Webhooks].
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE (state != 'pending' AND updated_at < ?1) OR (state = 'pending' AND created_at < ?1)`, nanos(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return int(n), nil
}

// The owners known to have no enabled webhook, so that a commit that
// changes a session's status does not look for its owner's webhooks
// every time: most owners have none. Only writes read and change the
// set, and the writes are serialised on the writer's one connection, so
// the set follows the transactions' order: a write that may give an
// owner a webhook (CreateWebhook, UpdateWebhook: enabled again, other
// events) takes the owner out before its statement, and a transaction
// that does not commit, or a write of a batch rolled back to its
// savepoint, empties the set (a write before the one that found no
// webhook in it, or that write itself, may have deleted or disabled one). Deleting or
// disabling a webhook leaves the set as it is: it holds owners with none
// either way. A SQLite store is one process's (see Open), so no other
// writer changes the table.
type hooklessOwners struct {
	mu     sync.Mutex
	owners map[string]struct{}
}

// maxHookless bounds the set; past it, the set starts again empty.
const maxHookless = 1 << 16

func (s *Store) knownHookless(owner string) bool {
	s.hookless.mu.Lock()
	defer s.hookless.mu.Unlock()
	_, ok := s.hookless.owners[owner]
	return ok
}

func (s *Store) noHooks(owner string) {
	s.hookless.mu.Lock()
	defer s.hookless.mu.Unlock()
	if s.hookless.owners == nil || len(s.hookless.owners) >= maxHookless {
		s.hookless.owners = make(map[string]struct{})
	}
	s.hookless.owners[owner] = struct{}{}
}

func (s *Store) mayHaveHooks(owner string) {
	s.hookless.mu.Lock()
	defer s.hookless.mu.Unlock()
	delete(s.hookless.owners, owner)
}

// forgetHookless empties the set, after a transaction that did not
// commit.
func (s *Store) forgetHookless() {
	s.hookless.mu.Lock()
	defer s.hookless.mu.Unlock()
	s.hookless.owners = nil
}
