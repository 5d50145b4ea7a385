-- engine 0006 (0.1's 0011): the effect ledger's edges (issue 9).
-- effects.no_return_at: when the holder passed its point of no return (NULL: nothing has left yet, so a holder
-- that died before it is retried, not doubted). effects.frozen: the effect's input (e.g. the rendered message)
-- frozen at its first attempt and used by every retry or approved resend. Jobs may end 'in_doubt': the handler
-- ran to its end but named effects are in doubt (their keys are in the job's last error entry).

ALTER TABLE effects ADD COLUMN no_return_at TIMESTAMPTZ;
ALTER TABLE effects ADD COLUMN frozen BYTEA;
-- Effects started before this version had no point of no return: conservatively, their claim was it.
UPDATE effects SET no_return_at = started_at;

ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded', 'cancelled', 'in_doubt'));
-- Resolving an effect looks up the jobs waiting in doubt.
CREATE INDEX jobs_in_doubt ON jobs (id) WHERE state = 'in_doubt';
