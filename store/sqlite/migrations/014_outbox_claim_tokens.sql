-- The token of the claim that leased a webhook delivery or a schedule run
-- (store.ClaimParams.Token): a worker whose claim answered an error after
-- its commit claims again with the same token, and is given what the lost
-- claim took (ClaimDeliveries, ClaimScheduleRuns). The indexes hold the
-- rows a claim leased and are read only then.
ALTER TABLE webhook_deliveries ADD COLUMN claim_token TEXT NOT NULL DEFAULT '';
CREATE INDEX webhook_deliveries_by_claim_token ON webhook_deliveries (claim_token) WHERE claim_token != '';
ALTER TABLE schedule_runs ADD COLUMN claim_token TEXT NOT NULL DEFAULT '';
CREATE INDEX schedule_runs_by_claim_token ON schedule_runs (claim_token) WHERE claim_token != '';
