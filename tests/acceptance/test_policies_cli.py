"""`oncebeat policies` and `oncebeat policies apply` as an operator runs them: real subprocesses, both backends."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

from test_cli import oncebeat

from oncebeat import audit
from oncebeat.provenance import current_source
from oncebeat.reminders.policy import load_policy
from oncebeat.reminders.service import ReminderService
from oncebeat.store import open_store
from oncebeat.timebase import SimulatedClock

TOML = """[reminders]
stages = [1, 7, 14, 30]

[[ladders]]
name = "eur"
match = { currency = "EUR", amount_min = 1000 }
stages = [3, 10]
spacing = "nominal"
"""
CSV = """invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on
INV-1,ana@example.com,Ana,USD,10.00,2026-01-01,2026-01-31
INV-2,bob@example.com,Bob,EUR,20.00,2026-01-01,2026-01-31
INV-3,bob@example.com,Bob,EUR,5.00,2026-01-01,2026-01-31
"""


def _scan(tmp_path: Path, db_url: str, day: date) -> None:
    with open_store(db_url) as store:
        service = ReminderService(store, load_policy(tmp_path / "oncebeat.toml"),
                                  clock=SimulatedClock(datetime.combine(day, datetime.min.time(), tzinfo=UTC)))
        service.scan(occurrence_id=day.toordinal(), business_date=day, source=current_source("clock"))


def test_policies_lists_ladders_and_apply_moves_open_invoices_only_when_asked(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "oncebeat.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "invoices.csv").write_text(CSV, encoding="utf-8")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    _scan(tmp_path, db_url, date(2026, 2, 4))
    listed = oncebeat("policies", "--db", db_url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "eur: currency EUR, amount >= 1000\n  stages [3, 10], collapse next, spacing nominal" in listed.stdout
    assert "version 1: 1 open invoice(s), 1 in all  (current)" in listed.stdout
    assert "default: everything else" in listed.stdout and "version 1: 2 open invoice(s)" in listed.stdout
    pinned = oncebeat("policies", "--ladder", "eur", "--db", db_url, cwd=tmp_path).stdout
    assert pinned.splitlines() == ["INV-2  version 1  open  due 2026-01-31", "1 invoice(s) on ladder eur"]

    (tmp_path / "oncebeat.toml").write_text(TOML.replace("[3, 10]", "[3, 5, 12]"), encoding="utf-8")
    edited = oncebeat("policies", "--db", db_url, cwd=tmp_path).stdout
    assert "the file's settings are not recorded yet: the next scan records version 2" in edited
    dry = oncebeat("policies", "apply", "--ladder", "eur", "--db", db_url, cwd=tmp_path)
    assert dry.returncode == 0
    assert "1 open invoice(s) of ladder eur are on an older version; nothing moved" in dry.stdout
    assert "version 1: 1 open invoice(s)" in oncebeat("policies", "--db", db_url, cwd=tmp_path).stdout
    done = oncebeat("policies", "apply", "--ladder", "eur", "--apply-to-open", "--db", db_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ladder eur: 1 open invoice(s) moved to version 2 (from version 1: 1)" in done.stdout
    as_json = json.loads(oncebeat("policies", "--json", "--db", db_url, cwd=tmp_path).stdout)
    eur = next(x for x in as_json["ladders"] if x["name"] == "eur")
    assert [(v["version"], v["open_invoices"], v["current"]) for v in eur["versions"]] == [(1, 0, False), (2, 1, True)]
    with open_store(db_url) as store:
        (applied,) = audit.list_events(store, since=datetime(2000, 1, 1, tzinfo=UTC), kind="ladders.applied")
    assert applied["detail"]["invoices"] == ["INV-2"] and "operator" in applied["detail"]
    _scan(tmp_path, db_url, date(2026, 2, 5))  # version 2's stage 5, on its nominal date
    with open_store(db_url) as store:
        stages = sorted(int(r["stage"]) for r in store.read("list_reminders") if r["number"] == "INV-2")
    assert stages == [3, 5]


def test_a_bad_ladder_or_an_unknown_name_is_a_clear_error(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "oncebeat.toml").write_text(TOML, encoding="utf-8")
    unknown = oncebeat("policies", "apply", "--ladder", "vip", "--apply-to-open", "--db", db_url, cwd=tmp_path)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "no ladder named 'vip' in the policy file; ladders: eur, default" in unknown.stderr
    (tmp_path / "oncebeat.toml").write_text(TOML.replace('currency = "EUR"', 'currency = "EURO"'), encoding="utf-8")
    bad = oncebeat("policies", "--db", db_url, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    line = TOML.splitlines().index('match = { currency = "EUR", amount_min = 1000 }') + 1
    assert f'oncebeat.toml: line {line}: [[ladders]][1] (eur) match.currency = "EURO" must be ISO 4217 codes' \
        in bad.stderr


def test_policies_apply_needs_a_ladder_name(tmp_path: Path) -> None:
    result = oncebeat("policies", "apply", "--apply-to-open", cwd=tmp_path)
    assert result.returncode == 2 and "--ladder" in result.stderr
