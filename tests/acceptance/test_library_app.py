"""A library user's app (``--app``) runs on the engine alone: engine tables, engine SQL, no reminder app loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"
ENGINE_TABLES = {"schema_migrations", "schedules", "schedule_sets", "occurrences", "jobs", "effects",
                 "processes", "events",
                 "idempotency_keys", "paused_queues", "rate_limits", "rate_permits", "queue_limits"}

LIBAPP = '''
from pathlib import Path

from oncebeat import App

app = App()


@app.task()
def report(ctx) -> None:
    # one report per key, however many runs ask for it (a fixed key: the test must not depend on the date)
    ctx.effect("report:2026-03", lambda: (Path(__file__).parent / "sent.txt").open("a").write("x\\n"))


app.schedule("hourly-report", "0 * * * *", tz="Europe/Paris", task="report")
'''

# Runs one CLI command in this process and reports which oncebeat modules it loaded.
RUN_AND_REPORT = '''
import json, sys
from oncebeat.cli import main
sys.argv = ["oncebeat", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "reminders_loaded": sorted(m for m in sys.modules if m.startswith("oncebeat.reminders"))}))
'''


def _cli(tmp_path: Path, *args: str) -> tuple[dict[str, object], str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}"}
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, *args], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=300)
    *output, last = done.stdout.strip().splitlines()
    return json.loads(last), "\n".join(output) + done.stderr


def test_a_library_app_migrates_and_runs_with_engine_tables_only(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "libapp.py").write_text(LIBAPP, encoding="utf-8")
    report, out = _cli(tmp_path, "migrate", "--app", "libapp:app", "--db", db_url)
    assert report == {"code": 0, "reminders_loaded": []}, out
    assert "applied engine 0001" in out and "reminders" not in out
    outputs = []
    for command in (["tick"], ["trigger", "hourly-report"], ["trigger", "hourly-report"], ["worker", "--burst"],
                    ["schedules"]):
        report, out = _cli(tmp_path, *command, "--app", "libapp:app", "--db", db_url)
        assert report == {"code": 0, "reminders_loaded": []}, (command, out)
        outputs.append(out)
    assert "burst done: 2 completed" in outputs[3]
    # two runs asking for the same effect key: it happened once (the effect ledger's answer)
    assert (tmp_path / "sent.txt").read_text() == "x\n"
    assert "hourly-report: 0 * * * * in Europe/Paris -> report" in outputs[4]
    with open_store(db_url) as store:
        assert set(store.table_columns()) == ENGINE_TABLES
        assert store.schema_versions().keys() == {"engine"}


def test_the_reminder_app_is_the_default_and_adds_its_own_line(tmp_path: Path, db_url: str) -> None:
    report, out = _cli(tmp_path, "migrate", "--db", db_url)
    assert report["code"] == 0, out
    assert "reminders 0001" in out
    with open_store(db_url) as store:
        assert {"customers", "invoices", "reminders", "stripe_events"} <= set(store.table_columns())
        assert store.schema_versions().keys() == {"engine", "reminders"}


ENGINE_CHECKS = ["multiple-clocks", "clock-restart", "leftover-trigger", "retry-side-effect", "in-doubt",
                 "effect-conflict", "duplicate-delivery", "lost", "timezone", "clock-skew", "discarded"]


def test_a_library_apps_doctor_runs_the_engines_checks_alone(tmp_path: Path, db_url: str) -> None:
    """The doctor's core knows no invoice: on an engine-only database, without the reminder app loaded,
    it runs cleanly and its report names the engine's checks only."""
    (tmp_path / "libapp.py").write_text(LIBAPP, encoding="utf-8")
    for command in (["migrate"], ["tick"], ["trigger", "hourly-report"], ["worker", "--burst"]):
        report, out = _cli(tmp_path, *command, "--app", "libapp:app", "--db", db_url)
        assert report == {"code": 0, "reminders_loaded": []}, (command, out)
    report, out = _cli(tmp_path, "doctor", "--json", "--app", "libapp:app", "--db", db_url)
    assert report == {"code": 0, "reminders_loaded": []}, out
    data = json.loads(out[: out.rindex("}") + 1])
    assert [c["code"] for c in data["checks"]] == ENGINE_CHECKS
    assert set(data["scope"]) == {"since", "schedule", "maildir"}
    assert data["exit_code"] == 0 and data["counts"]["error"] == 0, out
    assert all(c["ran"] for c in data["checks"] if c["code"] not in ("duplicate-delivery", "clock-skew")), out
    leftover = [f for f in data["findings"] if f["code"] == "leftover-trigger"]
    assert leftover and "hourly-report" in leftover[0]["summary"], "the manual trigger is seen: the checks really ran"
    assert "invoice" not in out.lower() and "reminder" not in out.lower()

    report, out = _cli(tmp_path, "doctor", "--explain", "job", "1", "--app", "libapp:app", "--db", db_url)
    assert report == {"code": 0, "reminders_loaded": []}, out
    assert out.startswith("job 1 (report) in queue default: completed"), out
    report, out = _cli(tmp_path, "doctor", "--explain", "invoice", "INV-1", "--app", "libapp:app", "--db", db_url)
    assert report["code"] == 2 and report["reminders_loaded"] == [], out
    assert "use occurrence or job" in out
    report, out = _cli(tmp_path, "doctor", "--invoice", "INV-1", "--app", "libapp:app", "--db", db_url)
    assert report["code"] == 2 and report["reminders_loaded"] == [], out
    assert "doctor --invoice: no such scope" in out and "Traceback" not in out


# What the `oncebeat` console script does: its own folder, not the current one, is on sys.path.
AS_CONSOLE_SCRIPT = '''
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
from oncebeat.cli import main
sys.argv = ["oncebeat", *sys.argv[1:]]
main()
'''


def test_app_finds_a_module_in_the_current_folder_as_celery_a_does(tmp_path: Path) -> None:
    (tmp_path / "libapp.py").write_text(LIBAPP, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", AS_CONSOLE_SCRIPT, "migrate", "--app", "libapp:app", "--db",
                           f"sqlite:///{tmp_path}/app.db"], cwd=tmp_path, env=env, text=True, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied engine 0001" in done.stdout + done.stderr


LEFT_OPEN = '''
import sys
from oncebeat import App, Queue, SystemClock, current_source, open_store
app = App()
@app.task()
def noop(ctx) -> None:
    pass
store = open_store(sys.argv[1])  # never closed: the interpreter's exit must not wait on the pool's threads
store.migrate()
Queue(store, clock=SystemClock(), source=current_source("api"), app=app).enqueue("noop", {})
print("enqueued")
'''


def test_a_script_that_never_closes_its_store_exits_without_waiting(tmp_path: Path, pg_db_url: str) -> None:
    """A five-line library script on PostgreSQL took 20 s to exit, with four "couldn't stop thread" warnings:
    the pool's threads were waited for during finalisation, when they can no longer run."""
    (tmp_path / "script.py").write_text(LEFT_OPEN, encoding="utf-8")
    done = subprocess.run([sys.executable, "script.py", pg_db_url], cwd=tmp_path, text=True, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=15)  # 15 s: a hang guard only
    assert done.returncode == 0 and done.stdout.strip() == "enqueued", done.stderr
    assert done.stderr == "", done.stderr
