-- One device, many workers: the device each worker used and what it saw of that device's
-- memory, shared with the machine's other workers (gpu/device_ledger.h). A run's devices
-- (status --json: last_run.devices) are its workers grouped by device; the peak is the
-- largest any of them saw, since every rise of the device's planned total is one of its
-- members' reservations.
ALTER TABLE workers ADD COLUMN device TEXT;
ALTER TABLE workers ADD COLUMN device_total_mb INTEGER;
ALTER TABLE workers ADD COLUMN peak_planned_mb INTEGER;
