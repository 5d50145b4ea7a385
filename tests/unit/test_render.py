"""Reminder email rendering: money, locales, template selection, escaping."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.render import (
    BUILTIN_TEMPLATES,
    RenderedEmail,
    Renderer,
    format_money,
    is_known_currency,
    minor_units,
    resolve_locale,
    template_kind,
    template_names,
)

NBSP = "\xa0"
EVIL = "Eve <script>alert(1)</script>\r\nBcc: x@y"


def render(renderer: Renderer | None = None, **overrides) -> RenderedEmail:
    args = {
        "invoice_number": "INV-1042",
        "customer_name": "Ada Lovelace",
        "customer_locale": "en_US",
        "currency": "USD",
        "amount_due": 123450,
        "due_on": date(2025, 3, 4),
        "issued_on": date(2025, 2, 2),
        "stage": 7,
        "days_past_due": 7,
    }
    args.update(overrides)
    return (renderer or Renderer()).render(**args)


# --------------------------------------------------------------------------- money


@pytest.mark.parametrize(
    ("minor", "currency", "locale", "expected"),
    [
        (123450, "USD", "en_US", "$1,234.50"),
        (5, "USD", "en_US", "$0.05"),
        (-5, "USD", "en_US", "-$0.05"),
        (123450, "EUR", "de_DE", f"1.234,50{NBSP}€"),
        (1234, "JPY", "en_US", "¥1,234"),
        (12345, "BHD", "en_US", "BHD12.345"),
    ],
)
def test_money_is_formatted_from_minor_units_with_the_currency_precision(minor, currency, locale, expected):
    assert format_money(minor, currency, locale).replace(NBSP, "") == expected.replace(NBSP, "")


def test_euros_in_german_keep_babels_non_breaking_space():
    assert format_money(123450, "EUR", "de_DE") == "1.234,50\xa0€"


def test_yen_have_no_decimals_and_dinars_three():
    assert format_money(1234, "JPY", "ja_JP").endswith("1,234")
    assert "12.345" in format_money(12345, "BHD", "en_US")


def test_very_large_amounts_are_exact():
    assert format_money(10**30 + 1, "USD", "en_US") == "$10,000,000,000,000,000,000,000,000,000.01"


def test_money_in_an_unknown_locale_falls_back_to_en_us():
    assert format_money(123450, "USD", "xx_YY") == "$1,234.50"
    assert format_money(123450, "USD", "") == "$1,234.50"


def test_a_locale_with_a_hyphen_is_understood():
    assert format_money(123450, "EUR", "de-DE") == "1.234,50\xa0€"


def test_money_refuses_floats_and_unknown_currencies():
    with pytest.raises(TypeError):
        format_money(12.5, "USD", "en_US")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown currency 'XYZ'"):
        format_money(100, "XYZ", "en_US")


@pytest.mark.parametrize(
    ("amount", "currency", "minor"),
    [
        ("12.50", "USD", 1250),
        ("12", "USD", 1200),
        (" 0.5 ", "USD", 50),
        (Decimal("12.5"), "USD", 1250),
        ("1200", "JPY", 1200),
        ("100.00", "JPY", 100),
        ("1.234", "BHD", 1234),
        ("-3.10", "EUR", -310),
        ("99999999999999999999999999999999.99", "USD", 9999999999999999999999999999999999),
    ],
)
def test_decimal_amounts_become_minor_units(amount, currency, minor):
    assert minor_units(amount, currency) == minor


@pytest.mark.parametrize(("amount", "currency"), [("12.505", "USD"), ("100.5", "JPY"), ("1.2345", "BHD"), (Decimal("0.001"), "EUR")])
def test_more_decimals_than_the_currency_allows_is_a_value_error(amount, currency):
    with pytest.raises(ValueError, match=f"more decimals than {currency} allows"):
        minor_units(amount, currency)


@pytest.mark.parametrize("amount", ["1,234.50", "1e3", "NaN", "", "abc", "1 000", Decimal("Infinity")])
def test_malformed_amounts_are_a_value_error(amount):
    with pytest.raises(ValueError):
        minor_units(amount, "USD")


@pytest.mark.parametrize("currency", ["XYZ", "usd", "US", "", "EURO"])
def test_unknown_currencies_are_a_value_error_for_minor_units(currency):
    with pytest.raises(ValueError, match="unknown currency"):
        minor_units("1.00", currency)


def test_floats_are_refused_by_minor_units():
    with pytest.raises(TypeError, match="float"):
        minor_units(12.5, "USD")  # type: ignore[arg-type]


def test_known_currencies_are_upper_case_iso_codes():
    assert is_known_currency("USD") and is_known_currency("JPY") and is_known_currency("BHD")
    assert not is_known_currency("usd")
    assert not is_known_currency("XYZ")
    assert not is_known_currency(None)  # type: ignore[arg-type]


def test_unknown_locales_resolve_to_en_us():
    assert str(resolve_locale("zz_ZZ")) == "en_US"
    assert str(resolve_locale(None)) == "en_US"
    assert str(resolve_locale("fr_CA")) == "fr_CA"


# --------------------------------------------------------------------------- template selection


@pytest.mark.parametrize(
    ("stage", "kind"),
    [(-30, "courtesy"), (-1, "courtesy"), (0, "courtesy"), (1, "first"), (6, "first"), (7, "second"), (29, "second"), (30, "final"), (365, "final")],
)
def test_stages_map_to_template_kinds(stage, kind):
    assert template_kind(stage) == kind


def test_the_exact_stage_template_is_tried_before_the_kind():
    assert template_names(14, "html") == ["reminder_stage_14.html.j2", "reminder_second.html.j2"]
    assert template_names(-3, "txt") == ["reminder_stage_-3.txt.j2", "reminder_courtesy.txt.j2"]


def test_every_kind_has_built_in_templates_for_every_part():
    for kind in ("courtesy", "first", "second", "final"):
        for part in ("subject", "txt", "html"):
            assert (BUILTIN_TEMPLATES / f"reminder_{kind}.{part}.j2").is_file()


# --------------------------------------------------------------------------- subjects


@pytest.mark.parametrize(
    ("stage", "days", "subject"),
    [
        (-3, -3, "Invoice INV-1042 is due in 3 days"),
        (-1, -1, "Invoice INV-1042 is due in 1 day"),
        (0, 0, "Invoice INV-1042 is due today"),
        (1, 1, "Invoice INV-1042 is 1 day past due"),
        (7, 7, "Invoice INV-1042 is 7 days past due"),
        (14, 16, "Invoice INV-1042 is 16 days past due"),
        (30, 30, "Invoice INV-1042 is 30 days past due - action required"),
    ],
)
def test_the_subject_names_the_invoice_and_the_days(stage, days, subject):
    assert render(stage=stage, days_past_due=days).subject == subject


def test_each_kind_has_its_own_wording():
    bodies = {render(stage=s, days_past_due=s).text.split("\n\n")[1] for s in (-3, 1, 7, 30)}
    assert len(bodies) == 4


def test_the_email_gives_amount_due_date_days_and_the_already_paid_note():
    email = render(stage=7, days_past_due=7)
    for part in (email.text, email.html):
        assert "INV-1042" in part
        assert "$1,234.50" in part
        assert f"March{NBSP}4,{NBSP}2025" in part  # a date is one word: no line break inside
        assert "7 days past due" in part
        assert "already paid, please ignore" in part
        assert "How to pay" in part
        assert "Example Co" in part
    assert "Dear Ada Lovelace," in email.text


def test_a_courtesy_note_does_not_say_overdue():
    email = render(stage=-3, days_past_due=-3)
    assert "overdue" not in email.text.lower()
    assert "past due" not in email.text


def test_amounts_and_dates_follow_the_customer_locale():
    email = render(customer_locale="de_DE", currency="EUR")
    assert "1.234,50\xa0€" in email.text
    assert f"4.{NBSP}März{NBSP}2025" in email.text
    assert "1.234,50\xa0€" in email.html


def test_an_unknown_customer_locale_falls_back_to_en_us():
    email = render(customer_locale="not-a-locale")
    assert "$1,234.50" in email.text
    assert f"March{NBSP}4,{NBSP}2025" in email.text


def test_the_company_is_shown_in_the_signature():
    email = render(Renderer(company="Acme\nGmbH"))
    assert email.text.rstrip().endswith("Acme GmbH")
    assert "Acme GmbH" in email.html


def test_bodies_use_unix_newlines_and_end_with_one_newline():
    email = render()
    for part in (email.text, email.html):
        assert "\r" not in part
        assert part.endswith("\n") and not part.endswith("\n\n")


# --------------------------------------------------------------------------- escaping and injection


def test_a_hostile_customer_name_is_escaped_in_html():
    html = render(customer_name=EVIL).html
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_hostile_customer_name_cannot_add_lines_to_subject_or_text():
    email = render(customer_name=EVIL, invoice_number="INV-1\r\nBcc: victim@example.com")
    assert "\r" not in email.subject and "\n" not in email.subject
    assert "\r" not in email.text
    assert not any(line.startswith("Bcc:") for line in email.text.splitlines())
    assert "Dear Eve <script>alert(1)</script> Bcc: x@y," in email.text
    assert email.subject == "Invoice INV-1 Bcc: victim@example.com is 7 days past due"


def test_a_subject_template_with_line_breaks_is_collapsed_to_one_line(tmp_path):
    (tmp_path / "reminder_second.subject.j2").write_text("Invoice\r\n  {{ invoice_number }}\n\n{{ status_text }}\n", encoding="utf-8")
    assert render(Renderer(tmp_path)).subject == "Invoice INV-1042 is 7 days past due"


# --------------------------------------------------------------------------- overrides


def test_a_template_in_the_user_folder_wins_over_the_built_in_one(tmp_path):
    (tmp_path / "reminder_second.txt.j2").write_text("Custom {{ invoice_number }} {{ amount }}\n", encoding="utf-8")
    email = render(Renderer(tmp_path))
    assert email.text == "Custom INV-1042 $1,234.50\n"
    assert email.subject == "Invoice INV-1042 is 7 days past due"  # other parts stay built-in
    assert "<!DOCTYPE html>" in email.html


def test_a_user_template_in_html_is_autoescaped(tmp_path):
    (tmp_path / "reminder_first.html.j2").write_text("<p>{{ customer_name }}</p>\n", encoding="utf-8")
    (tmp_path / "reminder_first.txt.j2").write_text("{{ customer_name }}\n", encoding="utf-8")
    email = render(Renderer(tmp_path), stage=1, days_past_due=1, customer_name="<b>Bo & Co</b>")
    assert email.html == "<p>&lt;b&gt;Bo &amp; Co&lt;/b&gt;</p>\n"
    assert email.text == "<b>Bo & Co</b>\n"


def test_an_exact_stage_template_wins_over_the_kind_template(tmp_path):
    (tmp_path / "reminder_second.html.j2").write_text("<p>second</p>\n", encoding="utf-8")
    (tmp_path / "reminder_stage_14.html.j2").write_text("<p>stage {{ stage }}</p>\n", encoding="utf-8")
    renderer = Renderer(tmp_path)
    assert render(renderer, stage=14, days_past_due=14).html == "<p>stage 14</p>\n"
    assert render(renderer, stage=7, days_past_due=7).html == "<p>second</p>\n"
    assert renderer.template_path(14, "html") == str(tmp_path / "reminder_stage_14.html.j2")
    assert renderer.template_path(14, "txt") == str(BUILTIN_TEMPLATES / "reminder_second.txt.j2")


def test_a_negative_exact_stage_template_is_found(tmp_path):
    (tmp_path / "reminder_stage_-3.subject.j2").write_text("Heads up: {{ invoice_number }} {{ status_text }}", encoding="utf-8")
    assert render(Renderer(tmp_path), stage=-3, days_past_due=-3).subject == "Heads up: INV-1042 is due in 3 days"


def test_the_layout_can_be_overridden_too(tmp_path):
    (tmp_path / "layout.txt.j2").write_text("{% block message %}{% endblock %}\n-- {{ company }}\n", encoding="utf-8")
    text = render(Renderer(tmp_path, company="Acme")).text
    assert text.endswith("-- Acme\n")
    assert "We have not yet received payment" in text


def test_a_typo_in_a_template_raises_a_config_error_naming_the_file(tmp_path):
    (tmp_path / "reminder_second.txt.j2").write_text("{{ amonut }}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"reminder_second\.txt\.j2: 'amonut' is undefined"):
        render(Renderer(tmp_path))


def test_a_template_syntax_error_raises_a_config_error(tmp_path):
    (tmp_path / "reminder_second.html.j2").write_text("{% if %}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"reminder_second\.html\.j2"):
        render(Renderer(tmp_path))


def test_a_missing_templates_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        Renderer(tmp_path / "nope")


def test_an_empty_subject_is_refused(tmp_path):
    (tmp_path / "reminder_second.subject.j2").write_text("  \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="empty subject"):
        render(Renderer(tmp_path))


def test_the_built_in_templates_render_for_every_stage_of_a_long_ladder():
    renderer = Renderer()
    for stage in (-365, -3, 0, 1, 6, 7, 29, 30, 3650):
        email = render(renderer, stage=stage, days_past_due=stage)
        assert email.subject and email.text and email.html
        assert Path(renderer.template_path(stage, "html")).parent == BUILTIN_TEMPLATES


def test_one_lines_control_class_is_exactly_the_categories_cc_zl_zp() -> None:
    """The compiled class replaced a per-character ``unicodedata.category`` check: same set, every code point."""
    import sys
    import unicodedata

    from oncebeat.reminders.render import _CONTROL_OR_BREAK

    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        expected = unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        assert (_CONTROL_OR_BREAK.fullmatch(ch) is not None) == expected, hex(cp)


def test_templates_are_read_once_per_process(tmp_path: Path) -> None:
    """An edited template file takes effect with a new Renderer (a worker restart), never mid-run."""
    (tmp_path / "reminder_second.subject.j2").write_text("Old {{ invoice_number }}", encoding="utf-8")
    renderer = Renderer(tmp_path)
    assert render(renderer).subject == "Old INV-1042"
    (tmp_path / "reminder_second.subject.j2").write_text("New {{ invoice_number }}", encoding="utf-8")
    assert render(renderer).subject == "Old INV-1042"
    assert render(Renderer(tmp_path)).subject == "New INV-1042"
    assert renderer._env("subject").auto_reload is False
