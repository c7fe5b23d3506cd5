-- Vaults (store.Vault), each scoped to its owner. secret is ciphertext
-- (package vault encrypts it before the store sees it); key_id names the
-- key that encrypted it. Times are Unix nanoseconds.
CREATE TABLE vaults (
	id         TEXT NOT NULL PRIMARY KEY,
	owner      TEXT NOT NULL,
	name       TEXT NOT NULL,
	config     BLOB NOT NULL,
	key_id     TEXT NOT NULL,
	secret     BLOB NOT NULL,
	version    INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX vaults_by_owner ON vaults (owner, created_at);
