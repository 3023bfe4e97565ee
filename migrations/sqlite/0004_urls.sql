-- URL items (the crawler). An item enqueued from a URL list has its URL as `source`
-- (so enqueueing the same URL again finds it) and `is_url = 1`. Its `fetch` job
-- downloads it; every other job of the item waits on that job through job_deps.
-- When the fetch is done the item gets its local file (`fetched_path`), its real kind,
-- size, content hash and media_info, and the claim hands the media stages the local
-- file as `source`, exactly as for an item enqueued from a folder. Until then `kind`
-- is provisional (1) and stage applicability is decided at fetch time.
ALTER TABLE items ADD COLUMN is_url INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN metadata TEXT;      -- JSON: the list's other columns / keys
ALTER TABLE items ADD COLUMN fetched_path TEXT;  -- content-addressed file under out/fetched/
