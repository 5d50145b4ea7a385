"""The log doctor on hand-written excerpts of each format: what it finds, the evidence it shows, what it ignores."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import date
from zoneinfo import ZoneInfo
from pathlib import Path

import pytest

from oncebeat.doctor.logs import diagnose_logs
from oncebeat.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SRC = Path(__file__).resolve().parents[2] / "src"
HEROKU = FIXTURES / "heroku-clockwork-sidekiq.log"
CELERY = FIXTURES / "celery-journal.log"
UTC_SCHEDULE = FIXTURES / "sidekiq-utc-schedule.log"
CHICAGO = "America/Chicago"
JOB = "SendInvoiceOverdueRemindersJob"


def where(finding: object) -> set[str]:
    return {f"{e.data['file'].rsplit('/', 1)[-1]}:{e.data['line']}" for e in finding.finding.evidence}  # type: ignore[attr-defined]


def test_two_clock_dynos_are_named_with_their_enqueue_lines_and_the_scale_that_made_them() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    (f,) = report.by_code("multiple-clocks")
    assert f.day == date(2026, 3, 2) and f.job == JOB
    assert "clock.1" in f.finding.summary and "clock.2" in f.finding.summary
    lines = where(f)
    assert {f"{HEROKU.name}:8", f"{HEROKU.name}:10", f"{HEROKU.name}:3"} <= lines
    assert "ps:scale clock=1" in f.finding.fix
    first = f.finding.evidence[0]
    assert "2026-03-02 08:00:00 CST = 14:00:00 UTC" in first.text
    assert first.data["at"]["utc"].startswith("2026-03-02T14:00:00") and first.data["at"]["tz"] == CHICAGO


def test_a_clock_restarted_after_the_fire_that_fires_on_boot_is_a_clock_restart_with_the_restart_lines() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    (f,) = report.by_code("clock-restart")
    assert f.day == date(2026, 3, 4) and f.finding.severity == "error"
    assert "6 min after the day's fire" in f.finding.summary and "08:06:15" in f.finding.summary
    assert {f"{HEROKU.name}:45", f"{HEROKU.name}:48", f"{HEROKU.name}:56"} <= where(f)


def test_a_heroku_scheduler_dyno_enqueuing_the_same_job_is_a_leftover_trigger() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    (f,) = report.by_code("leftover-trigger")
    assert f.day == date(2026, 3, 4) and "scheduler.4821" in f.finding.summary
    assert f"{HEROKU.name}:59" in where(f)  # the command the one-off dyno ran
    assert "Heroku Scheduler" in f.finding.fix


def test_a_retry_after_delivered_mail_names_the_exception_and_both_attempts() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    (f,) = report.by_code("retry-side-effect")
    assert f.day == date(2026, 3, 3)
    assert "Net::ReadTimeout" in f.finding.summary and "attempt 2" in f.finding.summary
    assert {f"{HEROKU.name}:32", f"{HEROKU.name}:33", f"{HEROKU.name}:39", f"{HEROKU.name}:40"} <= where(f)


def test_overlapping_runs_on_two_workers_are_a_concurrent_run() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    (f,) = report.by_code("concurrent-run")
    assert f.day == date(2026, 3, 2) and "worker.1" in f.finding.summary and "worker.2" in f.finding.summary


def test_sidekiq_lines_of_an_active_job_run_are_not_counted_twice_and_the_day_table_adds_up() -> None:
    report = diagnose_logs([HEROKU], tz=CHICAGO)
    rows = {r.day: (r.enqueued, r.performed, r.failed, r.mails) for r in report.days}
    assert rows == {date(2026, 3, 2): (2, 2, 0, 4), date(2026, 3, 3): (1, 2, 1, 3), date(2026, 3, 4): (3, 3, 0, 0)}
    assert report.exit_code == 1
    assert report.stats.unknown == 3 and report.stats.recognised == 62  # SQL, a request line, a backtrace


def test_celery_beat_restarted_by_systemd_and_an_old_cron_call_are_found_in_journalctl_output() -> None:
    report = diagnose_logs([CELERY], tz=CHICAGO)
    codes = sorted((f.finding.code, f.day) for f in report.findings)
    assert codes == [("clock-restart", date(2026, 3, 3)), ("leftover-trigger", date(2026, 3, 4)),
                     ("retry-side-effect", date(2026, 3, 2))]
    (retry,) = report.by_code("retry-side-effect")
    assert "OperationalError" in retry.finding.summary
    (cron,) = report.by_code("leftover-trigger")
    assert "cron" in cron.finding.summary and f"{CELERY.name}:25" in where(cron)


def test_a_schedule_kept_in_utc_shows_as_a_dst_shift_in_the_schedule_zone() -> None:
    report = diagnose_logs([UTC_SCHEDULE], tz=CHICAGO)
    (f,) = report.findings
    assert f.finding.code == "timezone" and "08:00 UTC every day" in f.finding.summary
    assert "02:00 and 03:00" in f.finding.summary and report.exit_code == 0
    assert report.jobs[0].fire_local == "02:00"


def test_the_same_logs_read_in_the_utc_zone_find_no_dst_shift() -> None:
    assert diagnose_logs([UTC_SCHEDULE], tz="UTC").findings == ()


HOST_TZ = """\
2026-03-02T14:00:00.010000+00:00 app[clock.1]: I, [2026-03-03T04:00:00.009000 #4]  INFO -- : Triggering 'SendInvoiceOverdueRemindersJob'
2026-03-02T14:00:00.020000+00:00 app[clock.1]: [ActiveJob] Enqueued SendInvoiceOverdueRemindersJob (Job ID: 00000000-0000-4000-8000-000000000001) to Sidekiq(default)
2026-03-03T14:00:00.010000+00:00 app[clock.1]: I, [2026-03-04T04:00:00.009000 #4]  INFO -- : Triggering 'SendInvoiceOverdueRemindersJob'
2026-03-03T14:00:00.020000+00:00 app[clock.1]: [ActiveJob] Enqueued SendInvoiceOverdueRemindersJob (Job ID: 00000000-0000-4000-8000-000000000002) to Sidekiq(default)
"""


def test_a_clock_whose_host_zone_gives_another_date_is_reported_with_its_offset(tmp_path: Path) -> None:
    log = tmp_path / "clock.log"
    log.write_text(HOST_TZ, encoding="utf-8")
    (f,) = diagnose_logs([log], tz=CHICAGO).findings
    assert f.finding.code == "timezone" and "UTC+14:00" in f.finding.summary
    assert "its date is 2026-03-03, the schedule's date is 2026-03-02" in f.finding.evidence[0].text


NOISE = """\
this is not a log line
2026-03-02T14:00:00.000000+00:00 app[web.1]: Completed 200 OK in 12ms (Views: 3.1ms | ActiveRecord: 1.2ms)
2026-03-02T14:00:00+00:00 heroku[router]: at=info method=GET path="/" host=app.example.test status=200
\x00\x01 binary junk ][
"""


def test_unknown_lines_are_counted_never_an_error(tmp_path: Path) -> None:
    log = tmp_path / "noise.log"
    log.write_text(NOISE, encoding="utf-8")
    report = diagnose_logs([log], tz=CHICAGO)
    # no error finding; but with no scheduled job in the lines nothing was judged: exit 2, not a clean bill
    assert report.findings == () and not report.judged and report.exit_code == 2
    assert (report.stats.lines, report.stats.recognised, report.stats.unknown) == (4, 1, 3)
    assert any("no scheduled job" in n for n in report.notes)


def test_log_drain_framing_and_journalctl_short_stamps_are_read(tmp_path: Path) -> None:
    log = tmp_path / "drain.log"
    log.write_text(
        "214 <190>1 2026-03-02T14:00:00.010000+00:00 host app clock.1 - Triggering 'SendInvoiceOverdueRemindersJob'\n"
        "Mar 02 08:00:01 billing-1 celery[812]: [2026-03-02 08:00:01,004: INFO/MainProcess] "
        "Scheduler: Sending due task send-overdue-reminders (billing.tasks.send_overdue_reminders)\n", encoding="utf-8")
    report = diagnose_logs([log], tz=CHICAGO, log_tz=CHICAGO)
    assert report.stats.by_format == {"clockwork": 1, "celery": 1}
    assert {j.job: j.fire_utc for j in report.jobs} == {JOB: "14:00", "billing.tasks.send_overdue_reminders": "14:00"}


def test_since_and_until_and_job_narrow_the_report() -> None:
    from oncebeat.doctor.logs import day_bound

    report = diagnose_logs([HEROKU], tz=CHICAGO, since=day_bound("2026-03-03", CHICAGO, "--since"),
                           until=day_bound("2026-03-03", CHICAGO, "--until", end=True), job="invoice_reminders")
    assert [f.finding.code for f in report.findings] == ["retry-side-effect"]
    assert [r.day for r in report.days] == [date(2026, 3, 3)] and report.stats.outside > 0


def test_a_job_no_line_mentions_is_refused_with_the_jobs_that_are_there() -> None:
    with pytest.raises(ConfigError, match=r"--job 'Nope'.*SendInvoiceOverdueRemindersJob"):
        diagnose_logs([HEROKU], tz=CHICAGO, job="Nope")


def test_bad_zone_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--tz 'Mars/Olympus'"):
        diagnose_logs([HEROKU], tz="Mars/Olympus")
    with pytest.raises(ConfigError, match="cannot read log file .*missing.log"):
        diagnose_logs([tmp_path / "missing.log"], tz=CHICAGO)


def test_stdin_is_read_for_a_dash() -> None:
    report = diagnose_logs(["-"], tz=CHICAGO, stdin=io.StringIO(HEROKU.read_text(encoding="utf-8")))
    assert len(report.findings) == 5 and report.findings[0].finding.evidence[0].data["file"] == "<stdin>"


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", "doctor", *args], env=env, text=True,
                          capture_output=True, input=stdin, timeout=120)


def test_cli_prints_the_report_exits_1_on_an_error_and_gives_json() -> None:
    text = run_cli("--logs", str(HEROKU), "--tz", CHICAGO)
    assert text.returncode == 1, text.stderr
    assert "ERROR   multiple-clocks" in text.stdout and "per day (America/Chicago)" in text.stdout
    data = json.loads(run_cli("--logs", str(HEROKU), "--tz", CHICAGO, "--json").stdout)
    assert data["schema"] == "oncebeat.doctor.logs/1" and data["exit_code"] == 1
    assert {f["code"] for f in data["findings"]} == {"multiple-clocks", "clock-restart", "leftover-trigger",
                                                      "retry-side-effect", "concurrent-run"}
    assert data["findings"][0]["evidence"][0]["kind"] == "log" and data["findings"][0]["day"] == "2026-03-02"
    assert data["days"][0] == {"job": JOB, "day": "2026-03-02", "enqueued": 2, "performed": 2, "failed": 0,
                               "mails": 4, "enqueued_by": ["clock.1", "clock.2"]}


def test_cli_reads_stdin_and_refuses_files_without_logs_flag() -> None:
    piped = run_cli("--logs", "-", "--tz", CHICAGO, stdin=CELERY.read_text(encoding="utf-8"))
    assert piped.returncode == 1 and "clock-restart" in piped.stdout
    refused = run_cli(str(HEROKU))
    assert refused.returncode == 2 and "add --logs" in refused.stderr and "Traceback" not in refused.stderr
    stray = run_cli("--tz", CHICAGO)
    assert stray.returncode == 2 and "add --logs" in stray.stderr
    bad = run_cli("--logs", str(HEROKU), "--since", "yesterday")
    assert bad.returncode == 2 and "--since 'yesterday'" in bad.stderr and "Traceback" not in bad.stderr


def test_after_a_migration_an_old_heroku_scheduler_job_still_firing_is_a_leftover_trigger() -> None:
    log = FIXTURES / "heroku-after-migration.log"
    assert diagnose_logs([log], tz=CHICAGO).findings == ()  # no clock enqueues the old job any more ...
    (f,) = diagnose_logs([log], tz=CHICAGO, job=JOB).findings  # ... but named, its last trigger shows
    assert f.finding.code == "leftover-trigger" and f.finding.severity == "warning"
    assert "scheduler.7316" in f.finding.summary and "old trigger still fires" in f.finding.summary


def test_the_readme_example_session_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ oncebeat doctor --logs tests/fixtures/logs/heroku-clockwork-sidekiq.log", 1)[1]
    shown = block.split("```", 1)[0].splitlines()[1:]
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    real = diagnose_logs(["tests/fixtures/logs/heroku-clockwork-sidekiq.log"], tz=CHICAGO).to_text().splitlines()
    for line in shown:
        if line.endswith("…"):
            assert any(r.startswith(line[:-1]) for r in real), line
        elif "cut here" not in line:
            assert line in real, line


def test_a_password_in_a_quoted_line_is_masked(tmp_path: Path) -> None:
    log = tmp_path / "pw.log"
    log.write_text(
        "2026-03-04T14:10:02.000000+00:00 heroku[scheduler.1]: Starting process with command "
        "`DATABASE_URL=postgres://app:s3cret@db.example.test/billing bin/rails runner \"X.perform_later\"`\n"
        "2026-03-04T14:10:09.000000+00:00 app[scheduler.1]: [ActiveJob] Enqueued X (Job ID: 1) to Sidekiq(default)\n",
        encoding="utf-8")
    (f,) = diagnose_logs([log], tz=CHICAGO, job="X").findings
    shown = json.dumps(f.to_json())
    assert "s3cret" not in shown and "app:***@db.example.test" in shown


def test_a_schedule_kept_in_the_host_zone_shows_as_weeks_an_hour_off_between_the_two_dst_dates() -> None:
    log = FIXTURES / "celery-host-zone.log"  # beat on a Europe/Berlin host, meant for 08:00 America/Chicago
    (f,) = diagnose_logs([log], tz=CHICAGO).findings
    assert f.finding.code == "timezone" and "15:00 in the host's zone" in f.finding.summary
    assert "from 2026-03-09 to 2026-03-11" in f.finding.summary and "08:00, 09:00" in f.finding.summary
    assert diagnose_logs([log], tz="Europe/Berlin").findings == ()  # in its own zone it is right


def test_a_deploy_at_the_fire_time_that_skipped_the_day_is_lost_and_a_restart_without_a_double_is_a_warning() -> None:
    log = FIXTURES / "heroku-deploy-at-fire-time.log"
    found = {(f.finding.code, f.finding.severity, f.day): f for f in diagnose_logs([log], tz=CHICAGO).findings}
    assert set(found) == {("lost", "error", date(2026, 3, 4)), ("clock-restart", "warning", date(2026, 3, 5))}
    lost = found[("lost", "error", date(2026, 3, 4))]
    assert "a deploy at the fire time (08:00)" in lost.finding.summary and "not enqueued" in lost.finding.summary
    assert f"{log.name}:5" in where(lost)  # the Deploy line


def test_the_doctor_keeps_job_lines_without_their_text_and_shows_evidence_read_again_from_the_file() -> None:
    # streaming: noise is not kept, a kept line holds its offset, not its text; evidence is the file's line
    from oncebeat.doctor.logs.reader import ReadStats, iter_events, read_file_lines
    from oncebeat.doctor.logs.story import EventStore

    store = EventStore()
    with open(HEROKU, "rb") as fh:
        for e in iter_events(read_file_lines(str(HEROKU), fh), log_tz=ZoneInfo("UTC"), year=2026, stats=ReadStats()):
            store.add(e)
    assert store.events and all(e.kind != "noise" for e in store.events)
    assert all(e.line.text == "" and e.line.offset is not None for e in store.events if "local" not in e.detail)
    assert {"clock.1", "clock.2"} <= store.clocks
    from_file = diagnose_logs([HEROKU], tz=CHICAGO).to_json()
    from_stdin = diagnose_logs(["-"], tz=CHICAGO, stdin=io.StringIO(HEROKU.read_text(encoding="utf-8"))).to_json()
    raw = HEROKU.read_text(encoding="utf-8").splitlines()
    for report in (from_file, from_stdin):
        shown = [e for f in report["findings"] for e in f["evidence"]]
        assert shown and all(e["raw"] == raw[e["line"] - 1] for e in shown)
