-- Tokens used per owner and window (store.Quotas). window_start is in
-- Unix nanoseconds, kept to the microsecond.
CREATE TABLE token_usage (
	owner        TEXT NOT NULL,
	period       TEXT NOT NULL,
	window_start INTEGER NOT NULL,
	tokens       INTEGER NOT NULL,
	PRIMARY KEY (owner, period, window_start)
) STRICT, WITHOUT ROWID;
