-- Each done job's own time (migrations/sqlite/0006_job_times.sql says why).
ALTER TABLE results ADD COLUMN started_at bigint;
ALTER TABLE results ADD COLUMN run_ms bigint;
ALTER TABLE results ADD COLUMN media_seconds double precision;
