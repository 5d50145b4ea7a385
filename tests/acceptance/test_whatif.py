"""`oncebeat preview --policy new.toml`: a policy change tried on a copy of the real book (issue 23 item 6).

The live book is built through the real reminder app (a scan and a send on 2026-03-02 through a real SMTP sink),
on both backends; the what-if then runs from 2026-03-03 for 30 days. Every expected number below is worked out by
hand in the comments from the fixture's due dates (schedule 08:00 America/Chicago, collapse "next").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink
from test_cli import oncebeat

from oncebeat.provenance import current_source
from oncebeat.reminders.holds import place_hold
from oncebeat.reminders.model import Customer, Payment
from oncebeat.reminders.policy import Policy
from oncebeat.simulate.whatif import WhatIfReport, run_whatif
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

START = date(2026, 3, 3)  # window 03-03 .. 04-02 (Chicago); US DST starts 2026-03-08, EU 2026-03-29
CURRENT = Policy()  # stages [1, 7, 14, 30]
PROPOSED = Policy(stages=(3, 10, 30))
CUSTOMERS = (Customer(email="ana@example.com", name="Ana", locale="en_US", tz="America/Chicago"),
             Customer(email="bob@example.com", name="Bob", locale="en_US", tz="America/Chicago"),
             Customer(email="eve@example.com", name="Eve", locale="de_DE", tz="Europe/Berlin"))
TABLES = ("customers", "invoices", "reminder_holds", "reminders", "jobs", "effects", "occurrences", "schedules")


def build_book(store: Store, tmp_path: Path) -> None:
    """The live book on 2026-03-02 after its 08:00 scan:

    - A (ana) due 03-02: not yet reminded.          - B (bob) due 03-01: stage 1 sent 03-02 (in dunning).
    - C (ana) due 03-02, paid on 03-04 (known now).  - D (ana) due 03-02, held (dispute).
    - E (eve, Berlin) due 03-02.
    """
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)), policy=CURRENT)
    try:
        h.add_invoices(invoice("A", date(2026, 3, 2)), invoice("B", date(2026, 3, 1), email="bob@example.com"),
                       invoice("C", date(2026, 3, 2)), invoice("D", date(2026, 3, 2)),
                       invoice("E", date(2026, 3, 2), email="eve@example.com"), customers=CUSTOMERS)
        place_hold(store, clock=h.clock, zone=CURRENT.zone, source=current_source("cli"), reason="dispute",
                   invoice="D", note="amount disputed")
        h.tick_to(FIRST_FIRE)
        h.new_worker().drain()
        h.service.apply_payments([Payment(number="C", paid_on=date(2026, 3, 4))])  # a payment known ahead
        assert [(r["number"], r["stage"], r["state"]) for r in h.reminders()] == [("B", 1, "sent")]
    finally:
        h.close()
        sink.stop()


def fingerprint(store: Store) -> dict[str, tuple[int, str]]:
    """Rows and a checksum (order-independent) of every table the what-if could touch."""
    out = {}
    with store.transaction() as tx:
        for table in TABLES:
            rows = tx.execute(f"SELECT * FROM {table}")  # noqa: S608 - fixed names above
            digest = hashlib.sha256(repr(sorted(repr(sorted((k, str(v)) for k, v in r.items())) for r in rows))
                                    .encode())
            out[table] = (len(rows), digest.hexdigest())
    return out


@pytest.fixture
def book(store: Store, tmp_path: Path) -> Iterator[Store]:
    build_book(store, tmp_path)
    yield store


def whatif(store: Store, proposed: Policy = PROPOSED, **kw: Any) -> WhatIfReport:
    """The what-if of the edit applied to open invoices too (B, in dunning, moves to the proposed stages); the
    pinned case without the apply: test_an_invoice_in_dunning_keeps_its_pinned_ladder_unless_the_edit_is_applied."""
    return run_whatif(store, current=CURRENT, proposed=proposed, start=START, days=30, **{"apply_to_open": True, **kw})


def test_a_whatif_leaves_the_live_database_exactly_as_it_was(book: Store) -> None:
    before = fingerprint(book)
    assert before["reminders"][0] == 1 and before["jobs"][0] >= 2  # a scan and a send: there is history to keep
    whatif(book)
    assert fingerprint(book) == before


def test_a_stage_change_shows_each_moved_stage(book: Store) -> None:
    r = whatif(book)
    # A, E due 03-02: current 1@03-03 7@03-09 14@03-16 30@04-01; proposed 3@03-05 10@03-12 30@04-01.
    # B (stage 1 sent 03-02): current 7@03-08 14@03-15 30@03-31; proposed 3@03-04 10@03-11 30@03-31.
    # C paid 03-04: current 1@03-03 only; proposed nothing (stage 3 would be 03-05).
    assert {k: dict(v) for k, v in r.moves.items()} == {
        (1, 3): {"later": 2}, (7, 10): {"later": 2}, (14, 30): {"later": 2},
        (7, 3): {"earlier": 1}, (14, 10): {"earlier": 1}, (30, 30): {"same day": 1}}
    assert r.shift_days == {(1, 3): 4, (7, 10): 6, (14, 30): 32, (7, 3): -4, (14, 10): -4, (30, 30): 0}
    assert dict(r.dropped) == {1: 1, 30: 2} and not r.added
    # D is held under both (current: stages 1, 7, 14, 30; proposed: 3, 10, 30)
    assert r.runs["current"].states["held"] == 4 and r.runs["proposed"].states["held"] == 3
    assert r.runs["current"].reasons == {("held", "held: dispute (hold #)"): 4}  # generic: state and reason
    # every invoice changes; of those in dunning before the start only B
    assert r.changed_invoices == 5 and r.affected_count == 1
    assert [a["number"] for a in r.affected] == ["B"]
    assert r.affected[0]["current"].startswith("stage 7 sent 2026-03-08")
    assert r.affected[0]["proposed"].startswith("stage 3 sent 2026-03-04")


def test_notices_per_customer_week_and_dst_hits(book: Store) -> None:
    r = whatif(book)
    cur, new = r.runs["current"], r.runs["proposed"]
    assert (cur.notices, new.notices) == (12, 9)  # A4 B3 C1 E4 / A3 B3 E3
    # ana's week 0 (03-03..03-09): A1, C1, A7 under the current ladder; nobody gets two a week under the proposal
    assert max(cur.weekly.values()) == 3 and max(new.weekly.values()) == 1
    assert cur.week_distribution() == {1: 7, 2: 1, 3: 1} and new.week_distribution() == {1: 9}
    # B's stage 7 goes out on 03-08, the day Chicago moves to CDT; nothing of the proposal does
    assert (cur.dst_change_day, new.dst_change_day) == (1, 0)
    # Berlin is 7 h ahead of Chicago at the start, 6 h between 03-08 and 03-29: E's 7 and 14 / E's 10
    assert (cur.dst_shifted, new.dst_shifted) == (2, 1)


def test_a_stricter_policy_shows_fewer_notices(book: Store) -> None:
    r = whatif(book, proposed=Policy(stages=(14, 30)))
    assert r.runs["proposed"].notices < r.runs["current"].notices
    assert r.runs["proposed"].notices == 6  # A 14@03-16 30@04-01, B 14@03-15 30@03-31, E 14@03-16 30@04-01
    assert max(r.runs["proposed"].weekly.values()) < max(r.runs["current"].weekly.values())


def test_the_same_book_and_policy_show_no_difference(book: Store) -> None:
    r = whatif(book, proposed=CURRENT)
    assert r.changed_invoices == 0 and not r.dropped and not r.added
    assert all(set(kinds) == {"same day"} for kinds in r.moves.values())
    assert r.runs["current"].as_dict() == r.runs["proposed"].as_dict()


def test_a_start_before_the_books_last_reminder_is_refused(book: Store) -> None:
    from oncebeat.errors import OncebeatError

    with pytest.raises(OncebeatError, match=r"reminders up to 2026-03-02.*start on 2026-03-02 or later"):
        run_whatif(book, current=CURRENT, proposed=PROPOSED, start=date(2026, 3, 1), days=5)


def test_the_cli_prints_the_difference_and_json(tmp_path: Path, book: Store, db_url: str) -> None:
    (tmp_path / "new.toml").write_text("[reminders]\nstages = [3, 10, 30]\n", encoding="utf-8")
    text = oncebeat("preview", "--policy", "new.toml", "--days", "30", "--start", "2026-03-03", "--apply-to-open",
                    "--db", db_url, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "what-if: 30 days from 2026-03-03 to 2026-04-02 (America/Chicago)" in text.stdout
    assert "stage 1 -> stage 3: 2 later (mean +2.0 days)" in text.stdout
    assert "B (bob@example.com): current stage 7 sent 2026-03-08" in text.stdout
    out = oncebeat("preview", "--policy", "new.toml", "--days", "30", "--start", "2026-03-03", "--apply-to-open",
                   "--db", db_url, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["runs"]["current"]["notices"] == 12 and data["runs"]["proposed"]["notices"] == 9
    assert data["in_dunning_affected"]["count"] == 1
    assert data["runs"]["current"]["notices_per_customer_week"]["max"] == 3


def test_an_invoice_in_dunning_keeps_its_pinned_ladder_unless_the_edit_is_applied(book: Store) -> None:
    """Issue 23 item 2: the copy keeps each invoice's pin (B, stage 1 sent 03-02, is pinned to default v1 with
    stages [1, 7, 14, 30]); the proposed edit of the default ladder changes only invoices not in dunning yet."""
    pinned = whatif(book, apply_to_open=False)
    assert pinned.copied.pinned == 1 and pinned.copied.ladder_versions == 1 and not pinned.applied_to_open
    assert pinned.affected_count == 0 and pinned.affected == []  # B: 7@03-08 14@03-15 30@03-31 under both
    assert pinned.changed_invoices == 4  # A, C, D, E start dunning under the proposal's new version
    assert (pinned.runs["current"].notices, pinned.runs["proposed"].notices) == (12, 9 - 3 + 3)  # B's 3 alike
    assert "1 invoices already in dunning keep the ladder version they are pinned to" in pinned.to_text()
    applied = whatif(book)
    assert applied.applied_to_open == {"default": 1} and applied.affected_count == 1
    assert "--apply-to-open: the proposal moves open invoices to its ladders' settings (default: 1)" \
        in applied.to_text()


def test_a_bad_proposed_policy_is_a_clear_error_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "new.toml").write_text("[reminders]\nstages = [3, 10, 10]\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'none.db'}"
    result = oncebeat("preview", "--policy", "new.toml", "--db", db, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "new.toml:2: [reminders] stages[2] = 10 repeats stage 10" in result.stderr  # file, line, field, fix
    assert not (tmp_path / "none.db").exists()  # the live database was not even opened
    (tmp_path / "syntax.toml").write_text("[schedule]\ntz = America/Chicago\n", encoding="utf-8")
    result = oncebeat("preview", "--policy", "syntax.toml", "--db", db, cwd=tmp_path)
    assert result.returncode == 2 and "syntax.toml:2:" in result.stderr and "Traceback" not in result.stderr


def test_preview_without_policy_keeps_its_dry_run_and_refuses_start(tmp_path: Path, book: Store, db_url: str) -> None:
    plain = oncebeat("preview", "--db", db_url, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("scan on ") and "what-if" not in plain.stdout
    stray = oncebeat("preview", "--start", "2026-03-03", "--db", db_url, cwd=tmp_path)
    assert stray.returncode == 2 and "--start goes with --policy" in stray.stderr


def test_each_problem_of_a_bad_proposed_policy_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "new.toml").write_text('[schedule]\ntz = "Europe/Berln"\n[reminders]\n\nstages = [3, 10, 10]\n'
                                       'collapse = "x"\n', encoding="utf-8")
    result = oncebeat("preview", "--policy", "new.toml", "--db", f"sqlite:///{tmp_path / 'none.db'}", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "new.toml: 3 problems:" in result.stderr
    assert '- line 2: [schedule] tz = "Europe/Berln" is not a known IANA time zone. Did you mean "Europe/Berlin"' \
        in result.stderr
    assert "- line 5: [reminders] stages[2] = 10 repeats stage 10" in result.stderr
    assert '- line 6: [reminders] collapse = "x" is not a collapse mode' in result.stderr


def test_the_readme_whatif_on_the_demo_book_is_what_it_prints(tmp_path: Path) -> None:
    """README's what-if output is reproduced by the commands above it (the demo book is seeded)."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### What-if: try a policy change on your own book first", 1)[1]
    commands = re.search(r"On the demo book.*?```sh\n(.*?)```\n\n```text\n(.*?)```", section, re.S)
    assert commands, "README lost its what-if example"
    demo = oncebeat("demo", "--days", "20", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    (tmp_path / "oncebeat.toml").write_text('[reminders]\nstages = [1, 7, 14, 30]\nsend_zone = "customer"\n',
                                            encoding="utf-8")
    (tmp_path / "new.toml").write_text('[reminders]\nstages = [3, 10, 30]\nsend_zone = "customer"\n', encoding="utf-8")
    assert "printf" in commands[1] and "stages = [3, 10, 30]" in commands[1]
    run = commands[1].strip().splitlines()[-1].split()
    assert run[0] == "oncebeat"
    result = oncebeat(*run[1:], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("wall time")).strip()
    assert printed == commands[2].strip()


def test_a_start_or_an_as_of_past_the_calendar_is_refused_without_a_traceback() -> None:
    from click.testing import CliRunner

    from oncebeat.cli import cli

    for args in (["preview", "--policy", "new.toml", "--start", "9999-12-31"], ["report", "--as-of", "0001-01-01"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2 and "outside the years 1900 to 2999" in result.output, result.output
        assert "Traceback" not in result.output


def test_a_dst_hit_in_the_customers_zone_is_a_send_time_the_change_skips_or_repeats() -> None:
    """A send at another local time for another cause (the first scan's catch-up, a retry) is no DST hit."""
    from datetime import UTC, datetime

    from oncebeat.simulate.whatif import _Calendars

    cal = _Calendars("America/Chicago", datetime(2026, 3, 1, tzinfo=UTC))
    at_0230 = Policy(send_zone="customer", send_at="02:30", schedule="*/15 * * * *")
    at_0800 = Policy(send_zone="customer", send_at="08:00", schedule="*/15 * * * *")
    catch_up = datetime(2026, 3, 3, 6, 0, tzinfo=UTC)  # 15:00 in Tokyo, whose zone has no DST
    assert not cal.shifted("Asia/Tokyo", catch_up, at_0800)
    spring = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)  # Chicago skips 02:00-03:00 on 2026-03-08
    assert cal.shifted("America/Chicago", spring, at_0230) and not cal.shifted("America/Chicago", spring, at_0800)
    autumn = datetime(2026, 11, 1, 7, 0, tzinfo=UTC)  # 01:00-02:00 happens twice on 2026-11-01
    assert cal.shifted("America/Chicago", autumn, Policy(send_zone="customer", send_at="01:30",
                                                         schedule="*/15 * * * *"))
