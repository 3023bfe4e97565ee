-- framemill job store, version 1. Append-only: later changes go in 0002_*.sql and on.
-- Times are integer milliseconds since the Unix epoch, taken from the injected Clock.
-- Job states are persisted integers (jobs/job.h), never renumbered:
--   0 pending, 1 running, 2 done, 3 failed, 4 skipped, 5 waiting (dependencies not done).

CREATE TABLE items (
  id            INTEGER PRIMARY KEY,
  source        TEXT NOT NULL UNIQUE,      -- absolute path or URL
  kind          INTEGER NOT NULL,          -- 1 image, 2 video, 0 dataset (dataset-level jobs)
  size          INTEGER NOT NULL DEFAULT 0,
  mtime_ns      INTEGER NOT NULL DEFAULT 0,
  content_hash  TEXT,                      -- xxh3-64 of the bytes, hex
  media_info    TEXT NOT NULL DEFAULT '{}',-- JSON: format, width, height, ...
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
);

CREATE TABLE jobs (
  id               INTEGER PRIMARY KEY,
  item_id          INTEGER NOT NULL REFERENCES items(id),
  stage            TEXT NOT NULL,
  state            INTEGER NOT NULL,
  priority         INTEGER NOT NULL DEFAULT 0,
  attempts         INTEGER NOT NULL DEFAULT 0,
  max_attempts     INTEGER NOT NULL DEFAULT 3,
  lease_owner      TEXT,
  lease_token      INTEGER,
  lease_expires_at INTEGER,
  next_run_at      INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  started_at       INTEGER,
  finished_at      INTEGER,
  device           TEXT,
  error_class      TEXT,
  last_error       TEXT,
  UNIQUE (item_id, stage)
);
-- The claim query walks this partial index: only pending rows are in it, so its cost
-- does not grow with the done/failed history.
CREATE INDEX jobs_claimable ON jobs (priority DESC, id) WHERE state = 0;
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 1;
CREATE INDEX jobs_waiting ON jobs (stage) WHERE state = 5;
CREATE INDEX jobs_stage_state ON jobs (stage, state);

-- Edges of the per-item DAG: job_id may run once dep_id is done.
CREATE TABLE job_deps (
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  dep_id INTEGER NOT NULL REFERENCES jobs(id),
  PRIMARY KEY (job_id, dep_id)
) WITHOUT ROWID;
CREATE INDEX job_deps_by_dep ON job_deps (dep_id);

-- Every attempt's error, kept after the job succeeds or is retried.
CREATE TABLE job_errors (
  id          INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL REFERENCES jobs(id),
  attempt     INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  worker      TEXT,
  error_class TEXT NOT NULL,
  message     TEXT NOT NULL,
  transient   INTEGER NOT NULL
);
CREATE INDEX job_errors_by_job ON job_errors (job_id);

-- One row per done job, written in the transaction that completes it.
CREATE TABLE results (
  job_id     INTEGER PRIMARY KEY REFERENCES jobs(id),
  device     TEXT NOT NULL,
  result     TEXT NOT NULL,               -- JSON
  artifacts  TEXT NOT NULL DEFAULT '[]',  -- JSON array of paths
  created_at INTEGER NOT NULL
);

CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER,
  workers     INTEGER NOT NULL,
  stages      TEXT NOT NULL,
  jobs_done   INTEGER NOT NULL DEFAULT 0,
  jobs_failed INTEGER NOT NULL DEFAULT 0,
  exit_code   INTEGER
);

CREATE TABLE workers (
  id           TEXT PRIMARY KEY,            -- host:pid:start
  run_id       INTEGER REFERENCES runs(id),
  pid          INTEGER NOT NULL,
  host         TEXT NOT NULL,
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  stopped_at   INTEGER,
  jobs_done    INTEGER NOT NULL DEFAULT 0,
  jobs_failed  INTEGER NOT NULL DEFAULT 0
);
