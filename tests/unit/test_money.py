"""Minor units follow ISO 4217 (list one), not CLDR's display digits (issue 22 item 8)."""

from __future__ import annotations

import pytest
from babel.numbers import get_currency_precision

from oncebeat.reminders.conversions import currency_reason
from oncebeat.reminders.money import iso_minor_digits, minor_digits
from oncebeat.reminders.render import format_money, minor_units
from oncebeat.reminders.sources.values import amount_minor


@pytest.mark.parametrize(("code", "digits"), [
    ("USD", 2), ("EUR", 2), ("JPY", 0), ("KRW", 0), ("ISK", 0), ("KWD", 3), ("BHD", 3), ("IQD", 3),
    ("HUF", 2), ("IDR", 2), ("COP", 2), ("ALL", 2), ("LBP", 2), ("TWD", 2), ("CLF", 4),
])
def test_minor_digits_are_iso_4217s(code: str, digits: int) -> None:
    assert minor_digits(code) == digits


@pytest.mark.parametrize("code", ["HUF", "IDR", "COP", "ALL", "LBP", "IQD"])
def test_cldr_shows_fewer_digits_than_the_currency_has_which_is_why_storage_does_not_use_it(code: str) -> None:
    assert get_currency_precision(code) < minor_digits(code)


def test_a_withdrawn_code_falls_back_to_cldr_for_display_and_an_unknown_one_is_refused() -> None:
    assert iso_minor_digits("DEM") is None and minor_digits("DEM") == 2
    with pytest.raises(ValueError, match="unknown currency"):
        minor_digits("QQQ")
    assert currency_reason("HUF") is None and currency_reason("DEM") is not None


@pytest.mark.parametrize(("text", "code", "minor"), [
    ("8491.50", "HUF", 849150), ("8491", "HUF", 849100), ("15000.25", "IDR", 1500025), ("1200", "JPY", 1200),
    ("12.345", "KWD", 12345), ("1.5", "IQD", 1500),
])
def test_csv_amounts_are_read_in_iso_minor_units(text: str, code: str, minor: int) -> None:
    assert amount_minor(text, code) == (minor, None)
    assert minor_units(text, code) == minor


@pytest.mark.parametrize(("text", "code"), [("1200.5", "JPY"), ("1.2345", "KWD"), ("8491.505", "HUF")])
def test_a_fraction_of_the_smallest_unit_is_still_refused(text: str, code: str) -> None:
    minor, reason = amount_minor(text, code)
    assert minor is None and reason is not None


def test_display_uses_cldr_digits_only_when_they_hide_no_minor_unit() -> None:
    assert format_money(849150, "HUF", "en_US") == "HUF8,491.50"
    assert format_money(849100, "HUF", "en_US") == "HUF8,491"
    assert format_money(1500025, "IDR", "id_ID") == "Rp15.000,25"
    assert format_money(1200, "JPY", "ja_JP") == "￥1,200"
    assert format_money(12345, "KWD", "en_US") == "KWD12.345"
    assert format_money(5, "IQD", "en_US") == "IQD0.005"
