"""`oncebeat report` as a user runs it: real subprocesses on the hand-computed book (tests/reports_book.py), both
backends; text, CSV and JSON agree with tests/acceptance/test_reports.py's arithmetic, and bad input is named."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from test_cli import oncebeat

from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import load_runtime
from reports_book import seed


def _book(db_url: str, tmp_path: Path) -> None:
    write_default_config(tmp_path / "oncebeat.toml")
    rt = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        seed(rt.service, rt.store)
    finally:
        rt.close()


def test_report_prints_text_csv_and_json_from_the_command_line(tmp_path: Path, db_url: str) -> None:
    _book(db_url, tmp_path)
    common = ("--db", db_url, "--as-of", "2026-04-10", "--from", "2026-01", "--to", "2026-04")
    text = oncebeat("report", "dso", "--currency", "EUR", *common, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    # 155/7 = 22.1, 227/7 = 32.4, 391/9 = 43.4 days; April is not over on 04-10.
    assert "collection reports 2026-01 to 2026-04, as of 2026-04-10" in text.stdout
    for line in ("EUR       2026-01  €2,500.00  €3,500.00  22.1", "EUR       2026-02  €5,000.00  €4,500.00  32.4",
                 "EUR       2026-03  €4,000.00  €2,000.00  43.4",
                 "EUR       2026-04  n/a  n/a  n/a  month not over on 2026-04-10"):
        assert " ".join(line.split()) in {" ".join(x.split()) for x in text.stdout.splitlines()}, text.stdout

    cei = oncebeat("report", "--kind", "cei", "--csv", *common, cwd=tmp_path)
    assert cei.returncode == 0, cei.stderr
    rows = {(r["currency"], r["month"]): r for r in csv.DictReader(io.StringIO(cei.stdout))}
    assert [rows["EUR", m]["cei"] for m in ("2026-01", "2026-02", "2026-03")] == ["100.0", "80.0", "60.0"]
    assert rows["EUR", "2026-04"]["cei"] == "" and rows["EUR", "2026-04"]["note"] == "month not over on 2026-04-10"
    # JPY amounts have no minor unit; January's CEI has nothing to divide by.
    assert (rows["JPY", "2026-01"]["credit_sales"], rows["JPY", "2026-01"]["note"]) == (
        "7000", "nothing was due to collect")

    data = json.loads(oncebeat("report", "holds", "--json", *common, cwd=tmp_path).stdout)
    promises, disputes = data["reports"]
    outcomes = [(r["currency"], r["month"], r["kept"], r["broken"], r["pending"], r["unknown"])
                for r in promises["rows"]]
    assert outcomes == [
        ("EUR", "2026-03", 0, 1, 0, 0), ("EUR", "2026-04", 1, 0, 0, 0), ("JPY", "2026-03", 0, 0, 0, 1),
        ("USD", "2026-03", 0, 1, 0, 0), ("USD", "2026-04", 0, 0, 1, 0)]
    assert [(r["month"], r["amount"]) for r in disputes["rows"]] == [("2026-02", 50000), ("2026-03", 1200000)]

    stages = json.loads(oncebeat("report", "stages", "--json", *common, cwd=tmp_path).stdout)["reports"][0]["rows"]
    assert stages[0] == {"stage": 1, "group": "reminded", "unpaid": 5, "undated": 0, "paid_3d": 0.4, "of_3d": 5,
                         "paid_7d": 0.6, "of_7d": 5, "paid_14d": 0.5, "of_14d": 4}
    assert (stages[1]["group"], stages[1]["unpaid"], stages[1]["undated"], stages[1]["paid_14d"]) == (
        "baseline", 5, 1, 0.5)

    everything = oncebeat("report", *common, cwd=tmp_path)
    assert everything.returncode == 0 and all(title in everything.stdout for title in (
        "Days sales outstanding", "Collection effectiveness index", "Stage effectiveness", "Open invoices by",
        "Promises to pay", "Disputes"))


def test_report_names_bad_input_without_a_traceback(tmp_path: Path, db_url: str) -> None:
    _book(db_url, tmp_path)
    for args, message in (
        (("dso", "--from", "2026-13"), "--from: '2026-13' is not a month; write it as YYYY-MM"),
        (("dso", "--from", "2026-04", "--to", "2026-01"), "--from 2026-04 is after --to 2026-01"),
        (("dso", "--currency", "euro"), "--currency: 'euro' is not an ISO 4217 code"),
        (("all", "--csv"), "--csv writes one table"),
        (("dso", "--csv", "--json"), "--csv and --json: choose one"),
        (("dso", "--kind", "cei"), "give the report once"),
        (("dso", "--from", "0001-01", "--to", "2026-01"), "spans more than 600 months"),
    ):
        out = oncebeat("report", *args, "--db", db_url, cwd=tmp_path)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
