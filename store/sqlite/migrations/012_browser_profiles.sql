-- Browser profiles (store.Profile), each scoped to its owner: a Chromium
-- user-data directory as an archive, uploaded while the profile is
-- pending (ready = 0) with the token whose hash is upload_token. A rowid
-- table: archives are megabytes. Times are Unix nanoseconds.
CREATE TABLE browser_profiles (
	id              TEXT NOT NULL UNIQUE,
	owner           TEXT NOT NULL,
	ready           INTEGER NOT NULL,
	upload_token    BLOB NOT NULL,
	upload_expires  INTEGER NOT NULL,
	name            TEXT NOT NULL,
	description     TEXT,
	browser_name    TEXT NOT NULL,
	browser_version TEXT NOT NULL,
	labels          BLOB,
	size_bytes      INTEGER NOT NULL,
	checksum        TEXT NOT NULL,
	is_default      INTEGER NOT NULL,
	usage_count     INTEGER NOT NULL,
	last_used_at    INTEGER,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	archive         BLOB
) STRICT;

CREATE INDEX browser_profiles_by_owner ON browser_profiles (owner, ready, created_at);
-- One default per owner and browser.
CREATE UNIQUE INDEX browser_profiles_default ON browser_profiles (owner, browser_name) WHERE is_default = 1;
