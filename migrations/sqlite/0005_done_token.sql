-- The lease token a done job was completed under. A completion whose commit reached the
-- database but whose reply did not (PostgreSQL restarting mid-commit) is sent again; its
-- fence then finds the job done under its own token and counts it done, instead of stale
-- (the worker would delete the artifacts of a recorded result).
ALTER TABLE jobs ADD COLUMN done_token INTEGER;
