"""Benchmark harness for oncebeat (run by hand, not part of the test suite).

Usage::

    pip install -e '.[bench]'          # Procrastinate, Celery[redis], RQ, psutil, pyinstrument, py-spy
    python -m bench all [--reps 3] [--quick] [--profile]     # from the repository root
    python -m bench w1|w2|w3|w4|memory|growth|whatif [--reps 3] [--quick]

Workloads (see ``docs/benchmarks.md`` for the method and a recorded run):

- ``w1`` queue: enqueue no-op jobs (one call per job, and in bulk), drain them with
  1 and 2 worker OS processes, on PostgreSQL and SQLite; next to a raw psycopg
  ``FOR UPDATE SKIP LOCKED`` loop, raw sqlite3 loops, Procrastinate, Celery
  (Redis broker) and RQ (``SimpleWorker``), every rate also as a ratio to the
  raw one-job-per-transaction loop measured in the same repetition.
- ``w2`` scan: one reminder scan over 10k / 100k / 1M invoices built from the
  Online Retail data set; a second (no-op) scan; the next day's incremental scan.
- ``w3`` end to end: reminders delivered per second through the local SMTP sink.
- ``w4`` clock: 10,000 schedules across 50 zones for 2 minutes of real time.
- ``memory``: RSS of idle and busy workers and clocks.
- ``growth``: how W1 drain time grows with the backlog (W2 growth is in ``w2``).
- ``whatif`` (not in ``all``): proposed engine changes measured beside the engine.

Every run prints markdown tables and writes JSON to ``bench/results/``
(git-ignored). Environment: ``BENCH_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``), ``BENCH_REDIS_URL`` (default
``redis://127.0.0.1:6379/13`` — that database is flushed by the Celery/RQ runs).
"""
