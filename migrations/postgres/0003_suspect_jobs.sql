-- A job whose lease expired is a suspect, claimed alone until it finishes
-- (migrations/sqlite/0003_suspect_jobs.sql says why).
ALTER TABLE jobs ADD COLUMN suspect integer NOT NULL DEFAULT 0;
CREATE INDEX jobs_suspects ON jobs (priority DESC, id) WHERE state = 0 AND suspect = 1;
