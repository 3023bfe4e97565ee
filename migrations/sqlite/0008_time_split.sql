-- Where each done job's time went (issue 38; base/time_split.h): decoding media, the rest of
-- the host's work, kernels on a device and waiting (for a device's lock, a model being
-- opened), in ms, summing to run_ms; NULL where run_ms is. status's time_split_ms reads them.
ALTER TABLE results ADD COLUMN decode_ms INTEGER;
ALTER TABLE results ADD COLUMN host_ms INTEGER;
ALTER TABLE results ADD COLUMN device_ms INTEGER;
ALTER TABLE results ADD COLUMN wait_ms INTEGER;
-- The device's busy time as each worker on it saw it (gpu/device_ledger.h BusyNs, in ms: the
-- time any of the device's workers had a batch on it, counted once): when the worker joined
-- and the latest. A run's device was busy for the largest latest less the smallest start of
-- its workers; status --json's last_run.devices[].busy_share is that over the run's wall time.
ALTER TABLE workers ADD COLUMN device_busy_from_ms INTEGER;
ALTER TABLE workers ADD COLUMN device_busy_to_ms INTEGER;
