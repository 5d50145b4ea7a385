"""The log doctor reads regular files twice and keeps only the lines of jobs a clock may schedule: the report is
the same as with every line kept (one read), on every fixture, on random logs, and where dropping a line would
have changed a finding (then it reads a third time, keeping those lines)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from oncebeat.doctor.logs import diagnose_logs
from oncebeat.doctor.logs.reader import read_file_lines
from oncebeat.doctor.logs.scope import UnscheduledFilter

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
ALL = sorted(FIXTURES.rglob("*.log"))
JOB = "SendInvoiceOverdueRemindersJob"


def both(paths: list[Path], **kw: object) -> tuple[object, object]:
    two = diagnose_logs(paths, **kw)  # type: ignore[arg-type]
    one = diagnose_logs(paths, two_reads=False, **kw)  # type: ignore[arg-type]
    assert one.stats.reads == 1 and one.stats.dropped == 0
    assert json.dumps(two.to_json(), default=str) == json.dumps(one.to_json(), default=str)
    assert two.to_text() == one.to_text()
    return two, one


@pytest.mark.parametrize("path", ALL, ids=[p.name for p in ALL])
@pytest.mark.parametrize("tz", ["UTC", "America/Chicago", "Europe/Berlin"])
def test_every_fixture_gives_the_same_report_read_twice_as_read_once(path: Path, tz: str) -> None:
    two, _ = both([path], tz=tz)
    assert two.stats.reads >= 2  # type: ignore[attr-defined]
    for story in two.jobs:  # type: ignore[attr-defined]
        both([path], tz=tz, job=story.job)


def test_all_fixtures_at_once_give_the_same_report() -> None:
    assert len(ALL) >= 6
    both(ALL, tz="America/Chicago")


def _aj(at: str, proc: str, job: str, jid: str, what: str) -> str:
    return f"2026-03-02T{at}+00:00 app[{proc}]: [ActiveJob] [{job}] [{jid}] {what}"


def _busy(n: int) -> list[str]:
    """``n`` runs of web-enqueued jobs (enqueue, Sidekiq start/done, Active Job perform, a tagged delivery)."""
    out = []
    for i in range(n):
        at = f"15:{i // 60:02d}:{i % 60:02d}.{i % 1000:06d}"
        job, aj, jid, w = "WebhookDeliveryJob", f"aj-{i}", f"jid{i:020d}", f"worker.{1 + i % 2}"
        out += [f"2026-03-02T{at}+00:00 app[web.1]: [ActiveJob] Enqueued {job} (Job ID: {aj}) to Sidekiq(default)",
                f"2026-03-02T{at}+00:00 app[{w}]: 2026-03-02T{at[:12]}Z pid=4 tid=gr3 class={job} jid={jid} "
                "INFO: start",
                _aj(at, w, job, aj, f"Performing {job} (Job ID: {aj}) from Sidekiq(default) enqueued at x"),
                _aj(at, w, job, aj, f"Delivered mail m{i}@example.test (1.0ms)"),
                _aj(at, w, job, aj, f"Performed {job} (Job ID: {aj}) from Sidekiq(default) in 5.0ms"),
                f"2026-03-02T{at}+00:00 app[{w}]: 2026-03-02T{at[:12]}Z pid=4 tid=gr3 class={job} jid={jid} "
                "elapsed=0.1 INFO: done"]
    return out


def test_the_lines_of_jobs_no_clock_schedules_are_dropped_and_the_report_is_the_same(tmp_path: Path) -> None:
    log = tmp_path / "busy.log"
    log.write_text((FIXTURES / "heroku-clockwork-sidekiq.log").read_text() + "\n".join(_busy(300)) + "\n")
    two, _ = both([log], tz="America/Chicago")
    assert two.stats.reads == 2 and two.stats.dropped == 300 * 6  # type: ignore[attr-defined]
    assert {f.finding.code for f in two.findings} >= {"multiple-clocks", "clock-restart"}  # type: ignore[attr-defined]


def test_standard_input_is_read_once_with_every_job_line_kept() -> None:
    text = (FIXTURES / "heroku-clockwork-sidekiq.log").read_text() + "\n".join(_busy(20)) + "\n"
    report = diagnose_logs(["-"], tz="America/Chicago", stdin=io.StringIO(text))
    assert report.stats.reads == 1 and report.stats.dropped == 0
    assert report.to_text() == diagnose_logs(["-"], tz="America/Chicago", stdin=io.StringIO(text),
                                             two_reads=False).to_text()


_RETRIED = [
    "2026-03-02T14:00:00.010000+00:00 app[clock.1]: Triggering 'invoice_reminders'",
    f"2026-03-02T14:00:00.030000+00:00 app[clock.1]: [ActiveJob] Enqueued {JOB} (Job ID: k-1) to Sidekiq(default)",
    _aj("14:00:00.200000", "worker.1", JOB, "k-1", f"Performing {JOB} (Job ID: k-1) from Sidekiq(default) enqueued at x"),
    _aj("14:00:00.700000", "worker.1", JOB, "k-1", "Delivered mail a1@example.test (1.0ms)"),
    _aj("14:00:01.100000", "worker.1", JOB, "k-1",
        f"Error performing {JOB} (Job ID: k-1) from Sidekiq(default) in 898.1ms: Net::ReadTimeout (Net::ReadTimeout)"),
    "2026-03-02T14:00:05.000000+00:00 app[web.1]: [ActiveJob] Enqueued WebhookDeliveryJob (Job ID: w-1) to "
    "Sidekiq(default)",
    _aj("14:00:05.100000", "worker.1", "WebhookDeliveryJob", "w-1",
        "Performing WebhookDeliveryJob (Job ID: w-1) from Sidekiq(default) enqueued at x"),
    _aj("14:00:05.200000", "worker.1", "WebhookDeliveryJob", "w-1",
        "Error performing WebhookDeliveryJob (Job ID: w-1) from Sidekiq(default) in 100.0ms: Faraday::TimeoutError"),
    # no job id: the analysis gives it to the attempt that failed last on worker.1, the webhook's
    "2026-03-02T14:00:05.300000+00:00 app[worker.1]: 2026-03-02T14:00:05.299Z pid=4 tid=gr3 WARN: "
    "Faraday::TimeoutError: execution expired",
    _aj("14:00:31.000000", "worker.2", JOB, "k-1", f"Performing {JOB} (Job ID: k-1) from Sidekiq(default) enqueued at x"),
    _aj("14:00:31.500000", "worker.2", JOB, "k-1", "Delivered mail a1@example.test (1.0ms)"),
    _aj("14:00:32.000000", "worker.2", JOB, "k-1", f"Performed {JOB} (Job ID: k-1) from Sidekiq(default) in 9.0ms"),
]


def test_a_line_without_job_id_where_dropped_jobs_failed_makes_a_third_read_that_keeps_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "retried.log"
    log.write_text("\n".join(_RETRIED) + "\n")
    two, one = both([log], tz="UTC")
    assert two.stats.reads == 3  # type: ignore[attr-defined]
    (f,) = one.by_code("retry-side-effect")  # type: ignore[attr-defined]
    assert "retried.log:9" not in {f"{e.data['file'].rsplit('/', 1)[-1]}:{e.data['line']}" for e in f.finding.evidence}
    # without that third read the exception line of the webhook would show as the reminder job's
    monkeypatch.setattr(UnscheduledFilter, "widen_for", lambda self, floating, kept: set())
    blind = diagnose_logs([log], tz="UTC")
    assert blind.stats.reads == 2
    assert json.dumps(blind.to_json(), default=str) != json.dumps(one.to_json(), default=str)  # type: ignore[attr-defined]


def test_a_delivery_of_a_dropped_job_before_its_start_makes_a_third_read(tmp_path: Path) -> None:
    log = tmp_path / "early.log"
    log.write_text("\n".join(_RETRIED[:3] + [
        _aj("14:00:00.400000", "worker.1", "WebhookDeliveryJob", "w-2", "Delivered mail z@example.test (1.0ms)"),
        _aj("14:00:00.500000", "worker.1", "WebhookDeliveryJob", "w-2",
            "Performing WebhookDeliveryJob (Job ID: w-2) from Sidekiq(default) enqueued at x"),
        _aj("14:00:00.900000", "worker.1", JOB, "k-1", f"Performed {JOB} (Job ID: k-1) from Sidekiq(default) in 9ms"),
    ]) + "\n")
    two, one = both([log], tz="UTC")
    assert two.stats.reads == 3  # type: ignore[attr-defined]
    assert [r.mails for r in one.days] == [1]  # type: ignore[attr-defined]  # the analysis gave it to the open run


def test_one_job_id_on_two_jobs_makes_a_read_that_keeps_every_line(tmp_path: Path) -> None:
    log = tmp_path / "shared-id.log"
    log.write_text("\n".join(_RETRIED[:4] + [
        "2026-03-02T14:00:00.300000+00:00 app[web.1]: [ActiveJob] Enqueued WebhookDeliveryJob (Job ID: k-1) to "
        "Sidekiq(default)"]) + "\n")
    two, _ = both([log], tz="UTC")
    assert two.stats.reads == 3 and two.stats.dropped == 0  # type: ignore[attr-defined]


def _random_log(rnd: random.Random, k: int) -> list[str]:
    """A day of a clock-scheduled job and web-enqueued ones on two workers, with failures, retries, exception
    lines with and without job ids, untagged deliveries, exits, lines slightly out of order."""
    lines = []
    jobs = [JOB, "WebhookDeliveryJob", "SyncCustomerJob"]
    shared_ids, untagged, jobless_warn, disorder = (rnd.random() < p for p in (0.2, 0.3, 0.5, 0.3))
    for i in range(rnd.randint(5, 40)):
        t = 14 * 3600 + rnd.randint(0, 600)
        job = rnd.choice(jobs)
        n = rnd.randint(0, 60) if shared_ids else i + 1000 * k
        aj, jid, w = f"id-{n}", f"jid{n:020d}", f"worker.{rnd.randint(1, 2)}"
        tid = rnd.choice(["gr3", "k9q"])

        def at(dt: float) -> str:
            s = t + dt
            return f"{int(s) // 3600:02d}:{int(s) % 3600 // 60:02d}:{int(s) % 60:02d}.{rnd.randint(0, 999999):06d}"

        src = "clock.1" if job == JOB and rnd.random() < 0.7 else rnd.choice(["web.1", "scheduler.12"])
        if src == "clock.1":
            lines.append(f"2026-03-02T{at(0)}+00:00 app[clock.1]: Triggering 'invoice_reminders'")
        lines.append(f"2026-03-02T{at(0.1)}+00:00 app[{src}]: [ActiveJob] Enqueued {job} (Job ID: {aj}) to "
                     "Sidekiq(default)")
        for attempt in range(rnd.randint(1, 2)):
            base = 1 + attempt * 30
            s = at(base)
            lines.append(f"2026-03-02T{s}+00:00 app[{w}]: 2026-03-02T{s[:12]}Z pid=4 tid={tid} class={job} "
                         f"jid={jid} INFO: start")
            lines.append(_aj(at(base + 0.1), w, job, aj, f"Performing {job} (Job ID: {aj}) from Sidekiq(default) "
                             "enqueued at x"))
            for _ in range(rnd.randint(0, 3)):
                if not untagged or rnd.random() < 0.8:
                    lines.append(_aj(at(base + rnd.uniform(0.2, 5)), w, job, aj, "Delivered mail m@example.test"))
                else:
                    lines.append(f"2026-03-02T{at(base + rnd.uniform(0, 5))}+00:00 app[{w}]: Sent mail to "
                                 "x@example.test (2.0ms)")
            end = at(base + rnd.uniform(0, 8) if disorder else base + 5 + rnd.uniform(0, 3))
            r = rnd.random()
            if r < 0.3:
                lines.append(_aj(end, w, job, aj, f"Error performing {job} (Job ID: {aj}) from Sidekiq(default) in "
                                 "9.0ms: Net::ReadTimeout (Net::ReadTimeout)"))
                lines.append(f"2026-03-02T{end}+00:00 app[{w}]: 2026-03-02T{end[:12]}Z pid=4 tid={tid} WARN: "
                             f'{{"context":"Job raised exception","job":{{"class":"{job}","jid":"{jid}",'
                             '"error_class":"Net::ReadTimeout"}}')
                if jobless_warn:
                    lines.append(f"2026-03-02T{end}+00:00 app[{w}]: 2026-03-02T{end[:12]}Z pid=4 tid={tid} WARN: "
                                 "Net::ReadTimeout: Net::ReadTimeout")
            elif r < 0.4:
                lines.append(f"2026-03-02T{end}+00:00 heroku[{w}]: Process exited with status 137")
            elif r < 0.9:
                lines.append(_aj(end, w, job, aj, f"Performed {job} (Job ID: {aj}) from Sidekiq(default) in 9.0ms"))
                lines.append(f"2026-03-02T{end}+00:00 app[{w}]: 2026-03-02T{end[:12]}Z pid=4 tid={tid} class={job} "
                             f"jid={jid} elapsed=0.1 INFO: done")
    lines.sort(key=lambda x: x[11:26])
    if disorder:
        rnd.shuffle(lines)  # the analysis sorts by instant; the reading order only breaks ties
    return lines


READS: dict[int, int] = {}
# The last random-log test reads what the 60 before it left in READS: the file runs whole, in order, in one process
# when it can (tests/worksteal_order.py); the seeds another process ran are read again there.
pytestmark = pytest.mark.file_order


def _reads(folder: Path, seed: int) -> int:
    """Read random log ``seed`` once and twice (the same report, or ``both`` fails); the reads the second took when
    it dropped lines, else 0."""
    rnd = random.Random(seed)
    paths = []
    for k in range(rnd.randint(1, 2)):
        p = folder / f"random-{seed}-{k}.log"
        p.write_text("\n".join(_random_log(rnd, k)) + "\n")
        paths.append(p)
    two, _ = both(paths, tz="America/Chicago")
    return two.stats.reads if two.stats.dropped else 0  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("seed", range(60))
def test_random_logs_give_the_same_report_read_twice_as_read_once(tmp_path: Path, seed: int) -> None:
    READS[seed] = _reads(tmp_path, seed)


def test_the_random_logs_drop_lines_in_two_reads_and_need_a_third_read_too(tmp_path: Path) -> None:
    for seed in set(range(60)) - set(READS):  # run by another test process
        READS[seed] = _reads(tmp_path, seed)
    assert sum(1 for r in READS.values() if r == 2) >= 5 and sum(1 for r in READS.values() if r != 2) >= 5


def test_a_second_read_stops_where_the_first_began_on_a_file_still_written(tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    log.write_bytes(b"one\ntwo\nthr")
    with open(log, "rb") as fh:
        assert [x.text for x in read_file_lines(str(log), fh, limit=8)] == ["one", "two"]
    with open(log, "rb") as fh:
        assert [x.text for x in read_file_lines(str(log), fh, limit=10)] == ["one", "two", "th"]
    with open(log, "rb") as fh:
        assert [x.text for x in read_file_lines(str(log), fh)] == ["one", "two", "thr"]
    big = b"x" * (70 * 1024) + b"\nafter\n"
    log.write_bytes(big)
    with open(log, "rb") as fh:
        got = list(read_file_lines(str(log), fh, limit=len(big)))
    assert [x.too_long for x in got] == [True, False] and got[1].text == "after" and got[1].offset == 70 * 1024 + 1


def test_a_file_named_twice_is_read_once_keeping_every_line() -> None:
    path = FIXTURES / "heroku-clockwork-sidekiq.log"
    report = diagnose_logs([path, path], tz="America/Chicago")
    assert report.stats.reads == 1 and report.stats.lines == 2 * 65
