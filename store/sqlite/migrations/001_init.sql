-- Sessions and their event logs. Times are Unix nanoseconds, 0 for none.
CREATE TABLE sessions (
	id              TEXT PRIMARY KEY,
	owner           TEXT NOT NULL,
	idempotency_key TEXT NOT NULL DEFAULT '',
	request_hash    TEXT NOT NULL DEFAULT '',
	status          TEXT NOT NULL,
	agent           TEXT NOT NULL DEFAULT '',
	first_message   TEXT NOT NULL DEFAULT '',
	request         BLOB,
	state           BLOB,
	answer          BLOB,
	error           TEXT NOT NULL DEFAULT '',
	error_code      TEXT NOT NULL DEFAULT '',
	runnable        INTEGER NOT NULL DEFAULT 0,
	wake_at         INTEGER NOT NULL DEFAULT 0,
	lease_owner     TEXT NOT NULL DEFAULT '',
	lease_until     INTEGER NOT NULL DEFAULT 0,
	version         INTEGER NOT NULL,
	event_count     INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	started_at      INTEGER NOT NULL DEFAULT 0,
	finished_at     INTEGER NOT NULL DEFAULT 0,
	updated_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_by_owner ON sessions (owner, created_at);
CREATE UNIQUE INDEX sessions_by_idempotency_key ON sessions (owner, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX sessions_runnable ON sessions (created_at) WHERE runnable = 1;
CREATE INDEX sessions_wake ON sessions (wake_at) WHERE wake_at != 0;

CREATE TABLE events (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	data       BLOB NOT NULL,
	time       INTEGER NOT NULL,
	PRIMARY KEY (session_id, idx)
) STRICT, WITHOUT ROWID;
