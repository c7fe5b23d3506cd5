-- Webhooks (store.Webhook), each scoped to its owner, and their outbox:
-- the deliveries written with the session changes that cause them, and
-- the attempts made. Times are Unix nanoseconds, 0 for none.
CREATE TABLE webhooks (
	id                    TEXT PRIMARY KEY,
	owner                 TEXT NOT NULL,
	url                   TEXT NOT NULL,
	events                TEXT NOT NULL, -- a JSON array of strings
	description           TEXT NOT NULL DEFAULT '',
	disabled              INTEGER NOT NULL DEFAULT 0,
	secret                TEXT NOT NULL,
	previous_secret       TEXT NOT NULL DEFAULT '',
	previous_secret_until INTEGER NOT NULL DEFAULT 0,
	last_delivery_status  TEXT NOT NULL DEFAULT '',
	last_delivery_error   TEXT NOT NULL DEFAULT '',
	last_delivery_at      INTEGER NOT NULL DEFAULT 0,
	last_success_at       INTEGER NOT NULL DEFAULT 0,
	consecutive_failures  INTEGER NOT NULL DEFAULT 0,
	version               INTEGER NOT NULL,
	created_at            INTEGER NOT NULL,
	updated_at            INTEGER NOT NULL
) STRICT;

CREATE INDEX webhooks_by_owner ON webhooks (owner, created_at);

CREATE TABLE webhook_deliveries (
	id               TEXT PRIMARY KEY,
	webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
	owner            TEXT NOT NULL,
	event_id         TEXT NOT NULL,
	event_type       TEXT NOT NULL,
	session_id       TEXT NOT NULL,
	session_status   TEXT NOT NULL,
	previous_status  TEXT NOT NULL DEFAULT '',
	occurred_at      INTEGER NOT NULL,
	state            TEXT NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  INTEGER NOT NULL,
	lease_owner      TEXT NOT NULL DEFAULT '',
	lease_until      INTEGER NOT NULL DEFAULT 0,
	last_status_code INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	UNIQUE (webhook_id, event_id)
) STRICT;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_by_updated ON webhook_deliveries (updated_at);

CREATE TABLE webhook_attempts (
	delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
	n           INTEGER NOT NULL,
	at          INTEGER NOT NULL,
	duration    INTEGER NOT NULL,
	status_code INTEGER NOT NULL DEFAULT 0,
	error       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (delivery_id, n)
) STRICT, WITHOUT ROWID;
