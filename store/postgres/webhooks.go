package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Webhooks = (*Store)(nil)

// hookArrays are the event types and ids enqueueSQL takes for a session
// whose status becomes status at version.
func hookArrays(sessionID, status string, version int64) (types, ids []string) {
	types = store.WebhookEvents("", status)
	ids = make([]string, len(types))
	for i, t := range types {
		ids[i] = store.WebhookEventID(sessionID, version, t)
	}
	return types, ids
}

const webhookColumns = `id, owner, url, events, description, disabled, secret, previous_secret, previous_secret_until,
	last_delivery_status, last_delivery_error, last_delivery_at, last_success_at, consecutive_failures,
	version, created_at, updated_at`

func scanWebhook(row pgx.Row) (*store.Webhook, error) {
	var (
		w                                           store.Webhook
		prevUntil, lastAt, lastOK, created, updated pgtype.Timestamptz
	)
	err := row.Scan(&w.ID, &w.Owner, &w.URL, &w.Events, &w.Description, &w.Disabled, &w.Secret, &w.PreviousSecret, &prevUntil,
		&w.LastDeliveryStatus, &w.LastDeliveryError, &lastAt, &lastOK, &w.ConsecutiveFailures, &w.Version, &created, &updated)
	if err != nil {
		return nil, err
	}
	if w.Events == nil {
		w.Events = []string{}
	}
	w.PreviousSecretUntil, w.LastDeliveryAt, w.LastSuccessAt = fromTS(prevUntil), fromTS(lastAt), fromTS(lastOK)
	w.CreatedAt, w.UpdatedAt = fromTS(created), fromTS(updated)
	return &w, nil
}

func nonNil(events []string) []string {
	if events == nil {
		return []string{}
	}
	return events
}

// CreateWebhook implements [store.Webhooks].
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *w
	n.Events = append([]string{}, w.Events...)
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = entryTime(n.CreatedAt), entryTime(n.UpdatedAt)
	n.PreviousSecretUntil, n.LastDeliveryAt, n.LastSuccessAt = microTime(n.PreviousSecretUntil), microTime(n.LastDeliveryAt), microTime(n.LastSuccessAt)
	n.Version = 1
	_, err := s.pool.Exec(ctx, `INSERT INTO hrns_webhooks (`+webhookColumns+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)`,
		n.ID, n.Owner, n.URL, n.Events, text(n.Description), n.Disabled, n.Secret, n.PreviousSecret, ts(n.PreviousSecretUntil),
		n.LastDeliveryStatus, n.LastDeliveryError, ts(n.LastDeliveryAt), ts(n.LastSuccessAt), n.ConsecutiveFailures,
		n.Version, ts(n.CreatedAt), ts(n.UpdatedAt))
	if err != nil {
		return nil, fmt.Errorf("create webhook: %w", s.wrap(err))
	}
	return &n, nil
}

// microTime is t as PostgreSQL keeps it (microseconds, UTC); zero stays
// zero.
func microTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return entryTime(t)
}

// GetWebhook implements [store.Webhooks].
func (s *Store) GetWebhook(ctx context.Context, owner, id string) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM hrns_webhooks WHERE id = $1 AND owner = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM hrns_webhooks WHERE owner = $1 ORDER BY created_at `+order+`, id `+order+` LIMIT $2 OFFSET $3`,
		p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list webhooks: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Webhook, error) { return scanWebhook(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list webhooks: %w", s.wrap(err))
	}
	return out, total, nil
}

