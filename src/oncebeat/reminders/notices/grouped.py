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
(long, localised), ``days_past_due``, ``days_overdue``, ``payment_url`` ("" without one)), ``any_payment_url``,
``locale``, ``language`` and, in the text and HTML parts, ``subject``. Words come from the same catalogs (en, de,
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

__all__ = ["NOTICE_TEMPLATE", "render_notice"]

#: The base name of the grouped notice's templates (``<name>.subject.j2``, ``.txt.j2``, ``.html.j2``).
NOTICE_TEMPLATE = "notice_customer"


def render_notice(renderer: Renderer, *, customer_name: str, customer_locale: str | None, business_date: date,
                  rows: Sequence[Mapping[str, Any]]) -> RenderedEmail:
    """The grouped notice listing ``rows`` (reminder rows with the invoice's ``number``, ``stage``, ``currency``,
    ``amount_due`` in minor units, ``due_on``, ``payment_url``), days overdue counted on ``business_date`` (the
    customer's business date of the notice).

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
    for r in rows:
        days = (business_date - r["due_on"]).days
        items.append({
            "invoice_number": _one_line(str(r["number"])), "stage": int(r["stage"]),
            "stage_label": _stage_label(t, int(r["stage"])), "currency": r["currency"],
            "amount": _unbreakable(_format_money(int(r["amount_due"]), r["currency"], loc)),
            "amount_due": int(r["amount_due"]), "due_on": r["due_on"],
            "due_date": _unbreakable(format_date(r["due_on"], format="long", locale=loc)),
            "days_past_due": days, "days_overdue": max(0, days), "payment_url": r.get("payment_url") or "",
        })
    context: dict[str, Any] = {
        "company": renderer.company, "customer_name": _one_line(customer_name or ""), "count": len(items),
        "items": items, "any_payment_url": any(i["payment_url"] for i in items), "locale": str(loc),
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
