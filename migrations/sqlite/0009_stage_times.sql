-- status's time per item reads each stage's newest done jobs (issue 40: with one list of
-- the newest 2,000 across stages, a long run's early stages had no figure): a stage's done
-- jobs newest first straight from this index, however large the table.
DROP INDEX jobs_stage_state;
CREATE INDEX jobs_stage_state ON jobs (stage, state, id);
