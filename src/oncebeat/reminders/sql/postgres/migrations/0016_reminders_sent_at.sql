-- reminders 0016: the dashboard's "sent today" list reads the newest sent reminders by their send instant.
CREATE INDEX reminders_sent_at ON reminders (sent_at) WHERE state = 'sent';
