"""A business calendar and a per-customer cap per ladder (issue 23 item 2), on both backends.

A ``[[ladders]]`` table's own ``calendar = {...}`` and ``max_notices_per_week`` decide the stage dates, the cap and
the hold's resume day of the invoices pinned to it; a ladder without them follows ``[calendar]`` and
``[reminders] max_notices_per_week``. The cap counts a customer's notices over every ladder with the limit of the
ladder of the notice being placed. A ladder that names neither keeps its content hash (no new version).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink
from test_cli import oncebeat

from oncebeat.errors import ConfigError
from oncebeat.provenance import current_source
from oncebeat.reminders.calendar import calendar_config
from oncebeat.reminders.holds import place_hold, release_holds
from oncebeat.reminders.ladder_calendars import describe_days
from oncebeat.reminders.ladders import LadderSettings, ladder_defs, ladders_of
from oncebeat.reminders.model import Customer
from oncebeat.reminders.pinning import holdings
from oncebeat.reminders.policy import Policy, load_policy
from oncebeat.reminders.service import ReminderService
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

SCAN = current_source("clock")
US = calendar_config({"country": "US"}, source="test")
# Friday 1 May 2026: Labour Day in Germany, a working day in the US; then a weekend: Monday 4 May for Bavaria.
LABOUR_DAY = date(2026, 5, 1)
DUE = LABOUR_DAY - timedelta(days=1)


def _eur_ladder(**own: Any) -> dict[str, Any]:
    return {"name": "eur", "match": {"currency": "EUR"}, **own}


def _policy(**own: Any) -> Policy:
    return Policy(stages=(1, 7), calendar=US, ladders=ladder_defs([_eur_ladder(**own)]))


class Scans:
    """Direct daily scans of one store (15:00 UTC) under one policy."""

    def __init__(self, store: Store, policy: Policy) -> None:
        self.store = store
        self.clock = SimulatedClock(datetime.combine(DUE - timedelta(days=7), datetime.min.time(), tzinfo=UTC))
        self.service = ReminderService(store, policy, clock=self.clock)
        self.occurrence = 0

    def run(self, first: date, last: date) -> None:
        day = first
        while day <= last:
            self.occurrence += 1
            self.clock.set(datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=15))
            self.service.scan(occurrence_id=self.occurrence, business_date=day, source=SCAN)
            day += timedelta(days=1)

    def dates(self) -> dict[tuple[str, int], date]:
        return {(r["number"], int(r["stage"])): r["business_date"] for r in self.store.read("list_reminders")}


@pytest.mark.parametrize(("stage_days", "eur_stage_7"), [("calendar", date(2026, 5, 11)),
                                                         ("business", date(2026, 5, 12))])
def test_a_german_ladder_skips_a_german_holiday_that_the_us_default_ladder_sends_on(
        store: Store, stage_days: str, eur_stage_7: date) -> None:
    scans = Scans(store, _policy(calendar={"country": "DE", "subdivision": "BY", "stage_days": stage_days}))
    scans.service.upsert([Customer(email="ana@example.com", name="Ana")],
                         [invoice("US-1", DUE), invoice("EU-1", DUE, currency="EUR")])
    assert [r["number"] for r in scans.service.preview(LABOUR_DAY)] == ["US-1"]  # EUR: nothing on a holiday
    scans.run(DUE, date(2026, 5, 14))
    got = scans.dates()
    assert got[("US-1", 1)] == LABOUR_DAY
    assert got[("EU-1", 1)] == date(2026, 5, 4)  # after Labour Day and the weekend
    # calendar days: 6 days after stage 1 went out (Sunday 10 May), so Monday; business days: the 7th business
    # day after the due date in Bavaria (Labour Day not counted)
    assert got[("US-1", 7)] == date(2026, 5, 7) and got[("EU-1", 7)] == eur_stage_7
    story = scans.service.invoice_story("EU-1")
    assert story is not None
    moved = story["reminders"][0]["moved"]
    if stage_days == "calendar":  # the ladder's calendar explains the move, not the policy's (US) one
        assert moved == "nominal 2026-05-01 (Labor Day (DE-BY)), sent on the next business day"
    else:  # stage 1 IS the first business day after the due date: not moved
        assert moved is None
    assert scans.service.invoice_story("US-1")["reminders"][0]["moved"] is None  # type: ignore[index]


def test_a_promise_on_an_invoice_of_the_german_ladder_resumes_on_its_next_business_day(store: Store) -> None:
    scans = Scans(store, _policy(calendar={"country": "DE", "subdivision": "BY"}))
    scans.service.upsert([Customer(email="ana@example.com", name="Ana")],
                         [invoice("US-1", DUE - timedelta(days=3)), invoice("EU-1", DUE - timedelta(days=3),
                                                                            currency="EUR")])
    scans.run(DUE - timedelta(days=2), DUE - timedelta(days=2))  # both pinned, stage 1 created
    until = DUE  # a promise to pay by Thursday 30 April
    held = {n: place_hold(store, clock=scans.clock, zone=scans.service.policy.zone, source=SCAN, reason="promise",
                          invoice=n, until=until, calendar=scans.service.policy.calendar) for n in ("US-1", "EU-1")}
    assert held["US-1"] is not None and held["EU-1"] is not None
    assert held["US-1"].resumes_on == LABOUR_DAY
    assert held["EU-1"].resumes_on == date(2026, 5, 4)
    # a dispute released on Thursday 30 April: by its id, or by the external reference it was placed with
    disputes = {n: place_hold(store, clock=scans.clock, zone=scans.service.policy.zone, source=SCAN, reason="dispute",
                              invoice=n, external_ref=f"ticket-{n}", calendar=scans.service.policy.calendar)
                for n in ("US-1", "EU-1")}
    scans.clock.set(datetime(2026, 4, 30, 15, tzinfo=UTC))
    by_id = release_holds(store, clock=scans.clock, zone=scans.service.policy.zone, source=SCAN,
                          hold_id=disputes["EU-1"].id, calendar=scans.service.policy.calendar)  # type: ignore[union-attr]
    by_ref = release_holds(store, clock=scans.clock, zone=scans.service.policy.zone, source=SCAN,
                           external_ref="ticket-US-1", calendar=scans.service.policy.calendar)
    assert [h.resumes_on for h in by_id] == [date(2026, 5, 4)] and [h.resumes_on for h in by_ref] == [LABOUR_DAY]


@pytest.fixture
def capped(store: Store, tmp_path: Path) -> Iterator[Harness]:
    policy = Policy(stages=(1, 30), max_notices_per_week=3,
                    ladders=ladder_defs([_eur_ladder(max_notices_per_week=1)]))
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=policy)
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def test_a_ladder_cap_of_one_defers_the_second_notice_while_the_default_ladders_cap_is_three(
        capped: Harness) -> None:
    h = capped
    first = FIRST_FIRE.date()  # Monday 2 March 2026, 08:00 America/Chicago
    due = first - timedelta(days=1)
    customers = (Customer(email="ana@example.com", name="Ana"), Customer(email="bob@example.com", name="Bob"))
    h.add_invoices(invoice("EU-1", due, currency="EUR"), invoice("EU-2", due, currency="EUR"),
                   *(invoice(f"US-{n}", due, email="bob@example.com") for n in (1, 2, 3)), customers=customers)
    worker = h.new_worker()
    h.tick_to(FIRST_FIRE + timedelta(minutes=1))
    worker.drain()
    rows = {r["number"]: r for r in h.reminders()}
    assert [rows[f"US-{n}"]["state"] for n in (1, 2, 3)] == ["sent"] * 3  # the default ladder's cap: 3
    eur = sorted((rows["EU-1"]["state"], rows["EU-2"]["state"]))
    assert eur == ["deferred", "sent"]  # the EUR ladder's cap: 1
    late = next(r for r in rows.values() if r["state"] == "deferred")
    # the EUR ladder's limit (1, not the default's 3) in either form the cap writes: over it, or the place held
    # for a reminder waiting longer (which one a worker claims first is its order, not the test's)
    assert "at most 1 per 7 days" in late["cap_reason"] or "of 1 notices" in late["cap_reason"], late["cap_reason"]
    for n in range(1, 9):  # a week later the place is free again
        h.tick_to(FIRST_FIRE + timedelta(days=n, minutes=1))
        worker.drain()
    late = next(r for r in h.reminders() if r["id"] == late["id"])
    assert late["state"] == "sent" and late["capped_at"] is not None
    assert late["sent_at"].date() >= first + timedelta(days=7)
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()
    assert report.invariants["cap-per-customer"].checked == 5  # one check per notice
    assert report.summary["cap_deferred"] == 1


def test_the_checker_fails_a_notice_over_its_ladders_cap(capped: Harness) -> None:
    """The checker judges each notice by its pinned ladder's cap: the same run judged as if the EUR ladder
    allowed 3 passes, but two EUR notices in one week under a cap of 1 fail."""
    h = capped
    due = FIRST_FIRE.date() - timedelta(days=1)
    h.add_invoices(invoice("EU-1", due, currency="EUR"), invoice("EU-2", due, currency="EUR"))
    worker = h.new_worker()
    h.tick_to(FIRST_FIRE + timedelta(minutes=1))
    worker.drain()
    with h.store.transaction() as tx:  # as if the cap had let both through (a broken claim)
        tx.execute("UPDATE reminders SET state = 'sent', sent_at = updated_at, capped_at = NULL, cap_reason = NULL "
                   "WHERE state = 'deferred'")
    report = check_deployment(h.store, h.app, h.policy, maildir=None)
    assert report.invariants["cap-per-customer"].violations == 1, report.to_text()
    assert "under cap 1" in report.invariants["cap-per-customer"].examples[0]


def test_a_ladder_without_its_own_calendar_or_cap_keeps_its_version(store: Store) -> None:
    before = Policy(stages=(1, 7), ladders=ladder_defs([_eur_ladder(), {"name": "big", "match": {"amount_min": 1}}]))
    scans = Scans(store, before)
    scans.service.upsert([Customer(email="ana@example.com", name="Ana")], [invoice("EU-1", DUE, currency="EUR")])
    scans.run(DUE, DUE + timedelta(days=1))
    # The stored JSON of a ladder naming neither key is what it was before they existed (same hash).
    settings = next(s for s, _ in ladders_of(before) if s.name == "eur")
    old_keys = {"name", "stages", "collapse", "spacing", "send_at", "sender", "reply_to", "company", "templates"}
    assert set(settings.to_json()) == old_keys
    text = json.dumps(settings.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert settings.content_hash() == hashlib.sha256(text.encode()).hexdigest()
    # Upgrade: the file now gives "big" a calendar and a cap, and sets them policy-wide; "eur" and "default"
    # name neither: they keep version 1, "big" gets version 2.
    after = Policy(stages=(1, 7), calendar=US, max_notices_per_week=2, ladders=ladder_defs([
        _eur_ladder(), {"name": "big", "match": {"amount_min": 1}, "max_notices_per_week": 4,
                        "calendar": {"country": "FR", "send_window": "09:00-18:00"}}]))
    scans.service.use_policy(after)
    scans.run(DUE + timedelta(days=2), DUE + timedelta(days=2))
    versions = {(h.name, h.version) for h in holdings(store, after)}
    assert versions == {("eur", 1), ("default", 1), ("big", 1), ("big", 2)}
    stored = LadderSettings.from_json(next(s for s, _ in ladders_of(after) if s.name == "big").to_json())
    assert stored.max_notices_per_week == 4 and stored.calendar is not None
    assert (stored.calendar.country, stored.calendar.send_window is not None) == ("FR", True)
    assert stored.content_hash() == next(s for s, _ in ladders_of(after) if s.name == "big").content_hash()


def test_a_bad_ladder_calendar_key_names_the_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[calendar]\ncountry = "US"\n\n[[ladders]]\nname = "eur"\nmatch = { currency = "EUR" }\n'
                    'max_notices_per_week = 1\ncalendar = { country = "DE", subdivison = "BY" }\n\n'
                    '[[ladders]]\nname = "fr"\nmatch = { currency = "XPF" }\n'
                    'calendar = { country = "Frnace", stage_days = "busness" }\nmax_notices_per_week = 0\n')
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    text = str(caught.value)
    assert str(path) in text and "Traceback" not in text
    assert "line 8: [[ladders]][1] (eur) calendar.subdivison is not a known key. Did you mean 'subdivision'?" in text
    assert "line 13: [[ladders]][2] (fr) calendar.country = 'Frnace' is not a country" in text
    assert "Did you mean 'FR'" in text
    assert "line 13: [[ladders]][2] (fr) calendar.stage_days = 'busness'" in text and "'business'" in text
    assert "line 14: [[ladders]][2] (fr) max_notices_per_week" in text
    path.write_text('[[ladders]]\nname = "eur"\nmatch = { currency = "EUR" }\ncalendar = "DE"\n')
    with pytest.raises(ConfigError, match=r"line 4: \[\[ladders\]\]\[1\] \(eur\) calendar = \"DE\" must be a table"):
        load_policy(path)


def test_a_ladder_calendar_round_trips_through_the_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[reminders]\nmax_notices_per_week = 2\n\n[calendar]\ncountry = "US"\n\n[[ladders]]\n'
                    'name = "eur"\nmatch = { currency = "EUR" }\nmax_notices_per_week = 1\n'
                    'calendar = { country = "DE", subdivision = "BY", weekend = ["sat", "sun"], '
                    'stage_days = "business", send_window = "08:00-17:00" }\n')
    policy = load_policy(path)
    eur, default = (s for s, _ in ladders_of(policy))
    assert default.calendar is None and default.max_notices_per_week is None  # inherit: not stored
    assert eur.max_notices_per_week == 1 and eur.calendar is not None
    assert eur.calendar.describe() == "DE-BY holidays, weekend Sat+Sun, stage days: business, window 08:00-17:00"
    assert LadderSettings.from_json(json.dumps(eur.to_json())) == eur
    assert describe_days(policy, eur) == ("calendar DE-BY holidays, weekend Sat+Sun, stage days: business, window "
                                          "08:00-17:00 (its own); cap 1 notice per customer in 7 days (its own)")
    assert describe_days(policy, default) == ("calendar US holidays, weekend Sat+Sun, stage days: calendar "
                                              "([calendar]); cap 2 notices per customer in 7 days ([reminders])")


def test_a_ladder_send_at_outside_its_own_window_is_refused_with_send_zone_customer(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[reminders]\nsend_zone = "customer"\nsend_at = "08:00"\n\n[[ladders]]\nname = "eur"\n'
                    'match = { currency = "EUR" }\ncalendar = { country = "DE", send_window = "09:00-17:00" }\n')
    with pytest.raises(ConfigError, match=r"\[\[ladders\]\]\[1\] \(eur\) send_at = \"08:00\" is outside its "
                                          r"calendar's send_window \(09:00-17:00\).*Move the ladder's send_at"):
        load_policy(path)
    path.write_text(path.read_text() + 'send_at = "09:30"\n')
    assert load_policy(path).ladders[0].name == "eur"


def test_preview_on_a_us_holiday_lists_what_the_german_ladder_sends(tmp_path: Path, db_url: str) -> None:
    """`oncebeat preview` (a real subprocess on the real clock): on the next US holiday that is a Bavarian working
    day, the default ladder sends nothing but the EUR ladder does, so the day is not called closed."""
    (tmp_path / "oncebeat.toml").write_text('[calendar]\ncountry = "US"\n\n[[ladders]]\nname = "eur"\n'
                                            'match = { currency = "EUR" }\n'
                                            'calendar = { country = "DE", subdivision = "BY" }\n')
    policy = load_policy(tmp_path / "oncebeat.toml")
    bavaria = ladders_of(policy)[0][0].calendar
    assert policy.calendar is not None and bavaria is not None
    today = datetime.now(UTC).astimezone(policy.zone).date()
    day = next(today + timedelta(days=n) for n in range(2, 400) if policy.calendar.holiday(today + timedelta(days=n))
               and bavaria.is_business_day(today + timedelta(days=n)))
    due = day - timedelta(days=1)  # stage 1 of both invoices: the holiday
    rows = [f"INV-{c},ana@example.com,Ana,{c},10.00,{(due - timedelta(days=30)).isoformat()},{due.isoformat()}"
            for c in ("USD", "EUR")]
    (tmp_path / "invoices.csv").write_text("invoice_number,customer_email,customer_name,currency,amount_due,"
                                           "issued_on,due_on\n" + "\n".join(rows) + "\n")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    out = oncebeat("preview", "--days", str((day - today).days), "--db", db_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "is not a business day" not in out.stdout and "INV-EUR stage 1" in out.stdout, out.stdout
    assert "INV-USD" not in out.stdout
