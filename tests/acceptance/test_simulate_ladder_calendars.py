"""The simulator with a calendar and a cap per ladder: a default ladder on the US calendar capped at 2 notices a
week, a EUR ladder on the Bavarian calendar counting business stage days capped at 1, every fault, both backends.
The checker judges each invoice by its pinned ladder's calendar and cap (from the policy and the pins)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from oncebeat.reminders.ladders import LadderSettings
from oncebeat.reminders.policy import load_policy
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.store import open_store

CONFIG = """\
[reminders]
max_notices_per_week = 2

[calendar]
country = "US"

[[ladders]]
name = "eur"
match = { currency = "EUR" }
calendar = { country = "DE", subdivision = "BY", stage_days = "business" }
max_notices_per_week = 1
"""


def test_sixty_simulated_days_with_two_ladder_calendars_and_caps_keep_every_invariant(
        tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text(CONFIG)
    report = simulate(SimConfig(days=60, start=date(2026, 1, 5), seed=11, faults=parse_faults("all"),
                                db_url=db_url, workdir=tmp_path / "sim", policy=load_policy(path),
                                # a cap of 1 a week defers a customer's later reminders by whole weeks: the run
                                # settles for three, so none is still waiting on its cap at the end (delayed)
                                settle_days=21))
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"]) == (0, 0) and s["due"] > 0
    assert report.check.invariants["no-send-on-non-business-day"].checked > 20
    assert report.check.invariants["cap-per-customer"].checked > 20
    with open_store(db_url) as store:
        versions = {int(r["id"]): LadderSettings.from_json(r["settings"]) for r in store.read("all_ladder_versions")}
        rows = store.read("list_reminders")
    eur = [r for r in rows if r["ladder_version_id"] is not None and versions[r["ladder_version_id"]].name == "eur"]
    bavaria = versions[eur[0]["ladder_version_id"]].calendar
    assert bavaria is not None and bavaria.subdivision == "BY"
    assert len(eur) > 10 and all(bavaria.is_business_day(r["business_date"]) for r in eur)
    assert date(2026, 1, 6) not in {r["business_date"] for r in eur}  # Epiphany in Bavaria: no EUR reminder
    assert any(r["capped_at"] is not None for r in eur)  # the EUR ladder's cap of 1 deferred some
