-- GPU layer: the batch tuner's settled choices, and out-of-memory accounting.
CREATE TABLE batch_tuning (
  op             text NOT NULL,
  device         text NOT NULL,
  size_bucket    integer NOT NULL,
  batch          integer NOT NULL,
  bytes_per_item bigint NOT NULL,
  updated_at     bigint NOT NULL,
  PRIMARY KEY (op, device, size_bucket)
);

ALTER TABLE workers ADD COLUMN oom_events bigint NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cpu_fallbacks bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN oom_events bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cpu_fallbacks bigint NOT NULL DEFAULT 0;
