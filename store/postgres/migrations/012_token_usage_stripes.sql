-- Tokens used per owner and window (store.Quotas), spread over stripes:
-- a commit adds to the stripe of its server process (pg_backend_pid()
-- modulo the store's stripe count), so that concurrent commits of one
-- owner's sessions update different rows and do not wait for each other's
-- row lock until each is durable. A window's count is the sum of its
-- stripes plus its row of hrns_token_usage.
--
-- hrns_token_usage keeps its rows and its key, unchanged: they are each
-- window's count before this migration, read in place, and the previous
-- release's replicas still running in a rolling deploy keep adding to
-- them with their own statement. This release writes only here.
CREATE TABLE hrns_token_usage_stripes (
	owner        text NOT NULL,
	period       text NOT NULL,
	window_start timestamptz NOT NULL,
	stripe       smallint NOT NULL,
	tokens       bigint NOT NULL,
	PRIMARY KEY (owner, period, window_start, stripe)
);
