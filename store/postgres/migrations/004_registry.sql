-- Registered agents, environments and skills (store.Entry), each scoped to
-- its owner.
CREATE TABLE hrns_registry (
	kind        text NOT NULL,
	owner       text NOT NULL,
	name        text NOT NULL,
	type        text NOT NULL DEFAULT '',
	description text NOT NULL DEFAULT '',
	spec        bytea NOT NULL,
	files       bytea,
	version     bigint NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	PRIMARY KEY (kind, owner, name)
);

CREATE INDEX hrns_registry_by_created ON hrns_registry (kind, owner, created_at);
