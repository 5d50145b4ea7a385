-- engine 0016 (PostgreSQL): jobs pages are filled to 70 % (issue 27 target 2, docs/benchmarks.md round 3f).
-- A drained job is updated twice (claim, completion) and neither update can be HOT: each changes state, which the
-- partial indexes' conditions name, and lease_expires_at / finished_at, which two indexes key on. At fillfactor 100
-- every new version went to another page, each a heap record of its own; with room left on the page, a claim's new
-- version goes beside the old one (one record, prefix/suffix-compressed). Measured: WAL bytes per drained job
-- ~845 -> ~731 (-13 %), the server's instructions per job 134,423 -> 130,846 (-2.7 %, callgrind), two-worker drain
-- after / before 1.07 (median of 8 interleaved repetitions, 6 higher). The price: a freshly enqueued backlog takes
-- ~1.4 x as many heap pages. Only pages written from now on honour it: no rewrite, a brief
-- SHARE UPDATE EXCLUSIVE lock. Nothing to do on SQLite (its 0016 is empty; it has no fillfactor).
ALTER TABLE jobs SET (fillfactor = 70);
