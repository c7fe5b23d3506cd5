-- How many times the session was claimed since its worker last made
-- progress (store.Session.Attempts).
ALTER TABLE sessions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
