"""Schedules: the DST conformance vectors, intervals, options and error messages."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from oncebeat.errors import ScheduleError
from oncebeat.schedules import EPOCH, Schedule, parse_schedule

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "vectors" / "dst.json").read_text("utf-8"))
CHICAGO = ZoneInfo("America/Chicago")


def vector_schedule(vector: dict[str, Any]) -> Schedule:
    return parse_schedule(vector["expr"], vector["tz"])


def chicago(*args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=CHICAGO, fold=fold)  # type: ignore[misc]


def as_local_iso(instants: list[datetime], tz: str) -> list[str]:
    zone = ZoneInfo(tz)
    return [t.astimezone(zone).isoformat() for t in instants]


# -- the conformance vectors ------------------------------------------------


def test_the_vector_copy_holds_fifty_vectors_with_unique_ids() -> None:
    ids = [v["id"] for v in VECTORS]
    assert len(ids) == 50
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_every_vector_yields_its_four_expected_instants(vector: dict[str, Any]) -> None:
    schedule = vector_schedule(vector)
    instant = datetime.fromisoformat(vector["start"])
    found = []
    for _ in vector["expected"]:
        instant = schedule.next_after(instant)
        assert instant.tzinfo is UTC
        found.append(instant)
    assert as_local_iso(found, vector["tz"]) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_every_vector_is_classified_fixed_or_wildcard_as_labelled(vector: dict[str, Any]) -> None:
    assert vector_schedule(vector).is_wildcard == (vector["class"] == "wildcard")


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_previous_before_walks_every_vector_backwards(vector: dict[str, Any]) -> None:
    schedule = vector_schedule(vector)
    expected = [datetime.fromisoformat(e) for e in vector["expected"]]
    for earlier, later in zip(expected, expected[1:]):
        assert schedule.previous_before(later) == earlier
    before_first = schedule.previous_before(expected[0])
    assert before_first is not None
    assert before_first <= datetime.fromisoformat(vector["start"])
    assert schedule.next_after(before_first) == expected[0]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_between_excludes_its_start_and_includes_its_end(vector: dict[str, Any]) -> None:
    schedule = vector_schedule(vector)
    start = datetime.fromisoformat(vector["start"])
    expected = [datetime.fromisoformat(e) for e in vector["expected"]]
    assert list(schedule.between(start, expected[-1])) == expected
    assert list(schedule.between(expected[0], expected[2])) == expected[1:3]
    assert list(schedule.between(expected[0], expected[1] - timedelta(seconds=1))) == []


def test_previous_before_of_a_next_after_result_is_never_after_the_query() -> None:
    schedule = parse_schedule("*/30 * * * *", "America/Chicago")
    probe = datetime(2025, 11, 2, 5, 0, tzinfo=UTC)
    while probe < datetime(2025, 11, 2, 10, 0, tzinfo=UTC):
        following = schedule.next_after(probe)
        previous = schedule.previous_before(following)
        assert previous is not None and previous <= probe
        probe += timedelta(minutes=7)


# -- DST options on Chicago 2026 (spring forward 2026-03-08, fall back 2026-11-01)


def test_a_fixed_job_in_the_spring_gap_fires_when_the_gap_ends_by_default() -> None:
    schedule = parse_schedule("30 2 * * *", "America/Chicago")
    fired = list(schedule.between(chicago(2026, 3, 7, 12), chicago(2026, 3, 9, 12)))
    assert as_local_iso(fired, "America/Chicago") == ["2026-03-08T03:00:00-05:00", "2026-03-09T02:30:00-05:00"]


def test_a_fixed_job_in_the_spring_gap_is_skipped_under_dst_gap_skip() -> None:
    schedule = parse_schedule("30 2 * * *", "America/Chicago", dst_gap="skip")
    fired = list(schedule.between(chicago(2026, 3, 7, 12), chicago(2026, 3, 9, 12)))
    assert as_local_iso(fired, "America/Chicago") == ["2026-03-09T02:30:00-05:00"]
    assert schedule.previous_before(chicago(2026, 3, 9, 0)) == chicago(2026, 3, 7, 2, 30).astimezone(UTC)


def test_a_fixed_job_in_the_fall_fold_fires_once_at_the_first_pass_by_default() -> None:
    schedule = parse_schedule("30 1 * * *", "America/Chicago")
    fired = list(schedule.between(chicago(2026, 10, 31, 12), chicago(2026, 11, 2, 12)))
    assert as_local_iso(fired, "America/Chicago") == ["2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-06:00"]


def test_a_fixed_job_in_the_fall_fold_fires_at_the_second_pass_under_dst_fold_second() -> None:
    schedule = parse_schedule("30 1 * * *", "America/Chicago", dst_fold="second")
    fired = list(schedule.between(chicago(2026, 10, 31, 12), chicago(2026, 11, 2, 12)))
    assert as_local_iso(fired, "America/Chicago") == ["2026-11-01T01:30:00-06:00", "2026-11-02T01:30:00-06:00"]


def test_dst_fold_second_still_fires_when_started_between_the_two_passes() -> None:
    schedule = parse_schedule("30 1 * * *", "America/Chicago", dst_fold="second")
    after_first_pass = chicago(2026, 11, 1, 1, 40)  # 01:40 CDT, before the repeat
    assert schedule.local(schedule.next_after(after_first_pass)).isoformat() == "2026-11-01T01:30:00-06:00"


def test_a_fixed_job_in_the_fall_fold_fires_at_both_passes_under_dst_fold_both() -> None:
    schedule = parse_schedule("30 1 * * *", "America/Chicago", dst_fold="both")
    fired = list(schedule.between(chicago(2026, 10, 31, 12), chicago(2026, 11, 2, 12)))
    assert as_local_iso(fired, "America/Chicago") == [
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T01:30:00-06:00",
        "2026-11-02T01:30:00-06:00",
    ]
    assert schedule.previous_before(chicago(2026, 11, 2, 0)) == chicago(2026, 11, 1, 1, 30, fold=1).astimezone(UTC)


def test_a_fixed_job_that_fired_in_the_first_pass_does_not_fire_again_in_the_second() -> None:
    schedule = parse_schedule("30 1 * * *", "America/Chicago")
    first_pass = chicago(2026, 11, 1, 1, 30)
    assert schedule.local(schedule.next_after(first_pass)).isoformat() == "2026-11-02T01:30:00-06:00"


def test_wildcard_jobs_ignore_the_dst_options_and_follow_real_time() -> None:
    for gap, fold in [("shift", "first"), ("skip", "second"), ("shift", "both")]:
        schedule = parse_schedule("*/30 * * * *", "America/Chicago", dst_gap=gap, dst_fold=fold)
        spring = list(schedule.between(chicago(2026, 3, 8, 1, 0), chicago(2026, 3, 8, 3, 30)))
        assert as_local_iso(spring, "America/Chicago") == [
            "2026-03-08T01:30:00-06:00",
            "2026-03-08T03:00:00-05:00",
            "2026-03-08T03:30:00-05:00",
        ]
        fall = list(schedule.between(chicago(2026, 11, 1, 0, 45), chicago(2026, 11, 1, 2, 0)))
        assert as_local_iso(fall, "America/Chicago") == [
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01T01:00:00-06:00",
            "2026-11-01T01:30:00-06:00",
            "2026-11-01T02:00:00-06:00",
        ]


def test_several_gap_times_of_one_fixed_job_fire_once() -> None:
    schedule = parse_schedule("0,15,30,45 2 * * *", "America/Chicago")
    fired = list(schedule.between(chicago(2026, 3, 8, 0), chicago(2026, 3, 8, 12)))
    assert as_local_iso(fired, "America/Chicago") == ["2026-03-08T03:00:00-05:00"]


# -- cron features -------------------------------------------------------


def test_aliases_expand_to_their_cron_meaning() -> None:
    start = datetime(2026, 5, 6, 10, 17, tzinfo=UTC)
    assert parse_schedule("@daily").next_after(start) == datetime(2026, 5, 7, tzinfo=UTC)
    assert parse_schedule("@hourly").next_after(start) == datetime(2026, 5, 6, 11, tzinfo=UTC)
    assert parse_schedule("@weekly").next_after(start) == datetime(2026, 5, 10, tzinfo=UTC)  # a Sunday
    assert parse_schedule("@monthly").next_after(start) == datetime(2026, 6, 1, tzinfo=UTC)
    assert parse_schedule("@yearly").next_after(start) == datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_schedule("@hourly").is_wildcard
    assert not parse_schedule("@daily").is_wildcard


def test_a_stepped_hour_range_is_fixed_but_a_starred_step_is_wildcard() -> None:
    assert not parse_schedule("0 0-23/2 * * *").is_wildcard
    assert parse_schedule("0 */2 * * *").is_wildcard


def test_day_of_month_and_day_of_week_are_ored_when_both_are_restricted() -> None:
    schedule = parse_schedule("0 8 13 * 5", "UTC")  # the 13th, or any Friday
    fired = list(schedule.between(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 28, tzinfo=UTC)))
    assert [t.day for t in fired] == [6, 13, 20, 27]  # Feb 13 2026 is a Friday too


def test_day_of_month_and_day_of_week_are_anded_when_one_starts_with_a_star() -> None:
    schedule = parse_schedule("0 8 */2 * 5", "UTC")  # odd-numbered days that are Fridays
    fired = list(schedule.between(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)))
    assert [(t.month, t.day) for t in fired] == [(2, 13), (2, 27), (3, 13), (3, 27)]


def test_the_nth_weekday_and_the_last_day_of_month_are_supported() -> None:
    second_tuesday = parse_schedule("0 9 * * 2#2", "Europe/Berlin")
    t = second_tuesday.next_after(datetime(2026, 1, 1, tzinfo=UTC))
    assert second_tuesday.local(t).isoformat() == "2026-01-13T09:00:00+01:00"
    last_day = parse_schedule("0 9 L * *", "UTC")
    assert last_day.next_after(datetime(2026, 2, 1, tzinfo=UTC)) == datetime(2026, 2, 28, 9, tzinfo=UTC)


def test_sunday_may_be_written_as_0_or_7_or_sun() -> None:
    start = datetime(2026, 5, 6, tzinfo=UTC)
    results = {parse_schedule(f"0 3 * * {dow}").next_after(start) for dow in ("0", "7", "sun", "SUN")}
    assert results == {datetime(2026, 5, 10, 3, tzinfo=UTC)}


def test_next_after_accepts_any_zone_and_returns_utc() -> None:
    schedule = parse_schedule("0 8 * * *", "America/Chicago")
    in_tokyo = datetime(2026, 6, 1, 20, 0, tzinfo=ZoneInfo("Asia/Tokyo"))  # 06:00 CDT
    result = schedule.next_after(in_tokyo)
    assert result.tzinfo is UTC
    assert result == datetime(2026, 6, 1, 13, 0, tzinfo=UTC)


def test_local_shows_an_instant_in_the_schedule_zone() -> None:
    schedule = parse_schedule("0 8 * * *", "America/Chicago")
    local = schedule.local(datetime(2026, 6, 1, 13, 0, tzinfo=UTC))
    assert local.isoformat() == "2026-06-01T08:00:00-05:00"
    assert local.tzinfo == CHICAGO


def test_previous_before_gives_none_when_nothing_fired_within_five_years() -> None:
    leap_day = parse_schedule("0 0 29 2 *")
    assert leap_day.previous_before(datetime(2103, 6, 1, tzinfo=UTC)) is None  # 2100 is not a leap year
    assert leap_day.previous_before(datetime(2026, 6, 1, tzinfo=UTC)) == datetime(2024, 2, 29, tzinfo=UTC)


def test_describe_names_the_expression_the_zone_and_the_dst_choice() -> None:
    assert parse_schedule("0 8 * * *", "America/Chicago").describe() == (
        "0 8 * * * in America/Chicago (DST: gap shift, fold first)"
    )
    assert "fold both" in parse_schedule("0 8 * * *", "America/Chicago", dst_fold="both").describe()
    assert "wildcard" in parse_schedule("*/5 * * * *", "America/Chicago").describe()
    assert "every 30m" in parse_schedule("every 30m").describe()


def test_next_after_is_fast_enough_for_ten_thousand_schedules() -> None:
    schedule = parse_schedule("0 8 * * 1-5", "America/Chicago")
    start = datetime(2026, 4, 15, 10, 3, tzinfo=UTC)
    began = time.process_time()  # CPU time: parallel test processes may keep this one waiting for a core
    for _ in range(1000):
        schedule.next_after(start)
    assert (time.process_time() - began) / 1000 < 0.001


# -- intervals -----------------------------------------------------------


def test_an_interval_fires_on_multiples_of_its_period_since_the_unix_epoch() -> None:
    schedule = parse_schedule("every 5m")
    assert schedule.is_interval
    assert schedule.next_after(datetime(2026, 3, 8, 10, 3, 20, tzinfo=UTC)) == datetime(2026, 3, 8, 10, 5, tzinfo=UTC)
    assert schedule.next_after(datetime(2026, 3, 8, 10, 5, tzinfo=UTC)) == datetime(2026, 3, 8, 10, 10, tzinfo=UTC)
    assert schedule.previous_before(datetime(2026, 3, 8, 10, 5, tzinfo=UTC)) == datetime(2026, 3, 8, 10, 0, tzinfo=UTC)
    assert schedule.previous_before(datetime(2026, 3, 8, 10, 3, tzinfo=UTC)) == datetime(2026, 3, 8, 10, 0, tzinfo=UTC)
    assert parse_schedule("every 7s").next_after(EPOCH) == EPOCH + timedelta(seconds=7)


def test_an_interval_accepts_seconds_minutes_hours_and_days() -> None:
    start = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert parse_schedule("every 30s").next_after(start) == datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert parse_schedule("every 2h").next_after(start) == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert parse_schedule("every 1d").next_after(start) == datetime(2026, 1, 2, tzinfo=UTC)


def test_an_interval_keeps_its_elapsed_spacing_across_a_dst_change() -> None:
    schedule = parse_schedule("every 1h", "America/Chicago")
    fired = list(schedule.between(chicago(2026, 3, 8, 0, 30), chicago(2026, 3, 8, 4, 30)))
    assert [b - a for a, b in zip(fired, fired[1:])] == [timedelta(hours=1)] * 2
    assert as_local_iso(fired, "America/Chicago") == [
        "2026-03-08T01:00:00-06:00",
        "2026-03-08T03:00:00-05:00",
        "2026-03-08T04:00:00-05:00",
    ]


def test_a_daily_interval_is_anchored_in_utc_not_local_midnight() -> None:
    schedule = parse_schedule("every 1d", "America/Chicago")
    result = schedule.next_after(chicago(2026, 6, 1, 12))
    assert result == datetime(2026, 6, 2, tzinfo=UTC)


def test_two_separately_built_interval_schedules_agree() -> None:
    start = datetime(2026, 7, 4, 9, 41, 13, 500, tzinfo=UTC)
    a = list(parse_schedule("every 45s").between(start, start + timedelta(minutes=10)))
    b = list(Schedule(expression="every 45s").between(start, start + timedelta(minutes=10)))
    assert a == b and len(a) in (13, 14)
    assert all((t - EPOCH) % timedelta(seconds=45) == timedelta(0) for t in a)


# -- construction and errors ---------------------------------------------


def test_constructing_a_schedule_directly_validates_it() -> None:
    with pytest.raises(ScheduleError, match="hour field '25' is out of range 0-23"):
        Schedule(expression="0 25 * * *")
    with pytest.raises(ScheduleError, match="unknown time zone"):
        Schedule(expression="0 8 * * *", tz="Nowhere/Town")


def test_schedules_are_frozen_and_compare_by_their_fields() -> None:
    schedule = parse_schedule("0 8 * * *", "America/Chicago")
    assert schedule == Schedule(expression="0 8 * * *", tz="America/Chicago")
    assert hash(schedule) == hash(Schedule(expression="0 8 * * *", tz="America/Chicago"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule.tz = "UTC"  # type: ignore[misc]


def test_an_unknown_zone_is_reported_with_close_suggestions() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 8 * * *", "America/Chicgo")
    message = str(caught.value)
    assert message.startswith("unknown time zone 'America/Chicgo'; did you mean America/Chicago")
    with pytest.raises(ScheduleError, match="did you mean America/New_York"):
        parse_schedule("0 8 * * *", "america/new_york")


def test_a_bad_hour_field_is_named_with_its_value_and_range() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 25 * * *")
    assert str(caught.value) == "bad cron expression '0 25 * * *': hour field '25' is out of range 0-23"


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("60 * * * *", "minute field '60' is out of range 0-59"),
        ("0 8 0 * *", "day of month field '0' is out of range 1-31"),
        ("0 8 * 13 *", "month field '13' is out of range 1-12"),
        ("0 8 * * 8", "day of week field '8' is out of range 0-7"),
        ("0 1,25 * * *", "hour field '1,25': '25' is out of range 0-23"),
        ("*/0 * * * *", "minute field '*/0': the step"),
        ("0 5-2 * * *", "hour field '5-2': range start 5 is after its end 2"),
        ("0 8 * * FUNDAY", "day of week field 'FUNDAY' is not a number 0-7 or a name SUN-SAT"),
        ("0 8 * * MON#6", "week number after '#' must be 1-5"),
        ("0 8 30 2 *", "day of month field '30' never occurs in month field '2'"),
        ("@reboot", "unknown alias"),
    ],
)
def test_each_bad_cron_field_is_named_in_the_error(expression: str, fragment: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("expression", ["0 8 * *", "0 0 8 * * *", "8"])
def test_a_wrong_field_count_says_five_fields_are_needed(expression: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert "5 fields are needed" in str(caught.value)


@pytest.mark.parametrize("expression", ["every 0s", "every 5 weeks", "every m"])
def test_a_bad_interval_is_rejected(expression: str) -> None:
    with pytest.raises(ScheduleError, match="bad interval"):
        parse_schedule(expression)


def test_a_bad_dst_option_names_the_option_and_its_allowed_values() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 8 * * *", "America/Chicago", dst_gap="later")
    assert str(caught.value) == "bad dst_gap 'later': allowed values are 'shift', 'skip'"
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 8 * * *", "America/Chicago", dst_fold="last")
    assert str(caught.value) == "bad dst_fold 'last': allowed values are 'first', 'second', 'both'"


def test_naive_datetimes_are_refused_with_value_error() -> None:
    schedule = parse_schedule("0 8 * * *", "America/Chicago")
    naive = datetime(2026, 3, 8, 8, 0)
    aware = datetime(2026, 3, 8, 8, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.next_after(naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.previous_before(naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.between(naive, aware)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.between(aware, naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.local(naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("every 5m").next_after(naive)


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "posix/Europe/Paris", "right/UTC"])
def test_host_dependent_zone_names_are_refused(zone: str) -> None:
    # ZoneInfo loads them, but they name the host's setting (or no zone): a schedule in one fires at
    # different instants on different machines.
    with pytest.raises(ScheduleError, match="names the host's zone setting, not an IANA zone"):
        parse_schedule("0 8 * * *", zone)


@pytest.mark.parametrize("expression", ["every 367d", "every 99999999999d", "every 9999999999999999999999s"])
def test_an_interval_longer_than_a_year_is_refused_by_name(expression: str) -> None:
    with pytest.raises(ScheduleError, match="the period must be at most 366 days"):
        parse_schedule(expression, "UTC")
