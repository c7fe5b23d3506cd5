-- Sessions are claimed fairly across API keys (owners), as webhook
-- deliveries are (011): each claim lists the owners with runnable
-- sessions (a skip scan of sessions_runnable_by_owner, one search per
-- owner), counts each owner's sessions leased (running), and reads each
-- owner's oldest free runnable ones in its order. The claim no longer
-- reads runnable sessions in creation order across owners.
CREATE INDEX sessions_runnable_by_owner ON sessions (owner, created_at) WHERE runnable = 1;
CREATE INDEX sessions_leased_by_owner ON sessions (owner, lease_until) WHERE runnable = 1 AND lease_owner != '';
DROP INDEX sessions_runnable;
