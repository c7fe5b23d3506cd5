-- The transcript of each session, one row per message (store.Transcript):
-- a step appends its new messages instead of rewriting the whole
-- conversation in the session's state.
CREATE TABLE session_messages (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	data       BLOB NOT NULL,
	PRIMARY KEY (session_id, idx)
) STRICT, WITHOUT ROWID;
