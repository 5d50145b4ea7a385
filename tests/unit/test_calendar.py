"""The business calendar (issue 23 item 3): holidays from the holidays package, weekends, stage days counted in
calendar or business days, the send window, and the [calendar] table's errors."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.calendar import BusinessCalendar, calendar_config
from oncebeat.reminders.holds import next_business_day
from oncebeat.reminders.policy import Policy, default_toml, policy_from_dict, stages_due
from oncebeat.reminders.service import stage_cutoffs

US = calendar_config({"country": "US"}, source="t")


def test_us_christmas_and_thanksgiving_are_not_business_days_and_say_why() -> None:
    assert US.why_not(date(2026, 12, 25)) == "Christmas Day (US)"
    assert US.why_not(date(2026, 11, 26)) == "Thanksgiving Day (US)"
    assert US.why_not(date(2026, 12, 26)) == "weekend (Saturday)"
    assert US.why_not(date(2026, 12, 28)) is None
    assert US.next_business_day(date(2026, 12, 24)) == date(2026, 12, 28)  # Fri holiday, then the weekend
    assert US.next_business_day(date(2026, 11, 25)) == date(2026, 11, 27)
    assert US.on_or_after(date(2026, 12, 28)) == date(2026, 12, 28)


def test_a_subdivision_holiday_counts_only_in_that_subdivision() -> None:
    bavaria = calendar_config({"country": "DE", "subdivision": "BY"}, source="t")
    germany = calendar_config({"country": "DE"}, source="t")
    epiphany = date(2026, 1, 6)  # a Tuesday
    assert bavaria.why_not(epiphany) == "Epiphany (DE-BY)"
    assert germany.is_business_day(epiphany)
    assert bavaria.next_business_day(date(2026, 1, 5)) == date(2026, 1, 7)
    # the package's own names of a subdivision work as well as its code
    assert calendar_config({"country": "US", "subdivision": "Illinois"}, source="t").subdivision == "IL"


def test_weekend_days_are_configurable() -> None:
    gulf = calendar_config({"weekend": ["fri", "sat"]}, source="t")
    assert not gulf.is_business_day(date(2026, 3, 6)) and not gulf.is_business_day(date(2026, 3, 7))
    assert gulf.is_business_day(date(2026, 3, 8))  # Sunday
    assert calendar_config({"weekend": []}, source="t").is_business_day(date(2026, 3, 7))
    assert BusinessCalendar().why_not(date(2026, 3, 7)) == "weekend (Saturday)"  # no country: weekends only


def test_add_business_days_forward_and_back() -> None:
    assert US.add_business_days(date(2026, 12, 23), 2) == date(2026, 12, 28)
    assert US.add_business_days(date(2026, 12, 28), -1) == date(2026, 12, 24)
    assert US.add_business_days(date(2026, 12, 26), 0) == date(2026, 12, 26)
    assert US.business_days_between(date(2026, 12, 23), date(2026, 12, 28)) == 2


@pytest.mark.parametrize("stage_days", ["calendar", "business"])
def test_stage_cutoff_is_exactly_the_due_dates_whose_nominal_date_has_come(stage_days: str) -> None:
    cal = calendar_config({"country": "US", "stage_days": stage_days}, source="t")
    days = [date(2026, 11, 16) + timedelta(days=k) for k in range(60)]
    for day in (d for d in days if cal.is_business_day(d)):
        for stage in (-10, -3, -1, 0, 1, 2, 5, 14):
            cutoff = cal.stage_cutoff(day, stage)
            for due in (day - timedelta(days=k) for k in range(-30, 40)):
                assert (cal.nominal(due, stage) <= day) == (due <= cutoff), (day, stage, due, cutoff)


def test_business_stage_days_skip_weekends_and_holidays() -> None:
    cal = calendar_config({"country": "US", "stage_days": "business"}, source="t")
    assert cal.nominal(date(2026, 12, 23), 1) == date(2026, 12, 24)
    assert cal.nominal(date(2026, 12, 23), 2) == date(2026, 12, 28)
    assert cal.nominal(date(2026, 12, 28), -1) == date(2026, 12, 24)
    assert US.nominal(date(2026, 12, 23), 2) == date(2026, 12, 25)  # calendar days: the holiday itself


def test_stages_due_waits_for_the_next_business_day() -> None:
    due = date(2026, 12, 24)
    assert stages_due((1, 7), due, date(2026, 12, 25), "next", [], US) == []
    assert stages_due((1, 7), due, date(2026, 12, 26), "next", [], US) == []
    assert stages_due((1, 7), due, date(2026, 12, 28), "next", [], US) == [1]
    assert stages_due((1, 7), due, date(2026, 12, 25), "next", []) == [1]  # without a calendar: on the day
    assert stages_due((1, 2, 3), due, date(2026, 12, 28), "highest", [], US) == [1, 2, 3]


def test_stage_cutoffs_are_empty_on_a_non_business_day() -> None:
    assert stage_cutoffs((1, 7), date(2026, 12, 25), calendar=US) == []
    rows = stage_cutoffs((1, 7), date(2026, 12, 28), "Europe/Berlin", US)
    assert [(r["stage"], r["cutoff"], r["tz"]) for r in rows] == [(1, "2026-12-27", "Europe/Berlin"),
                                                                   (7, "2026-12-21", "Europe/Berlin")]


def test_a_held_ladder_resumes_on_the_next_business_day() -> None:
    assert next_business_day(date(2026, 12, 24)) == date(2026, 12, 25)  # no calendar: every day
    assert next_business_day(date(2026, 12, 24), US) == date(2026, 12, 28)


def test_late_reason_names_the_holiday_only_when_the_calendar_moved_the_stage() -> None:
    assert US.late_reason(date(2026, 12, 24), 1, date(2026, 12, 28)) == (
        "nominal 2026-12-25 (Christmas Day (US)), sent on the next business day")
    assert US.late_reason(date(2026, 12, 20), 1, date(2026, 12, 28)) is None  # late for another reason
    assert US.late_reason(date(2026, 12, 27), 1, date(2026, 12, 28)) is None  # on time


def test_the_send_window_waits_for_the_next_business_morning_across_dst() -> None:
    cal = calendar_config({"country": "US", "send_window": "08:00-17:00"}, source="t")
    ny = ZoneInfo("America/New_York")
    assert cal.window_wait(datetime(2026, 3, 4, 9, 0, tzinfo=ny)) == 0
    assert cal.window_wait(datetime(2026, 3, 4, 7, 30, tzinfo=ny)) == 1800
    # Friday 18:00 EST → Monday 08:00 EDT (clocks went forward on Sunday 8 March): 61 h, not 62
    assert cal.window_wait(datetime(2026, 3, 6, 18, 0, tzinfo=ny)) == 61 * 3600
    # Thursday 24 Dec 20:00 → Monday 28 Dec 08:00 (Christmas and the weekend in between)
    assert cal.window_wait(datetime(2026, 12, 24, 20, 0, tzinfo=ny)) == (3 * 24 + 12) * 3600
    assert US.window_wait(datetime(2026, 12, 25, 3, 0, tzinfo=UTC)) == 0  # no window: no wait


@pytest.mark.parametrize(("table", "words"), [
    ({"country": "Germany"}, ["country = 'Germany'", "Did you mean 'DE'"]),
    ({"country": "XX"}, ["country = 'XX' is not a country", "ISO 3166-1"]),
    ({"country": "US", "subdivision": "ILL"}, ["subdivision = 'ILL' is not a subdivision of US", "'IL'"]),
    ({"subdivision": "IL"}, ["subdivision needs a country"]),
    ({"weekend": ["sat", "sunday", "caturday"]}, ["weekend[2] = 'caturday' is not a weekday"]),
    ({"weekend": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}, ["leaves no business day"]),
    ({"stage_days": "busines"}, ["stage_days = 'busines'", "Did you mean 'business'"]),
    ({"send_window": "17:00-08:00"}, ["closes before it opens"]),
    ({"send_window": "8-17"}, ["is not HH:MM"]),
    ({"contry": "US"}, ["[calendar] contry is not a known key", "Did you mean 'country'"]),
])
def test_calendar_errors_name_the_key_and_the_fix(table: dict, words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        policy_from_dict({"calendar": table}, "oncebeat.toml")
    text = str(caught.value)
    assert text.startswith("oncebeat.toml: ")
    for w in words:
        assert w in text, text


def test_send_at_must_be_inside_the_send_window_with_customer_send_zone() -> None:
    with pytest.raises(ConfigError, match=r"send_at = \"07:00\" is outside \[calendar\] send_window"):
        policy_from_dict({"reminders": {"send_zone": "customer", "send_at": "07:00"},
                          "calendar": {"send_window": "08:00-17:00"}}, "oncebeat.toml")


def test_the_calendar_table_loads_into_the_policy_and_the_default_file_mentions_it() -> None:
    policy = policy_from_dict({"calendar": {"country": "us", "subdivision": "il", "weekend": ["Sat", "Sun"],
                                            "stage_days": "business", "send_window": "08:00-17:00"}}, "t")
    assert policy.calendar == BusinessCalendar(country="US", subdivision="IL", weekend=frozenset({5, 6}),
                                               stage_days="business", send_window=(time(8), time(17)))
    assert Policy().calendar is None
    assert "# [calendar]" in default_toml() and "# country = " in default_toml()
    import tomllib
    assert policy_from_dict(tomllib.loads(default_toml()), "default") == Policy()


def test_a_weekend_day_is_a_weekday_name_not_three_letters_of_anything() -> None:
    from oncebeat.errors import ConfigError
    from oncebeat.reminders.calendar import calendar_config

    assert sorted(calendar_config({"country": "US", "weekend": ["sat", "Sunday"]}, source="t").weekend) == [5, 6]
    for bad in (["satan"], ["mon-fri"], ["sunXYZ"]):
        with pytest.raises(ConfigError, match="is not a weekday"):
            calendar_config({"country": "US", "weekend": bad}, source="t")
