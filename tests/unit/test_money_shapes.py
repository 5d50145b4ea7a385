"""Amounts formatted from a shape's template equal Babel's, for every locale of the shipped languages (round 3f)."""

from __future__ import annotations

import random

import pytest
from babel import Locale
from babel.localedata import locale_identifiers

from oncebeat.reminders import money_shapes
from oncebeat.reminders.render import _babel_money, _format_money
from oncebeat.reminders.translations import LANGUAGES

LOCALES = [Locale.parse(i) for i in sorted(locale_identifiers()) if Locale.parse(i).language in LANGUAGES]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "BHD", "HUF", "CHF", "INR", "KWD", "ISK", "IDR", "CLF", "XAF"]


def amounts(rng: random.Random) -> list[int]:
    out = [0, 1, -1, 5, 99, 100, 849150, 849100, -849150]
    for length in range(1, 17):
        for _ in range(3):
            value = rng.randrange(10 ** (length - 1), 10**length)
            out += [value, -value, value - value % 100]
    return out


@pytest.fixture(autouse=True)
def _empty_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(money_shapes, "_shapes", {})


def test_every_locale_and_currency_formats_as_babel_does() -> None:
    assert len(LOCALES) > 100
    rng = random.Random(27)
    calls = 0
    for locale in LOCALES:
        for currency in CURRENCIES:
            for amount in amounts(rng):
                assert _format_money(amount, currency, locale) == _babel_money(amount, currency, locale), (
                    locale, currency, amount)
                calls += 1
    kept = [t for t in money_shapes._shapes.values() if t]
    assert len(kept) > 0.8 * len(money_shapes._shapes)  # most shapes are proven, so most calls skip Babel
    assert len(money_shapes._shapes) < calls / 3


def test_a_shape_is_learnt_once_and_then_skips_babel(monkeypatch: pytest.MonkeyPatch) -> None:
    de = Locale.parse("de_DE")
    assert _format_money(13912, "EUR", de) == "139,12\xa0€"
    calls: list[int] = []
    real = _babel_money

    def counting(amount: int, currency: str, locale: Locale) -> str:
        calls.append(amount)
        return real(amount, currency, locale)

    monkeypatch.setattr("oncebeat.reminders.render._babel_money", counting)
    assert _format_money(98765, "EUR", de) == "987,65\xa0€"  # same shape: filled
    assert _format_money(1234567, "EUR", de) == "12.345,67\xa0€"  # seven digits: a new shape
    assert _format_money(-98765, "EUR", de) == "-987,65\xa0€"  # negative: a new shape
    assert calls == [1234567, -98765]


def test_a_shape_babel_rounds_is_never_templated() -> None:
    en = Locale.parse("en_US")
    assert _format_money(849100, "HUF", en) == _babel_money(849100, "HUF", en)  # CLDR shows no minor unit
    assert money_shapes._shapes[("HUF", en, False, 6, True)] == ()
    assert _format_money(123400, "HUF", en) == "HUF1,234"
