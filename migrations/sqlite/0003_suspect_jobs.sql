-- A job whose lease expired (its worker crashed or hung) is a suspect: it is claimed
-- alone until it finishes, so an input that kills its worker takes only its own
-- attempts with it, not those of the batch it was claimed in.
ALTER TABLE jobs ADD COLUMN suspect INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_suspects ON jobs (priority DESC, id) WHERE state = 0 AND suspect = 1;
