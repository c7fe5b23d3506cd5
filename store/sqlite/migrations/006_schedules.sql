-- Schedules (store.Schedule), each scoped to its owner, and their runs
-- (store.ScheduleRun): one per tick fired, unique per schedule and tick,
-- and one per manual trigger. Times are Unix nanoseconds, 0 for none.
CREATE TABLE schedules (
	id          TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,
	spec        BLOB NOT NULL,
	paused      INTEGER NOT NULL DEFAULT 0,
	next_run_at INTEGER NOT NULL DEFAULT 0,
	last_run_at INTEGER NOT NULL DEFAULT 0,
	version     INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX schedules_by_owner ON schedules (owner, created_at);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE paused = 0 AND next_run_at != 0;

CREATE TABLE schedule_runs (
	id            TEXT PRIMARY KEY,
	schedule_id   TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
	owner         TEXT NOT NULL,
	status        TEXT NOT NULL,
	scheduled_for INTEGER NOT NULL,
	manual        INTEGER NOT NULL DEFAULT 0,
	skipped       INTEGER NOT NULL DEFAULT 0,
	session_id    TEXT NOT NULL DEFAULT '',
	error         TEXT NOT NULL DEFAULT '',
	lease_owner   TEXT NOT NULL DEFAULT '',
	lease_until   INTEGER NOT NULL DEFAULT 0,
	attempts      INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;

-- A tick is taken once: the row that takes it is unique.
CREATE UNIQUE INDEX schedule_runs_tick ON schedule_runs (schedule_id, scheduled_for) WHERE manual = 0;
CREATE INDEX schedule_runs_by_schedule ON schedule_runs (schedule_id, scheduled_for);
CREATE INDEX schedule_runs_pending ON schedule_runs (lease_until) WHERE status = 'pending';
