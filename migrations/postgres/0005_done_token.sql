-- The lease token a done job was completed under (migrations/sqlite/0005_done_token.sql
-- says why).
ALTER TABLE jobs ADD COLUMN done_token bigint;
