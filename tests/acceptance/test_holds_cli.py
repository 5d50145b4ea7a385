"""`oncebeat hold`, `release` and `holds` as a user runs them: real subprocesses, both backends; audited with
the operator."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import oncebeat

from oncebeat.audit import events_of
from oncebeat.store import open_store

CSV = """invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on
INV-1,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31
INV-2,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31
"""


def test_hold_release_and_list_from_the_command_line(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "invoices.csv").write_text(CSV, encoding="utf-8")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    placed = oncebeat("hold", "--invoice", "INV-1", "--reason", "promise", "--until", "2099-02-10",
                      "--note", "called on Monday", "--db", db_url, "--json", cwd=tmp_path)
    assert placed.returncode == 0, placed.stderr
    hold = json.loads(placed.stdout)
    assert (hold["invoice"], hold["reason"], hold["promise_until"], hold["resumes_on"]) == (
        "INV-1", "promise", "2099-02-10", "2099-02-11")
    assert hold["created_by"].startswith("cli")
    second = oncebeat("hold", "--customer", "ana@example.com", "--reason", "dispute", "--db", db_url, cwd=tmp_path)
    assert second.returncode == 0 and "placed on customer ana@example.com: dispute, until released" in second.stdout

    listed = oncebeat("holds", "--db", db_url, "--json", cwd=tmp_path)
    assert [h["reason"] for h in json.loads(listed.stdout)] == ["promise", "dispute"]
    text = oncebeat("holds", "--db", db_url, cwd=tmp_path).stdout
    assert "invoice INV-1  promise until 2099-02-10" in text and "called on Monday" in text

    released = oncebeat("release", "--customer", "ana@example.com", "--note", "resolved", "--db", db_url,
                        cwd=tmp_path)
    assert released.returncode == 0 and "released; reminders resume on" in released.stdout
    by_id = oncebeat("release", str(hold["id"]), "--db", db_url, cwd=tmp_path)
    assert by_id.returncode == 0 and f"hold {hold['id']} on invoice INV-1 released" in by_id.stdout
    again = oncebeat("release", str(hold["id"]), "--db", db_url, cwd=tmp_path)
    assert "nothing to release" in again.stdout
    active = json.loads(oncebeat("holds", "--active", "--db", db_url, "--json", cwd=tmp_path).stdout)
    # released today: they still cover today, the ladder resumes tomorrow
    assert [(h["released_at"] is not None, h["released_by"].startswith("cli")) for h in active] == [(True, True)] * 2
    assert len({h["resumes_on"] for h in active}) == 1

    with open_store(db_url) as store:
        events = events_of(store, f"hold:{hold['id']}")
    kinds = sorted(e["kind"] for e in events)
    assert kinds == ["reminders.hold_placed", "reminders.hold_released"]
    detail = events[0]["detail"]
    detail = json.loads(detail) if isinstance(detail, str) else detail
    assert detail["operator"]["via"] == "cli"


def test_bad_hold_requests_are_refused_with_the_fix_and_no_traceback(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "invoices.csv").write_text(CSV, encoding="utf-8")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    cases = [
        (("hold", "--invoice", "NOPE", "--reason", "manual"), "no invoice 'NOPE'"),
        (("hold", "--invoice", "INV-1", "--reason", "promise"), "--until YYYY-MM-DD"),
        (("hold", "--invoice", "INV-1", "--reason", "manual", "--until", "2099-01-01"), "--until is for a promise"),
        (("hold", "--invoice", "INV-1", "--reason", "promise", "--until", "2099-13-01"), "not a date YYYY-MM-DD"),
        (("hold", "--reason", "manual"), "give exactly one"),
        (("hold", "--invoice", "INV-1", "--reason", "later"), "'later' is not one of"),
        (("release",), "release what?"),
        (("release", "999"), "no hold 999"),
    ]
    for args, message in cases:
        result = oncebeat(*args, "--db", db_url, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert json.loads(oncebeat("holds", "--db", db_url, "--json", cwd=tmp_path).stdout) == []
