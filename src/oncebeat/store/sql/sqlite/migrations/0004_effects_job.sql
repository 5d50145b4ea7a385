-- engine 0004 (0.1's 0005): a job's effects (the job page, the doctor) without reading the whole effect ledger.
CREATE INDEX effects_job ON effects (job_id) WHERE job_id IS NOT NULL;
