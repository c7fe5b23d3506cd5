-- The transcript of each session, one row per message (store.Transcript):
-- a step appends its new messages instead of rewriting the whole
-- conversation in the session's state.
CREATE TABLE hrns_session_messages (
	session_id text NOT NULL REFERENCES hrns_sessions (id) ON DELETE CASCADE,
	idx        bigint NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, idx)
);
