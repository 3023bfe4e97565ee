-- URL items (the crawler); migrations/sqlite/0004_urls.sql describes the columns.
ALTER TABLE items ADD COLUMN is_url integer NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN metadata text;
ALTER TABLE items ADD COLUMN fetched_path text;
