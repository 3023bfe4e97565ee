-- /metrics counts clips as they are done (issue 74): each second it reads the clips jobs
-- finished since it last looked, straight from this index, not every clips result again.
CREATE INDEX jobs_stage_finished ON jobs (stage, state, finished_at);
