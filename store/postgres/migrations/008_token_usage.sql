-- Tokens used per owner and window (store.Quotas).
CREATE TABLE hrns_token_usage (
	owner        text NOT NULL,
	period       text NOT NULL,
	window_start timestamptz NOT NULL,
	tokens       bigint NOT NULL,
	PRIMARY KEY (owner, period, window_start)
);
