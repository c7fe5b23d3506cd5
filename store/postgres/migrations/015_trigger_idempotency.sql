-- The Idempotency-Key of the trigger that made a manual run
-- (store.ScheduleRun.IdempotencyKey): a trigger repeated with the same
-- key, for the same schedule (and so the same owner), is given the run
-- the first made, not a second run (AddScheduleRun).
ALTER TABLE hrns_schedule_runs ADD COLUMN idempotency_key text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX hrns_schedule_runs_by_idempotency_key ON hrns_schedule_runs (schedule_id, idempotency_key) WHERE idempotency_key <> '';
