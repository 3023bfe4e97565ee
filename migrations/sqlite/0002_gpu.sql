-- GPU layer: the batch tuner's settled choices, and out-of-memory accounting.

-- One row per (operation, device, input-size bucket) the tuner has settled, so a
-- restarted run uses it without probing again.
CREATE TABLE batch_tuning (
  op             TEXT NOT NULL,
  device         TEXT NOT NULL,
  size_bucket    INTEGER NOT NULL,
  batch          INTEGER NOT NULL,
  bytes_per_item INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL,
  PRIMARY KEY (op, device, size_bucket)
) WITHOUT ROWID;

ALTER TABLE workers ADD COLUMN oom_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cpu_fallbacks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN oom_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cpu_fallbacks INTEGER NOT NULL DEFAULT 0;
