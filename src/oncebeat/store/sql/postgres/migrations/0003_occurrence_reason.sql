-- engine 0003 (0.1's 0004): why an occurrence did not run (NULL when it was enqueued): "period already served",
-- "catch-up policy latest: a later occurrence runs instead", "catch-up policy none", "schedule paused".
ALTER TABLE occurrences ADD COLUMN reason TEXT;
