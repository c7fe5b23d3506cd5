-- The token of the claim that took the session's lease
-- (store.ClaimParams.Token): a dispatcher whose claim answered an error
-- after its commit asks which sessions that claim took
-- (store.Store.RecoverClaim). The index holds the sessions ever claimed
-- and is read only then.
ALTER TABLE sessions ADD COLUMN claim_token TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_by_claim_token ON sessions (claim_token) WHERE claim_token != '';
