-- Webhook deliveries are claimed fairly across API keys (owners): each
-- claim reads the oldest due deliveries of each owner, and counts the
-- deliveries of each owner that are leased (in flight).
CREATE INDEX webhook_deliveries_owner_due ON webhook_deliveries (owner, next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_owner_leased ON webhook_deliveries (owner, lease_until) WHERE state = 'pending' AND lease_owner <> '';