// CountWebhooks implements [store.Webhooks].
func (s *Store) CountWebhooks(ctx context.Context, owner string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_webhooks WHERE owner = $1`, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("count webhooks: %w", s.wrap(err))
	}
	return n, nil
}

// UpdateWebhook implements [store.Webhooks].
func (s *Store) UpdateWebhook(ctx context.Context, w *store.Webhook) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := entryTime(time.Now())
	// The row as it was (o) says whether this enables the webhook.
	got, err := scanWebhook(s.pool.QueryRow(ctx, `WITH o AS (
			SELECT disabled FROM hrns_webhooks WHERE id = $1 AND owner = $2
		), n AS (
			UPDATE hrns_webhooks SET url = $3, events = $4, description = $5, disabled = $6, secret = $7,
				previous_secret = $8, previous_secret_until = $9, version = version + 1, updated_at = $10,
				consecutive_failures = CASE WHEN (SELECT disabled FROM o) AND NOT $6 THEN 0 ELSE consecutive_failures END
			WHERE id = $1 AND owner = $2 AND version = $11
			RETURNING `+webhookColumns+`
		)
		SELECT `+webhookColumns+` FROM n`,
		w.ID, w.Owner, w.URL, nonNil(w.Events), text(w.Description), w.Disabled, w.Secret, w.PreviousSecret, ts(w.PreviousSecretUntil), ts(now), w.Version))
	if errors.Is(err, pgx.ErrNoRows) {
		var one int
		err = s.pool.QueryRow(ctx, `SELECT 1 FROM hrns_webhooks WHERE id = $1 AND owner = $2`, w.ID, w.Owner).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = store.ErrWebhookNotFound
		case err == nil:
			err = store.ErrConflict
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update webhook %s: %w", w.ID, s.wrap(err))
	}
	if !got.Disabled {
		// Pending deliveries of a webhook enabled again are due.
		s.announce(store.WebhookTopic, false)
	}
	return got, nil
}

// DeleteWebhook implements [store.Webhooks].
func (s *Store) DeleteWebhook(ctx context.Context, owner, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_webhooks WHERE id = $1 AND owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook %s: %w", id, store.ErrWebhookNotFound)
	}
	return nil
}

const deliveryColumns = `d.id, d.webhook_id, d.owner, d.event_id, d.event_type, d.session_id, d.session_status, d.previous_status,
	d.occurred_at, d.state, d.attempts, d.next_attempt_at, d.lease_owner, d.lease_until, d.last_status_code, d.last_error,
	d.created_at, d.updated_at`

func scanDelivery(row pgx.Row, more ...any) (*store.Delivery, error) {
	var (
		d                                            store.Delivery
		occurred, next, leaseUntil, created, updated pgtype.Timestamptz
	)
	err := row.Scan(append([]any{&d.ID, &d.WebhookID, &d.Owner, &d.EventID, &d.EventType, &d.SessionID, &d.SessionStatus, &d.PreviousStatus,
		&occurred, &d.State, &d.Attempts, &next, &d.LeaseOwner, &leaseUntil, &d.LastStatusCode, &d.LastError, &created, &updated}, more...)...)
	if err != nil {
		return nil, err
	}
	d.OccurredAt, d.NextAttemptAt, d.LeaseUntil = fromTS(occurred), fromTS(next), fromTS(leaseUntil)
	d.CreatedAt, d.UpdatedAt = fromTS(created), fromTS(updated)
	return &d, nil
}

// ClaimDeliveries implements [store.Webhooks]: for each owner with an
// enabled webhook, it counts the owner's leased deliveries and locks its
// oldest due ones (FOR UPDATE OF d SKIP LOCKED: a concurrent claim takes
// others, or none), then takes them in turn across owners.
func (s *Store) ClaimDeliveries(ctx context.Context, p *store.ClaimParams) ([]*store.Delivery, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []*store.Delivery
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if p.Token != "" {
			// A call again of a claim whose answer was lost: what it
			// took, if anything, is the answer.
			rows, err := tx.Query(ctx, `UPDATE hrns_webhook_deliveries d SET lease_until = $3
				WHERE d.claim_token = $1 AND d.claim_token <> '' AND d.lease_owner = $2 AND d.state = 'pending'
				RETURNING `+deliveryColumns, p.Token, p.Owner, ts(p.Now.Add(p.TTL)))
			if err != nil {
				return err
			}
			held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Delivery, error) { return scanDelivery(r) })
			if err != nil {
				return err
			}
			if len(held) > 0 {
				slices.SortFunc(held, func(a, b *store.Delivery) int {
					return store.CompareRanked(store.RankedDelivery{Delivery: a}, store.RankedDelivery{Delivery: b})
				})
				for _, d := range held {
					d.LeaseUntil = p.Now.Add(p.TTL)
					if d.Webhook, err = scanWebhook(tx.QueryRow(ctx, `SELECT `+webhookColumns+` FROM hrns_webhooks WHERE id = $1`, d.WebhookID)); err != nil {
						return err
					}
				}
				out = held
				return nil
			}
		}
		rows, err := tx.Query(ctx, `WITH busy AS (
				SELECT o.owner, (SELECT count(*) FROM hrns_webhook_deliveries b
					WHERE b.owner = o.owner AND b.state = 'pending' AND b.lease_owner <> '' AND b.lease_until > $1) AS n
				FROM (SELECT DISTINCT owner FROM hrns_webhooks WHERE NOT disabled) o
			), cand AS (
				SELECT x.id, x.owner, x.next_attempt_at, x.created_at, busy.n AS busy FROM busy
				CROSS JOIN LATERAL (
					SELECT d.id, d.owner, d.next_attempt_at, d.created_at
					FROM hrns_webhook_deliveries d JOIN hrns_webhooks w ON w.id = d.webhook_id
					WHERE d.owner = busy.owner AND d.state = 'pending' AND d.next_attempt_at <= $1
						AND (d.lease_owner = '' OR d.lease_until <= $1) AND NOT w.disabled
					ORDER BY d.next_attempt_at, d.created_at, d.id
					LIMIT $2
					FOR UPDATE OF d SKIP LOCKED
				) x
				WHERE $5::int <= 0 OR busy.n < $5::int
			), ranked AS (
				SELECT id, next_attempt_at, created_at,
					busy + row_number() OVER (PARTITION BY owner ORDER BY next_attempt_at, created_at, id) - 1 AS rank
				FROM cand
			), c AS (
				SELECT id, rank FROM ranked WHERE $5::int <= 0 OR rank < $5::int
				ORDER BY rank, next_attempt_at, created_at, id
				LIMIT $2
			)
			UPDATE hrns_webhook_deliveries d SET lease_owner = $3, lease_until = $4, claim_token = $6, attempts = attempts + 1
			FROM c WHERE d.id = c.id
			RETURNING `+deliveryColumns+`, c.rank`, ts(p.Now), max(p.Limit, 1), p.Owner, ts(p.Now.Add(p.TTL)), p.PerKey, p.Token)
		if err != nil {
			return err
		}
		var ranked []store.RankedDelivery
		ranked, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.RankedDelivery, error) {
			var rank int64
			d, err := scanDelivery(r, &rank)
			return store.RankedDelivery{Delivery: d, Rank: rank}, err
		})
		if err != nil {
			return err
		}
		// RETURNING keeps no order: put them back in the claim's.
		slices.SortFunc(ranked, store.CompareRanked)
		out = make([]*store.Delivery, len(ranked))
		for i, c := range ranked {
			d := c.Delivery
			if d.Webhook, err = scanWebhook(tx.QueryRow(ctx, `SELECT `+webhookColumns+` FROM hrns_webhooks WHERE id = $1`, d.WebhookID)); err != nil {
				return err
			}
			d.LeaseUntil = p.Now.Add(p.TTL)
			out[i] = d
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", s.wrap(err))
	}
	return out, nil
}

// FinishDelivery implements [store.Webhooks].
func (s *Store) FinishDelivery(ctx context.Context, p *store.DeliveryResult) error {
	if err := s.check(); err != nil {
		return err
	}
	a := &p.Attempt
	state, next := store.DeliveryPending, p.RetryAt
	switch {
	case p.Delivered:
		state, next = store.DeliveryDelivered, p.Now
	case p.RetryAt.IsZero():
		state, next = store.DeliveryGaveUp, p.Now
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var webhookID string
		var attempts int
		err := tx.QueryRow(ctx, `UPDATE hrns_webhook_deliveries SET state = $4, next_attempt_at = $5, lease_owner = '', lease_until = NULL,
				last_status_code = $6, last_error = $7, updated_at = $3
			WHERE id = $1 AND state = 'pending' AND lease_owner = $2 AND lease_until > $3
			RETURNING webhook_id, attempts`,
			p.ID, p.Owner, ts(p.Now), state, ts(next), a.StatusCode, a.Error).Scan(&webhookID, &attempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO hrns_webhook_attempts (delivery_id, n, at, duration_us, status_code, error) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (delivery_id, n) DO UPDATE SET at = excluded.at, duration_us = excluded.duration_us, status_code = excluded.status_code, error = excluded.error`,
			p.ID, attempts, ts(a.At), a.Duration.Microseconds(), a.StatusCode, a.Error); err != nil {
			return err
		}
		if p.Delivered {
			_, err = tx.Exec(ctx, `UPDATE hrns_webhooks SET last_delivery_status = 'succeeded', last_delivery_error = '', last_delivery_at = $2,
				last_success_at = $2, consecutive_failures = 0 WHERE id = $1`, webhookID, ts(a.At))
		} else {
			_, err = tx.Exec(ctx, `UPDATE hrns_webhooks SET last_delivery_status = 'failed', last_delivery_error = $2, last_delivery_at = $3,
				consecutive_failures = consecutive_failures + 1,
				disabled = CASE WHEN $4::int > 0 AND consecutive_failures + 1 >= $4::int THEN true ELSE disabled END WHERE id = $1`,
				webhookID, a.Error, ts(a.At), p.DisableAfter)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish delivery %s: %w", p.ID, s.wrap(err))
	}
	return nil
}

