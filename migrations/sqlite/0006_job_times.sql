-- Each done job's own time, as its worker measured it (jobs claimed together used to share
-- one started_at/finished_at): when it started (the worker's clock, ms), how long it ran
-- (ms; a group a stage ran together shares its time evenly) and the seconds of media it
-- covered (videos; NULL when unknown). status's ms_per_item and the claim's cost model read them.
ALTER TABLE results ADD COLUMN started_at INTEGER;
ALTER TABLE results ADD COLUMN run_ms INTEGER;
ALTER TABLE results ADD COLUMN media_seconds REAL;
