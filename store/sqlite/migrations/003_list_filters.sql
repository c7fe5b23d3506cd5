-- What GET /api/v2/sessions filters on (issue 15): the group, parent and
-- schedule a session was created with, and indexes that serve each filter
-- within the owner's sessions.
ALTER TABLE sessions ADD COLUMN group_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN schedule_id TEXT NOT NULL DEFAULT '';

CREATE INDEX sessions_by_owner_status ON sessions (owner, status, created_at);
CREATE INDEX sessions_by_owner_agent ON sessions (owner, agent, created_at);
CREATE INDEX sessions_by_owner_group ON sessions (owner, group_id, created_at) WHERE group_id != '';
CREATE INDEX sessions_by_owner_parent ON sessions (owner, parent_id, created_at) WHERE parent_id != '';
CREATE INDEX sessions_by_owner_schedule ON sessions (owner, schedule_id, created_at) WHERE schedule_id != '';
CREATE INDEX sessions_by_owner_finished ON sessions (owner, finished_at) WHERE finished_at != 0;
