-- The token of the claim that leased a webhook delivery or a schedule run
-- (store.ClaimParams.Token): a worker whose claim answered an error after
-- its commit claims again with the same token, and is given what the lost
-- claim took (ClaimDeliveries, ClaimScheduleRuns). The indexes hold the
-- rows a claim leased and are read only then.
ALTER TABLE hrns_webhook_deliveries ADD COLUMN claim_token text NOT NULL DEFAULT '';
CREATE INDEX hrns_webhook_deliveries_by_claim_token ON hrns_webhook_deliveries (claim_token) WHERE claim_token <> '';
ALTER TABLE hrns_schedule_runs ADD COLUMN claim_token text NOT NULL DEFAULT '';
CREATE INDEX hrns_schedule_runs_by_claim_token ON hrns_schedule_runs (claim_token) WHERE claim_token <> '';
