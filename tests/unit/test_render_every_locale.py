"""Every locale Babel knows gets an email in one language with no amount or date split across lines (issue 21, 7).

The rule restated independently of the code: a customer locale whose language ships a catalog (en, de, fr, es)
is used as it is, words from its language's catalog and amounts and dates in its own regional format (de_AT:
"€ 72.202,29"); any other locale gets the fallback locale (the policy's ``[reminders] fallback_locale``) for
words, amounts and dates alike.
"""

from __future__ import annotations

import random
import textwrap
from datetime import date
from decimal import Decimal

import pytest
from babel import Locale
from babel.dates import format_date
from babel.localedata import locale_identifiers
from babel.numbers import format_currency
from markupsafe import escape

from oncebeat.errors import ConfigError
from oncebeat.reminders.render import NO_BREAK, Renderer, _wrap
from oncebeat.reminders.translations import LANGUAGES, email_locale, translations

NBSP = "\xa0"
LOCALES = sorted(locale_identifiers())
NAME = "Maximiliane Sophie von Wittelsbach-Hohenzollern-Sigmaringen"
DUE, ISSUED = date(2026, 3, 1), date(2026, 2, 1)
STAGES = [(-3, -3), (1, 1), (7, 7), (30, 45)]
CANONICAL = {"en": "en_US", "de": "de_DE", "fr": "fr_FR", "es": "es_ES"}


def _expected(identifier: str, fallback: str = "en_US") -> Locale:
    locale = Locale.parse(identifier)
    return locale if locale.language in LANGUAGES else Locale.parse(fallback)


def _one_word(text: str) -> str:
    """Babel's formatting with its ordinary spaces made no-break, as an email shows it."""
    return text.replace(" ", NBSP)


def _render(renderer: Renderer, locale: str | None, stage: int, days: int):
    return renderer.render(invoice_number="INV-2026-000042", customer_name=NAME, customer_locale=locale,
                           currency="EUR", amount_due=7_220_229, due_on=DUE, issued_on=ISSUED, stage=stage,
                           days_past_due=days)


def test_babel_knows_hundreds_of_locales_and_most_have_no_catalog() -> None:
    assert len(LOCALES) > 700
    shipped = [i for i in LOCALES if Locale.parse(i).language in LANGUAGES]
    assert 100 < len(shipped) < len(LOCALES) // 2  # both branches of the rule are exercised at scale


@pytest.mark.parametrize(("stage", "days"), STAGES)
def test_every_locale_gets_one_language_and_whole_amounts_and_dates(stage: int, days: int) -> None:
    renderer = Renderer()
    subjects = {lang: _render(renderer, loc, stage, days).subject for lang, loc in CANONICAL.items()}
    problems: list[str] = []
    for identifier in LOCALES:
        chosen = _expected(identifier)
        language = chosen.language
        t = translations(language)
        email = _render(renderer, identifier, stage, days)
        amount = _one_word(format_currency(Decimal("72202.29"), "EUR", locale=chosen))
        due = _one_word(format_date(DUE, format="long", locale=chosen))
        lines = email.text.split("\n")
        # (a) the amount and the due date each appear whole, on one line, in the message and in the table
        if sum(line.count(amount) for line in lines) != 2 or sum(line.count(due) for line in lines) != 2:
            problems.append(f"{identifier}: {amount!r} or {due!r} split or missing in\n{email.text}")
            continue
        if any(ch == " " for ch in amount + due):
            problems.append(f"{identifier}: breakable space left in {amount!r} {due!r}")
        # (b) one language: words from the chosen language's catalog, formats of the chosen locale only
        greeting = t.gettext("Dear %(customer_name)s,") % {"customer_name": NAME}
        words = [greeting, f"{t.gettext('Amount due')}:", f"{t.gettext('Due date')}:", t.gettext("Kind regards,")]
        if email.subject != subjects[language] or not all(w in email.text for w in words):
            problems.append(f"{identifier}: not in {language}: {email.subject!r}\n{email.text}")
        html_amount, html_due = str(escape(amount)), str(escape(due))  # de_CH groups with an apostrophe: &#39;
        if html_amount not in email.html or html_due not in email.html or f'<html lang="{language}">' not in email.html:
            problems.append(f"{identifier}: HTML not in {chosen}")
        own = Locale.parse(identifier)
        if str(own) != str(chosen):
            own_due = format_date(DUE, format="long", locale=own)
            if own_due.replace(" ", NBSP) != due and (own_due in email.text or _one_word(own_due) in email.text):
                problems.append(f"{identifier}: the customer's own date {own_due!r} beside {language} words")
    assert not problems, f"{len(problems)} of {len(LOCALES)} locales wrong:\n" + "\n".join(problems[:5])


def test_the_french_amount_of_the_bug_report_stays_on_one_line() -> None:
    email = _render(Renderer(), "fr_FR", 1, 1)
    assert "72\n202,29" not in email.text
    assert any("72\u202f202,29\xa0€," in line for line in email.text.split("\n"))
    assert "Montant dû:      72\u202f202,29\xa0€" in email.text


