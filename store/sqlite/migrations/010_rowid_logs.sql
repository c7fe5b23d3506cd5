-- Events and transcript messages become rowid tables. A WITHOUT ROWID
-- table is a b-tree of whole rows ordered by key, and keeps at most about
-- 1 KB of a row on a 4 KiB page: events and messages, often longer,
-- spilled into overflow pages, and the random session id in the key put
-- each commit's rows in the middle of the tree, splitting pages. A step's
-- commit wrote about seven of these tables' pages. As rowid tables, rows
-- are appended at the end of the table and only the short key
-- (session_id, idx) goes into an index, in the order the queries read.
CREATE TABLE events_rowid (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	data       BLOB NOT NULL,
	time       INTEGER NOT NULL
) STRICT;
INSERT INTO events_rowid (session_id, idx, type, data, time)
	SELECT session_id, idx, type, data, time FROM events ORDER BY session_id, idx;
DROP TABLE events;
ALTER TABLE events_rowid RENAME TO events;
CREATE UNIQUE INDEX events_by_session ON events (session_id, idx);

CREATE TABLE session_messages_rowid (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	idx        INTEGER NOT NULL,
	data       BLOB NOT NULL
) STRICT;
INSERT INTO session_messages_rowid (session_id, idx, data)
	SELECT session_id, idx, data FROM session_messages ORDER BY session_id, idx;
DROP TABLE session_messages;
ALTER TABLE session_messages_rowid RENAME TO session_messages;
CREATE UNIQUE INDEX session_messages_by_session ON session_messages (session_id, idx);
