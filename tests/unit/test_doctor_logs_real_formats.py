"""Lines real programs write that the log doctor once missed: Sidekiq 6 without a stamp under DYNO, mail in an
app's own words (and --mail-pattern), systemd's `Main process exited`, Celery's bare `Warm shutdown`,
Clockwork 3's `Finished`, Active Job's retry_on re-enqueue, Celery's retry `received` before its `retry:`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from oncebeat.doctor.logs import diagnose_logs
from oncebeat.doctor.logs.mail import DEFAULT, compile_mail_pattern
from oncebeat.doctor.logs.reader import ReadStats, parse_lines
from oncebeat.doctor.logs.records import Line
from oncebeat.errors import ConfigError

SRC = Path(__file__).resolve().parents[2] / "src"
UTC = ZoneInfo("UTC")


def events(*texts: str, mail_pattern: str | None = None) -> tuple[list, ReadStats]:  # type: ignore[type-arg]
    stats = ReadStats()
    lines = [Line(file="f", number=i + 1, text=t) for i, t in enumerate(texts)]
    return parse_lines(lines, log_tz=UTC, year=2026, stats=stats, mail=compile_mail_pattern(mail_pattern)), stats


@pytest.mark.parametrize("text", [
    "Overdue reminder for INV-101 e-mailed to ap@globex.example: 250 2.0.0 Ok: queued as 4F0002A1",
    "Dunning digest sent to finance@acme.example (250 2.0.0 Ok: queued as 4F0001A1)",
    "Reminder for INV-201 e-mailed to ap@globex.example, SMTP said 250 Message accepted for delivery",
    "mailer: <ap@globex.example> 250 OK id=1tXyZ",
    "Emailed invoice 42 to Ap.Team+billing@globex.example",
])
def test_the_default_rule_knows_a_sent_mail_in_an_apps_own_words(text: str) -> None:
    assert DEFAULT.match(text) is not None


@pytest.mark.parametrize("text", [
    "Reminder for INV-201 could not be sent to ap@globex.example: 451 try later",
    "Mail to ap@globex.example bounced",
    "Scaled to clock@2:Standard-1X by user ops@acme.example",  # an address, no word of sending
    "Sent 12 reminders",  # no address
    "Invoice 250 sent",  # no address
    "user@ sent",
    "Delivered webhook to https://hook:s3cret@hooks.example.test/in",  # a URL's credentials, not an address
])
def test_the_default_rule_ignores_lines_that_do_not_say_a_mail_went_out(text: str) -> None:
    assert DEFAULT.match(text) is None


def test_a_mail_pattern_replaces_the_default_and_a_bad_one_is_a_clear_error() -> None:
    own = "[ActiveJob] [RemindJob] [7d1b] Notified customer <ap@globex.example> of INV-3"
    assert events("2026-03-02T14:00:00+00:00 app[worker.1]: " + own)[0][0].kind != "mail"
    (e,), _ = events("2026-03-02T14:00:00+00:00 app[worker.1]: " + own,
                     mail_pattern=r"Notified customer <(?P<to>[^>]+)>")
    assert e.kind == "mail" and e.job_id == "7d1b" and e.detail["to"] == "ap@globex.example"
    with pytest.raises(ConfigError, match=r"--mail-pattern '\(sent' is not a valid regular expression: .*position"):
        diagnose_logs([], mail_pattern="(sent")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-m", "oncebeat.cli", "doctor", "--logs", "/dev/null", "--mail-pattern",
                          "e-mailed to (?P<to"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "--mail-pattern" in out.stderr and "Traceback" not in out.stderr


def test_sidekiq_6_under_dyno_writes_no_stamp_and_the_envelope_dates_it() -> None:
    line = "pid=4 tid=2bm class=DunningDigestWorker jid=4ffb320b593465b4a360128d INFO: start"
    (e,), _ = events("2026-03-03T14:00:00.012819+00:00 app[worker.1]: " + line)
    assert (e.kind, e.job, e.job_id, e.process) == ("start", "DunningDigestWorker", "4ffb320b593465b4a360128d",
                                                     "worker.1")
    said = "pid=4 tid=2bm class=DunningDigestWorker jid=4ffb INFO: Dunning digest sent to finance@acme.example (250 Ok)"
    (m,), _ = events("2026-03-03T14:00:00.05+00:00 app[worker.1]: " + said)
    assert (m.kind, m.job_id, m.thread) == ("mail", "4ffb", "worker.1/2bm")
    found, stats = events(line)  # no envelope, no stamp: nothing can date it
    assert found == [] and stats.unknown == 1


def test_systemd_main_process_exited_and_celerys_bare_warm_shutdown_are_read() -> None:
    found, stats = events(
        "2026-03-04T08:00:04-0600 billing-1 systemd[1]: celery-beat.service: Main process exited, code=killed, "
        "status=9/KILL",
        "2026-03-04T08:00:06-0600 billing-1 systemd[1]: celery-beat.service: Scheduled restart job, restart counter "
        "is at 1.",
        "2026-03-05T08:00:07-0600 billing-1 celery[7029]: worker: Warm shutdown (MainProcess)",
        "2026-03-02T08:00:00.020175+00:00 app[clock.1]: I, [2026-03-02T08:00:00.020175 #4]  INFO -- : Finished "
        "'invoice_reminders' duration_ms=19 error=nil")
    assert [(e.kind, e.process) for e in found] == [
        ("exit", "billing-1 celery-beat"), ("restart", "billing-1 celery-beat"),
        ("restart", "billing-1 celery[7029]"), ("noise", "clock.1")]
    assert found[0].detail["code"] == "killed" and stats.unknown == 0


def test_active_job_retry_on_reenqueues_the_same_job_id_and_that_is_no_new_trigger(tmp_path: Path) -> None:
    log = tmp_path / "heroku.log"
    aj = "[ActiveJob] [SendJob] [jid-1]"
    days = []
    for d in range(2, 6):
        t = f"2026-03-0{d}T14:00:0"
        days += [f"{t}0.001+00:00 app[clock.1]: I, [2026-03-0{d}T14:00:00.001 #4]  INFO -- : Triggering 'send'",
                 f"{t}0.002+00:00 app[clock.1]: [ActiveJob] Enqueued SendJob (Job ID: id-{d}) to Sidekiq(default)",
                 f"{t}0.010+00:00 app[worker.1]: [ActiveJob] [SendJob] [id-{d}] Performing SendJob (Job ID: id-{d}) "
                 "from Sidekiq(default)",
                 f"{t}1.000+00:00 app[worker.1]: [ActiveJob] [SendJob] [id-{d}] Performed SendJob (Job ID: id-{d}) "
                 "from Sidekiq(default) in 990.0ms"]
        if d == 4:  # retry_on: the worker enqueues the same Job ID again, "at" a later instant
            days[-1] = (f"{t}1.000+00:00 app[worker.1]: [ActiveJob] [SendJob] [id-{d}] Error performing SendJob "
                        f"(Job ID: id-{d}) from Sidekiq(default) in 990.0ms: Timeout (Timeout)")
            days += [f"{t}1.001+00:00 app[worker.1]: [ActiveJob] Enqueued SendJob (Job ID: id-{d}) to "
                     f"Sidekiq(default) at 2026-03-0{d} 14:00:03 UTC",
                     f"{t}3.010+00:00 app[worker.1]: [ActiveJob] [SendJob] [id-{d}] Performing SendJob (Job ID: "
                     f"id-{d}) from Sidekiq(default)",
                     f"{t}4.000+00:00 app[worker.1]: [ActiveJob] [SendJob] [id-{d}] Performed SendJob (Job ID: "
                     f"id-{d}) from Sidekiq(default) in 990.0ms"]
    log.write_text("\n".join(days) + "\n")
    report = diagnose_logs([log], tz="America/Chicago")
    assert not report.findings, [f.finding.summary for f in report.findings]
    (row,) = [r for r in report.days if r.day.isoformat() == "2026-03-04"]
    assert (row.enqueued, row.performed, row.failed) == (1, 2, 1)
    _ = aj


def test_celery_logs_the_retrys_received_before_the_retry_line_and_the_attempts_stay_apart(tmp_path: Path) -> None:
    beat = tmp_path / "beat.log"
    worker = tmp_path / "worker.log"
    t = "billing.send_overdue_reminders"
    b, w = [], []
    for d in range(2, 6):
        b.append(f"[2026-03-0{d} 08:00:00,001: INFO/MainProcess] Scheduler: Sending due task send ({t})")
        w += [f"[2026-03-0{d} 08:00:00,020: INFO/MainProcess] Task {t}[id-{d}] received",
              f"[2026-03-0{d} 08:00:00,300: INFO/ForkPoolWorker-2] {t}[id-{d}]: Reminder for INV-201 e-mailed to "
              "ap@globex.example, SMTP said 250 OK"]
        if d == 3:
            w += [f"[2026-03-0{d} 08:00:01,038: INFO/MainProcess] Task {t}[id-{d}] received",
                  f"[2026-03-0{d} 08:00:01,093: INFO/ForkPoolWorker-2] Task {t}[id-{d}] retry: Retry in 0s: "
                  "LedgerTimeout('ledger API timed out')",
                  f"[2026-03-0{d} 08:00:01,203: INFO/ForkPoolWorker-1] {t}[id-{d}]: Reminder for INV-201 e-mailed to "
                  "ap@globex.example, SMTP said 250 OK"]
        w.append(f"[2026-03-0{d} 08:00:01,871: INFO/ForkPoolWorker-1] Task {t}[id-{d}] succeeded in 0.8s: None")
    beat.write_text("\n".join(b) + "\n")
    worker.write_text("\n".join(w) + "\n")
    report = diagnose_logs([beat, worker], tz="America/Chicago", log_tz="America/Chicago")
    (f,) = report.findings
    assert f.finding.code == "retry-side-effect" and f.day is not None and f.day.isoformat() == "2026-03-03"
    assert "LedgerTimeout" in f.finding.summary and "attempt 2 ran them again (1 mail(s))" in f.finding.summary
    (row,) = [r for r in report.days if r.day.isoformat() == "2026-03-03"]
    assert (row.performed, row.failed, row.mails) == (2, 1, 2)
