-- Nothing changes on SQLite. PostgreSQL's 0010 drops the foreign keys of jobs.item_id and
-- job_deps, checked per row at enqueue (a third of its time there); SQLite keeps them, so
-- every test on SQLite still checks the enqueue code both engines share, row by row.
SELECT 1;
