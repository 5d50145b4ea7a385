-- Proof of notice (oncebeat.reminders.notices.evidence): the send jobs of one reminder. Everything else the
-- record shows comes through the verbs that own it (invoice_story, holds_of_invoice, the effect ledger, the
-- occurrence ledger, the audit trail).

-- name: evidence_send_jobs
-- Every run of reminder :key's send job (unique key 'reminder:<id>', enqueued with the reminder's occurrence:
-- the jobs_occurrence index finds them), retries, rescues and an operator's re-run copies included, oldest first.
SELECT id, task, state, attempt, max_attempts, occurrence_id, created_at, finished_at,
       source_kind, source_host, source_pid, source_name, source_version
FROM jobs
WHERE occurrence_id = :occurrence_id AND unique_key = :key
ORDER BY id;
