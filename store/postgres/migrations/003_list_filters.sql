-- What GET /api/v2/sessions filters on (issue 15): the group, parent and
-- schedule a session was created with, and indexes that serve each filter
-- within the owner's sessions.
ALTER TABLE hrns_sessions ADD COLUMN group_id text NOT NULL DEFAULT '';
ALTER TABLE hrns_sessions ADD COLUMN parent_id text NOT NULL DEFAULT '';
ALTER TABLE hrns_sessions ADD COLUMN schedule_id text NOT NULL DEFAULT '';

CREATE INDEX hrns_sessions_by_owner_status ON hrns_sessions (owner, status, created_at, id);
CREATE INDEX hrns_sessions_by_owner_agent ON hrns_sessions (owner, agent, created_at, id);
CREATE INDEX hrns_sessions_by_owner_group ON hrns_sessions (owner, group_id, created_at, id) WHERE group_id <> '';
CREATE INDEX hrns_sessions_by_owner_parent ON hrns_sessions (owner, parent_id, created_at, id) WHERE parent_id <> '';
CREATE INDEX hrns_sessions_by_owner_schedule ON hrns_sessions (owner, schedule_id, created_at, id) WHERE schedule_id <> '';
CREATE INDEX hrns_sessions_by_owner_finished ON hrns_sessions (owner, finished_at) WHERE finished_at IS NOT NULL;
