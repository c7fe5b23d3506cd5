-- Browser profiles (store.Profile), each scoped to its owner: a Chromium
-- user-data directory as an archive, uploaded while the profile is
-- pending (ready false) with the token whose hash is upload_token.
CREATE TABLE hrns_browser_profiles (
	id              text PRIMARY KEY,
	owner           text NOT NULL,
	ready           boolean NOT NULL,
	upload_token    bytea NOT NULL,
	upload_expires  timestamptz NOT NULL,
	name            text NOT NULL,
	description     text,
	browser_name    text NOT NULL,
	browser_version text NOT NULL,
	labels          bytea,
	size_bytes      bigint NOT NULL,
	checksum        text NOT NULL,
	is_default      boolean NOT NULL,
	usage_count     bigint NOT NULL,
	last_used_at    timestamptz,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	archive         bytea
);

CREATE INDEX hrns_browser_profiles_by_owner ON hrns_browser_profiles (owner, ready, created_at);
-- One default per owner and browser.
CREATE UNIQUE INDEX hrns_browser_profiles_default ON hrns_browser_profiles (owner, browser_name) WHERE is_default;
