-- Sessions are claimed fairly across API keys (owners), as webhook
-- deliveries are (010): each claim lists the owners with runnable
-- sessions (a skip scan of hrns_sessions_runnable_by_owner, one search
-- per owner), counts each owner's sessions leased (running), and reads
-- each owner's oldest free runnable ones in its order. The claim no
-- longer reads runnable sessions in creation order across owners.
CREATE INDEX hrns_sessions_runnable_by_owner ON hrns_sessions (owner, created_at, id) WHERE runnable;
CREATE INDEX hrns_sessions_leased_by_owner ON hrns_sessions (owner, lease_until) WHERE runnable AND lease_owner <> '';
DROP INDEX hrns_sessions_runnable;
