-- Registered agents, environments and skills (store.Entry), each scoped to
-- its owner. Times are Unix nanoseconds.
CREATE TABLE registry (
	kind        TEXT NOT NULL,
	owner       TEXT NOT NULL,
	name        TEXT NOT NULL,
	type        TEXT NOT NULL DEFAULT '',
	description TEXT NOT NULL DEFAULT '',
	spec        BLOB NOT NULL,
	files       BLOB,
	version     INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (kind, owner, name)
) STRICT, WITHOUT ROWID;

CREATE INDEX registry_by_created ON registry (kind, owner, created_at);
