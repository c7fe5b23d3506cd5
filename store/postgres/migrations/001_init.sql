-- Sessions, their event logs, and the replicas sharing them. Times are
-- timestamptz (microseconds), NULL for none. The JSON documents owned by
-- package session are kept as bytea, exactly as written.
CREATE TABLE hrns_sessions (
	id              text PRIMARY KEY,
	owner           text NOT NULL,
	idempotency_key text NOT NULL DEFAULT '',
	request_hash    text NOT NULL DEFAULT '',
	status          text NOT NULL,
	agent           text NOT NULL DEFAULT '',
	first_message   text NOT NULL DEFAULT '',
	request         bytea,
	state           bytea,
	answer          bytea,
	error           text NOT NULL DEFAULT '',
	error_code      text NOT NULL DEFAULT '',
	runnable        boolean NOT NULL DEFAULT false,
	wake_at         timestamptz,
	lease_owner     text NOT NULL DEFAULT '',
	lease_until     timestamptz,
	version         bigint NOT NULL,
	event_count     bigint NOT NULL DEFAULT 0,
	created_at      timestamptz NOT NULL,
	started_at      timestamptz,
	finished_at     timestamptz,
	updated_at      timestamptz NOT NULL
);

CREATE INDEX hrns_sessions_by_owner ON hrns_sessions (owner, created_at, id);
CREATE UNIQUE INDEX hrns_sessions_by_idempotency_key ON hrns_sessions (owner, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX hrns_sessions_runnable ON hrns_sessions (created_at, id) WHERE runnable;
CREATE INDEX hrns_sessions_wake ON hrns_sessions (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX hrns_sessions_by_lease_owner ON hrns_sessions (lease_owner) WHERE lease_owner <> '';

CREATE TABLE hrns_events (
	session_id text NOT NULL REFERENCES hrns_sessions (id) ON DELETE CASCADE,
	idx        bigint NOT NULL,
	type       text NOT NULL,
	data       bytea NOT NULL,
	time       timestamptz NOT NULL,
	PRIMARY KEY (session_id, idx)
);

CREATE TABLE hrns_replicas (
	id         text PRIMARY KEY,
	host       text NOT NULL DEFAULT '',
	pid        integer NOT NULL DEFAULT 0,
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	workers    integer NOT NULL DEFAULT 0,
	running    integer NOT NULL DEFAULT 0
);