// ListDeliveries implements [store.Webhooks].
func (s *Store) ListDeliveries(ctx context.Context, p *store.DeliveryListParams) ([]*store.Delivery, int, error) {
	if _, err := s.GetWebhook(ctx, p.Owner, p.WebhookID); err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_webhook_deliveries d WHERE d.webhook_id = $1 AND d.owner = $2 AND ($3 = '' OR d.state = $3)`,
		p.WebhookID, p.Owner, p.State).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM hrns_webhook_deliveries d
		WHERE d.webhook_id = $1 AND d.owner = $2 AND ($3 = '' OR d.state = $3)
		ORDER BY d.created_at DESC, d.id DESC LIMIT $4 OFFSET $5`, p.WebhookID, p.Owner, p.State, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	if len(out) == 0 {
		return out, total, nil
	}
	ids := make([]string, len(out))
	byID := map[string]*store.Delivery{}
	for i, d := range out {
		ids[i] = d.ID
		d.Log = []store.DeliveryAttempt{}
		byID[d.ID] = d
	}
	arows, err := s.pool.Query(ctx, `SELECT delivery_id, n, at, duration_us, status_code, error FROM hrns_webhook_attempts
		WHERE delivery_id = ANY ($1) ORDER BY delivery_id, n`, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	defer arows.Close()
	for arows.Next() {
		var id string
		var a store.DeliveryAttempt
		var at time.Time
		var us int64
		if err := arows.Scan(&id, &a.N, &at, &us, &a.StatusCode, &a.Error); err != nil {
			return nil, 0, fmt.Errorf("list deliveries: %w", err)
		}
		a.At, a.Duration = at.UTC(), time.Duration(us)*time.Microsecond
		byID[id].Log = append(byID[id].Log, a)
	}
	if err := arows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list deliveries: %w", s.wrap(err))
	}
	return out, total, nil
}

// NextDelivery implements [store.Webhooks].
func (s *Store) NextDelivery(ctx context.Context, now time.Time) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `SELECT min(CASE WHEN d.lease_owner <> '' AND d.lease_until > $1 AND d.lease_until > d.next_attempt_at
			THEN d.lease_until ELSE d.next_attempt_at END)
		FROM hrns_webhook_deliveries d JOIN hrns_webhooks w ON w.id = d.webhook_id
		WHERE d.state = 'pending' AND NOT w.disabled`, ts(now)).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next delivery: %w", s.wrap(err))
	}
	return fromTS(next), nil
}

// PruneDeliveries implements [store.Webhooks].
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_webhook_deliveries WHERE (state <> 'pending' AND updated_at < $1) OR (state = 'pending' AND created_at < $1)`, ts(before))
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", s.wrap(err))
	}
	return int(tag.RowsAffected()), nil
}
