-- The notices' queries whose SQL differs on PostgreSQL (the others: common/notices.sql).

-- name: notice_row_still_listed
-- As common/notices.sql, with the row locked FOR SHARE until the transaction ends: a break-up of the notice
-- (notice_release_pending, an UPDATE of the row) that runs meanwhile is waited for and its result re-read, and a
-- break-up that starts later waits for these files, then forgets them (forget_reminder_attachments).
SELECT id FROM reminders WHERE id = :reminder_id AND notice_id = :notice_id AND state = 'pending' FOR SHARE;
