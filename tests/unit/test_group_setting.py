"""The ``group`` setting (issue 24 item 1): validated with a clear error, per ladder, versioned without moving the
content hash of a ladder that does not group, and rendered in every shipped language."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.ladders import LadderSettings, ladders_of
from oncebeat.reminders.notices.grouped import render_notice
from oncebeat.reminders.policy import load_policy, policy_from_dict
from oncebeat.reminders.render import Renderer


def test_a_wrong_group_is_refused_naming_the_key_and_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        policy_from_dict({"reminders": {"group": "customers"}}, "cfg.toml")
    text = str(info.value)
    assert "cfg.toml" in text and "[reminders] group" in text and '"customers"' in text
    assert 'group = "customer"' in text and '"none"' in text


def test_a_ladder_sets_its_own_group_and_a_non_grouping_ladder_keeps_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[reminders]\ngroup = "customer"\n\n[[ladders]]\nname = "big"\nmatch = { amount_min = 100 }\n'
                    'group = "none"\n', encoding="utf-8")
    policy = load_policy(path)
    settings = {s.name: s for s, _ in ladders_of(policy)}
    assert (settings["default"].group, settings["big"].group) == ("customer", "none")
    assert settings["default"].to_json()["group"] == "customer" and "group" not in settings["big"].to_json()
    assert LadderSettings.from_json(settings["default"].to_json()) == settings["default"]
    before = {k: v for k, v in settings["big"].to_json().items()}  # as a version recorded before 0017 stored it
    assert LadderSettings.from_json(before).content_hash() == settings["big"].content_hash()
    with pytest.raises(ConfigError, match=r"\[\[ladders\]\]\[1\] \(big\) group"):
        path.write_text('[[ladders]]\nname = "big"\nmatch = { amount_min = 100 }\ngroup = 1\n', encoding="utf-8")
        load_policy(path)


@pytest.mark.parametrize(("locale", "subject", "words"), [
    ("en_US", "2 invoices awaiting payment", "Days overdue"),
    ("de_DE", "2 Rechnungen warten auf Zahlung", "Mahnstufe"),
    ("fr_FR", "2 factures en attente de paiement", "Relance"),
    ("es_ES", "2 facturas pendientes de pago", "Recordatorio"),
])
def test_the_notice_is_written_in_each_shipped_language(locale: str, subject: str, words: str) -> None:
    rows = [{"number": "A-1", "stage": 7, "currency": "EUR", "amount_due": 123_450, "due_on": date(2026, 3, 1),
             "payment_url": "https://pay.example/a1"},
            {"number": "B<2>", "stage": 1, "currency": "USD", "amount_due": 500, "due_on": date(2026, 3, 7),
             "payment_url": None}]
    email = render_notice(Renderer(), customer_name="Zoë", customer_locale=locale, business_date=date(2026, 3, 8),
                          rows=rows)
    assert email.subject == subject
    assert words in email.text and "A-1" in email.text and "https://pay.example/a1" in email.text
    assert "B&lt;2&gt;" in email.html and "B<2>" not in email.html  # autoescaped
    assert email.text.count("A-1") == 1 and email.html.count("<strong>A-1</strong>") == 1


@pytest.mark.parametrize(("locale", "one", "many"), [
    ("en_US", "the following invoice is not yet paid", "the following invoices are not yet paid"),
    ("de_DE", "ist die folgende Rechnung noch nicht bezahlt", "sind die folgenden Rechnungen noch nicht bezahlt"),
    ("fr_FR", "la facture suivante n'est pas encore réglée", "les factures suivantes ne sont pas encore réglées"),
    ("es_ES", "la siguiente factura aún no ha sido pagada", "las siguientes facturas aún no han sido pagadas"),
])
def test_a_notice_of_one_invoice_speaks_of_one_invoice(locale: str, one: str, many: str) -> None:
    """Found by the fresh-eyes test: a one-invoice notice said "the following invoices are not yet paid"."""
    row = {"number": "A-1", "stage": 7, "currency": "EUR", "amount_due": 123_450, "due_on": date(2026, 3, 1),
           "payment_url": None}
    single = render_notice(Renderer(), customer_name="Zoë", customer_locale=locale, business_date=date(2026, 3, 8),
                           rows=[row])
    double = render_notice(Renderer(), customer_name="Zoë", customer_locale=locale, business_date=date(2026, 3, 8),
                           rows=[row, row | {"number": "A-2"}])
    for email, present, absent in ((single, one, many), (double, many, one)):
        text = " ".join(email.text.split()).replace("&#39;", "'")
        html = " ".join(email.html.split()).replace("&#39;", "'")
        assert present in text and present in html and absent not in text, (locale, text)
