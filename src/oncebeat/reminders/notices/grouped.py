"""The email of a grouped notice: one customer's invoices due on one business date, in one message.

With ``group = "customer"`` (:mod:`.grouping`) a notice lists each (invoice, stage) row it carries: the invoice
number, the stage ("7 days past due"), the amount due with its currency (formatted for the customer's locale), the
due date, the days overdue and, when the invoice has one, its pay link. A notice always uses these templates, also
when it lists one invoice (the stage templates are for ``group = "none"``), so a customer on a grouping ladder gets
the same kind of email every time.

Templates (a user ``templates`` folder may override each, as for the stage emails):
``notice_customer.subject.j2``, ``notice_customer.txt.j2`` and ``notice_customer.html.j2``. Variables:
``company``, ``customer_name``, ``count`` (rows listed), ``items`` (each: ``invoice_number``, ``stage``,
``stage_label``, ``currency``, ``amount`` (formatted), ``amount_due`` (minor units), ``due_on``, ``due_date``
(long, localised), ``days_past_due``, ``days_overdue``, ``payment_url`` ("" without one), ``late_fee`` (its
stage's late fee formatted, "" without one; :mod:`.fees`), ``late_fee_minor`` (0 without one), ``total_with_fee``
(amount due plus the fee, formatted; "" without one)), ``any_payment_url``, ``any_fee``, ``totals`` (one per
currency listed, in order of first appearance: ``currency``, ``amount_due`` and ``fees`` in minor units,
``total`` (amount due plus fees, formatted)), ``locale``, ``language`` and, in the text and HTML parts,
``subject``. Words come from the same catalogs (en, de,
fr, es) as the stage emails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from babel.dates import format_date
from jinja2 import TemplateError

from ...errors import ConfigError
from ..render import RenderedEmail, Renderer, _format_money, _one_line, _stage_label, _tidy_body, _unbreakable
from ..translations import email_locale, translations
from .fees import Fee

__all__ = ["NOTICE_TEMPLATE", "render_notice"]

#: The base name of the grouped notice's templates (``<name>.subject.j2``, ``.txt.j2``, ``.html.j2``).
NOTICE_TEMPLATE = "notice_customer"


def render_notice(renderer: Renderer, *, customer_name: str, customer_locale: str | None, business_date: date,
                  rows: Sequence[Mapping[str, Any]], fees: Mapping[int, Fee] | None = None) -> RenderedEmail:
    """The grouped notice listing ``rows`` (reminder rows with ``id``, the invoice's ``number``, ``stage``,
    ``currency``, ``amount_due`` in minor units, ``due_on``, ``payment_url``), days overdue counted on
    ``business_date`` (the customer's business date of the notice). ``fees``: reminder id -> the late fee its row
    shows (same currency as its invoice; rows without one have none).

    Raises:
        ConfigError: a template is missing or broken (named), or it renders an empty subject.
        ValueError: ``rows`` is empty (a notice lists at least one invoice).
    """
    if not rows:
        raise ValueError("a notice lists at least one invoice")
    chosen = email_locale(customer_locale, renderer.fallback_locale)
    loc, language = chosen.locale, chosen.language
    t = translations(language)
    items = []
    totals: dict[str, list[int]] = {}  # currency -> [amount due, fees], minor units
    for r in rows:
        days = (business_date - r["due_on"]).days
        fee = (fees or {}).get(int(r["id"])) if r.get("id") is not None else None
        late = fee.amount if fee is not None else 0
        total = totals.setdefault(str(r["currency"]), [0, 0])
        total[0] += int(r["amount_due"])
        total[1] += late
        items.append({
            "invoice_number": _one_line(str(r["number"])), "stage": int(r["stage"]),
            "stage_label": _stage_label(t, int(r["stage"])), "currency": r["currency"],
            "amount": _unbreakable(_format_money(int(r["amount_due"]), r["currency"], loc)),
            "amount_due": int(r["amount_due"]), "due_on": r["due_on"],
            "due_date": _unbreakable(format_date(r["due_on"], format="long", locale=loc)),
            "days_past_due": days, "days_overdue": max(0, days), "payment_url": r.get("payment_url") or "",
            "late_fee_minor": late,
            "late_fee": _unbreakable(_format_money(late, r["currency"], loc)) if late else "",
            "total_with_fee": _unbreakable(_format_money(int(r["amount_due"]) + late, r["currency"], loc))
            if late else "",
        })
    context: dict[str, Any] = {
        "company": renderer.company, "customer_name": _one_line(customer_name or ""), "count": len(items),
        "items": items, "any_payment_url": any(i["payment_url"] for i in items),
        "any_fee": any(i["late_fee_minor"] for i in items),
        "totals": [{"currency": c, "amount_due": due, "fees": fee,
                    "total": _unbreakable(_format_money(due + fee, c, loc))} for c, (due, fee) in totals.items()],
        "locale": str(loc),
        "language": language,
    }
    subject = _one_line(_part(renderer, "subject", language, context))
    if not subject:
        raise ConfigError(f"template {NOTICE_TEMPLATE}.subject.j2: renders an empty subject. Fix the template.")
    context["subject"] = subject
    return RenderedEmail(subject=subject, text=_tidy_body(_part(renderer, "txt", language, context)),
                         html=_tidy_body(_part(renderer, "html", language, context)))


def _part(renderer: Renderer, part: str, language: str, context: dict[str, Any]) -> str:
    name = f"{NOTICE_TEMPLATE}.{part}.j2"
    try:
        return renderer._env(part, language).get_template(name).render(context)
    except TemplateError as exc:
        where = getattr(exc, "filename", None) or name
        raise ConfigError(f"template {where}: {exc}. Fix the template (see the variables in "
                          "oncebeat.reminders.notices.grouped).") from exc
