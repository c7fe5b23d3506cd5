-- Vaults (store.Vault), each scoped to its owner. secret is ciphertext
-- (package vault encrypts it before the store sees it); key_id names the
-- key that encrypted it.
CREATE TABLE hrns_vaults (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	name       text NOT NULL,
	config     bytea NOT NULL,
	key_id     text NOT NULL,
	secret     bytea NOT NULL,
	version    bigint NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX hrns_vaults_by_owner ON hrns_vaults (owner, created_at);
