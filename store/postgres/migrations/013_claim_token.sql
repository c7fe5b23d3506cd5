-- The token of the claim that took the session's lease
-- (store.ClaimParams.Token): a dispatcher whose claim answered an error
-- after its commit asks which sessions that claim took
-- (store.Store.RecoverClaim), through hrns_sessions_by_lease_owner (the
-- claim's owner holds their leases).
ALTER TABLE hrns_sessions ADD COLUMN claim_token text NOT NULL DEFAULT '';
