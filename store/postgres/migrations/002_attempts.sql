-- How many times the session was claimed since its worker last made
-- progress (store.Session.Attempts).
ALTER TABLE hrns_sessions ADD COLUMN attempts integer NOT NULL DEFAULT 0;
