-- Schedules (store.Schedule), each scoped to its owner, and their runs
-- (store.ScheduleRun): one per tick fired, unique per schedule and tick,
-- and one per manual trigger.
CREATE TABLE hrns_schedules (
	id          text PRIMARY KEY,
	owner       text NOT NULL,
	spec        bytea NOT NULL,
	paused      boolean NOT NULL DEFAULT false,
	next_run_at timestamptz,
	last_run_at timestamptz,
	version     bigint NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
);

CREATE INDEX hrns_schedules_by_owner ON hrns_schedules (owner, created_at);
CREATE INDEX hrns_schedules_due ON hrns_schedules (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;

CREATE TABLE hrns_schedule_runs (
	id            text PRIMARY KEY,
	schedule_id   text NOT NULL REFERENCES hrns_schedules (id) ON DELETE CASCADE,
	owner         text NOT NULL,
	status        text NOT NULL,
	scheduled_for timestamptz NOT NULL,
	manual        boolean NOT NULL DEFAULT false,
	skipped       integer NOT NULL DEFAULT 0,
	session_id    text NOT NULL DEFAULT '',
	error         text NOT NULL DEFAULT '',
	lease_owner   text NOT NULL DEFAULT '',
	lease_until   timestamptz,
	attempts      integer NOT NULL DEFAULT 0,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);

-- A tick is taken once: the row that takes it is unique.
CREATE UNIQUE INDEX hrns_schedule_runs_tick ON hrns_schedule_runs (schedule_id, scheduled_for) WHERE NOT manual;
CREATE INDEX hrns_schedule_runs_by_schedule ON hrns_schedule_runs (schedule_id, scheduled_for);
CREATE INDEX hrns_schedule_runs_pending ON hrns_schedule_runs (lease_until) WHERE status = 'pending';