@pytest.mark.parametrize(("customer", "fallback", "locale", "language"), [
    ("de_AT", "en_US", "de_AT", "de"),        # the language ships: regional formats kept
    ("de-at", "en_US", "de_AT", "de"),
    ("de_AT.UTF-8", "en_US", "de_AT", "de"),
    ("fr_CA", "de_DE", "fr_CA", "fr"),
    ("en_IN", "de_DE", "en_IN", "en"),
    ("es_419", "en_US", "es_419", "es"),
    ("de_XX", "en_US", "de", "de"),           # unknown region of a shipped language: the language itself
    ("ja_JP", "en_US", "en_US", "en"),        # no catalog: the fallback, words and formats
    ("ja_JP", "fr_CA", "fr_CA", "fr"),
    ("ar_EG", "de_DE", "de_DE", "de"),
    ("pt_BR", "en_GB", "en_GB", "en"),
    ("zh_Hant_TW", "en_US", "en_US", "en"),
    ("xx_YY", "de_DE", "de_DE", "de"),        # unknown or malformed: the fallback
    ("not a locale", "de_DE", "de_DE", "de"),
    ("de__AT", "en_US", "en_US", "en"),
    ("", "es_ES", "es_ES", "es"),
    (None, "es_ES", "es_ES", "es"),
])
def test_the_locale_chain(customer: str | None, fallback: str, locale: str, language: str) -> None:
    chosen = email_locale(customer, fallback)
    assert (str(chosen.locale), chosen.language) == (locale, language)


def test_the_fallback_locale_decides_words_amounts_and_dates_for_a_language_without_catalog() -> None:
    email = _render(Renderer(fallback_locale="de_DE"), "ja_JP", 7, 7)
    assert email.subject == "Rechnung INV-2026-000042 ist seit 7 Tagen überfällig"
    assert "72.202,29\xa0€" in email.text and "1.\xa0März\xa02026" in email.text
    assert "年" not in email.text + email.html and '<html lang="de">' in email.html


@pytest.mark.parametrize(("fallback", "problem"), [("ja_JP", "has no catalog"), ("xx", "is not a locale Babel knows"),
                                                    ("", "is not a locale Babel knows")])
def test_a_fallback_locale_without_catalog_is_refused_by_name(fallback: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=f"fallback locale '{fallback}' {problem}.*fallback_locale"):
        Renderer(fallback_locale=fallback)


# --------------------------------------------------------------------------- wrapping


_PIECES = ["word", "a", "longer-hyphenated-word", "72\u202f202,29\xa0€", "€\xa072.202,29", "1.\xa0März\xa02026",
           "\u200f72,202.29\xa0€", "مارس", "2026年3月1日", "請求書番号のお支払い期限が過ぎています", "x\u2060y",
           "12\u2007345", "Montant\xa0:", "INV-2026-000042"]
_GAPS = [" ", "  ", "\n", "\t", " \n "]


def _paragraph(rng: random.Random) -> str:
    parts = [rng.choice(_PIECES) for _ in range(rng.randint(0, 40))]
    return rng.choice(["", " "]) + "".join(p + rng.choice(_GAPS) for p in parts)


def test_wrap_equals_textwrap_and_never_breaks_at_a_no_break_space() -> None:
    rng = random.Random(21)
    for _ in range(3000):
        text, width = _paragraph(rng), rng.choice([10, 30, 72])
        wrapped = _wrap(text, width)
        collapsed = " ".join(text.replace("\t", " ").replace("\n", " ").split(" ")).strip()
        collapsed = " ".join(w for w in collapsed.split(" ") if w)
        assert wrapped == textwrap.fill(collapsed, width=width, break_long_words=False, break_on_hyphens=False)
        assert wrapped.replace("\n", " ") == collapsed  # nothing lost, no break anywhere but at a space
        for line in wrapped.split("\n"):
            assert not line or (line[0] not in NO_BREAK and line[-1] not in NO_BREAK)


def test_wrap_keeps_amounts_dates_and_unspaced_cjk_whole() -> None:
    amount = "72\u202f202,29\xa0€"
    text = ("D'après nos registres, la facture INV-2026-000042 d'un montant de " + amount + ", échue le "
            "1\xa0mars\xa02026, est en retard de 1 jour.")
    lines = _wrap(text).split("\n")
    assert any(amount in line for line in lines) and any("1\xa0mars\xa02026," in line for line in lines)
    cjk = "お客様の請求書" * 20 + amount + "のお支払い期限が過ぎています"
    assert _wrap(cjk) == cjk  # no space to break at: one long line, the amount inside it whole
    rtl = "الفاتورة INV-1 بمبلغ \u200f72,202.29\xa0€ " * 6
    assert all("\u200f72,202.29\xa0€" in line for line in _wrap(rtl, 30).split("\n") if "72" in line)
