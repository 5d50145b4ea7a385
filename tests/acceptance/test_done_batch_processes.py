"""``kill -9`` of a worker process while it writes the done records of several sends together (issue 27).

The worker is ``procs/batch_worker.py``: the real :class:`~oncebeat.worker.Worker` with 4 slots and 4 SMTP
connections to the real aiosmtpd sink (a Maildir), one email per job; its slots leave their sends together, so
their done records meet in the process's group commit. It SIGKILLs itself at the first write of two or more
done records, after writing that write's keys to a file. A second worker (``burst``) rescues and finishes the
rest. Counted from the Maildir and the ledger: duplicates 0, lost 0, and the keys in doubt are those of the
killed write, plus at most the other slots' sends that had passed their point of no return: never more than the
slots.
"""

from __future__ import annotations

import collections
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_processes import Proc, queue, spawn  # noqa: F401 - spawn is a fixture

from oncebeat.mail import MailSink, read_maildir
from oncebeat.store import open_store

pytestmark = pytest.mark.slow

JOBS = 24
SLOTS = 4
LEASE = 1.0


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[MailSink]:
    with MailSink(tmp_path / "maildir") as running:
        yield running


def test_a_worker_killed_while_writing_several_done_records_sends_nothing_twice_loses_nothing_and_doubts_the_batch(
        db_url: str, sink: MailSink, spawn, tmp_path: Path) -> None:  # noqa: F811 - spawn is a fixture
    with open_store(db_url) as store:
        store.migrate()
        q = queue(store)
        job_ids = [q.enqueue("mail", {"n": n}) for n in range(JOBS)]
    assert None not in job_ids
    batch_file = tmp_path / "killed-batch.txt"

    first = spawn("batch_worker.py", db_url, sink.url, "--jobs", str(JOBS), "--concurrency", str(SLOTS),
                  "--lease", str(LEASE), "--kill-at-batch", str(batch_file))
    assert first.wait(timeout=120) == -signal.SIGKILL, first.logs()
    killed = batch_file.read_text().split()
    assert len(killed) >= 2, killed

    second = spawn("batch_worker.py", db_url, sink.url, "--burst")
    assert second.wait(timeout=120) == 0, second.logs()

    delivered = collections.Counter(m.to for m in read_maildir(sink.maildir))
    with open_store(db_url) as store:
        states = {r["key"]: r["state"] for r in store.read("list_effects", state=None)}
        jobs = collections.Counter(queue(store).get(j).state for j in job_ids if j is not None)  # type: ignore[union-attr]
    keys = [f"mail:{n}" for n in range(JOBS)]
    assert max(delivered.values()) == 1, f"duplicates: {delivered}"
    assert set(states) == set(keys) and set(states.values()) <= {"done", "in_doubt"}, f"lost: {states}"
    in_doubt = {k for k, s in states.items() if s == "in_doubt"}
    assert set(killed) <= in_doubt, "every key of the killed write is in doubt (its email went out)"
    assert len(in_doubt) <= SLOTS, f"no more in doubt than the killed worker's slots: {sorted(in_doubt)}"
    for key in keys:  # a done key's email arrived exactly once; an in-doubt one at most once (here: once)
        assert delivered[f"customer{key.split(':')[1]}@example.test"] == 1, key
    assert jobs == {"completed": JOBS - len(in_doubt), "in_doubt": len(in_doubt)}, jobs
