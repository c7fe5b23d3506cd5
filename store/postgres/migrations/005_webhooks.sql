-- Webhooks (store.Webhook), each scoped to its owner, and their outbox:
-- the deliveries written with the session changes that cause them, and
-- the attempts made.
CREATE TABLE hrns_webhooks (
	id                    text PRIMARY KEY,
	owner                 text NOT NULL,
	url                   text NOT NULL,
	events                text[] NOT NULL,
	description           text NOT NULL DEFAULT '',
	disabled              boolean NOT NULL DEFAULT false,
	secret                text NOT NULL,
	previous_secret       text NOT NULL DEFAULT '',
	previous_secret_until timestamptz,
	last_delivery_status  text NOT NULL DEFAULT '',
	last_delivery_error   text NOT NULL DEFAULT '',
	last_delivery_at      timestamptz,
	last_success_at       timestamptz,
	consecutive_failures  integer NOT NULL DEFAULT 0,
	version               bigint NOT NULL,
	created_at            timestamptz NOT NULL,
	updated_at            timestamptz NOT NULL
);

CREATE INDEX hrns_webhooks_by_owner ON hrns_webhooks (owner, created_at);

CREATE TABLE hrns_webhook_deliveries (
	id               text PRIMARY KEY,
	webhook_id       text NOT NULL REFERENCES hrns_webhooks (id) ON DELETE CASCADE,
	owner            text NOT NULL,
	event_id         text NOT NULL,
	event_type       text NOT NULL,
	session_id       text NOT NULL,
	session_status   text NOT NULL,
	previous_status  text NOT NULL DEFAULT '',
	occurred_at      timestamptz NOT NULL,
	state            text NOT NULL,
	attempts         integer NOT NULL DEFAULT 0,
	next_attempt_at  timestamptz NOT NULL,
	lease_owner      text NOT NULL DEFAULT '',
	lease_until      timestamptz,
	last_status_code integer NOT NULL DEFAULT 0,
	last_error       text NOT NULL DEFAULT '',
	created_at       timestamptz NOT NULL,
	updated_at       timestamptz NOT NULL,
	UNIQUE (webhook_id, event_id)
);

CREATE INDEX hrns_webhook_deliveries_due ON hrns_webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX hrns_webhook_deliveries_by_webhook ON hrns_webhook_deliveries (webhook_id, created_at);
CREATE INDEX hrns_webhook_deliveries_by_updated ON hrns_webhook_deliveries (updated_at);

CREATE TABLE hrns_webhook_attempts (
	delivery_id text NOT NULL REFERENCES hrns_webhook_deliveries (id) ON DELETE CASCADE,
	n           integer NOT NULL,
	at          timestamptz NOT NULL,
	duration_us bigint NOT NULL,
	status_code integer NOT NULL DEFAULT 0,
	error       text NOT NULL DEFAULT '',
	PRIMARY KEY (delivery_id, n)
);
