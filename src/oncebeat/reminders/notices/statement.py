"""A statement of account per customer, as a PDF: open invoices, aging buckets and totals, per currency.

What it lists, as of a business date ``as_of`` (the reminder's): every invoice of the customer whose status is
``open``, grouped by currency (never summed across currencies), oldest due date first, with its days overdue
(calendar days past the due date, as the aging report counts them), the total open per currency and that total
split into the aging report's buckets (``current``, ``1-30``, ``31-60``, ``61-90``, ``90+`` days past due).
Amounts are minor units formatted in the customer's locale (Babel); headings and notes are in the customer's language
when it ships a catalog (English, German, French, Spanish), else in the policy's fallback locale, as the reminder
emails are (the words live in the same catalogs: ``make translations``).

The HTML comes from ``templates/statement.html.j2`` (Jinja2, autoescaped: a customer name or invoice number can
carry no markup), and WeasyPrint renders it (imported only here, when a statement is made: a missing Pango is a
clear :class:`~.attachments.AttachmentError`, not an import error at start-up). WeasyPrint fetches nothing: the
template needs no file or URL, and any reference is refused.

Example::

    pdf = statement_pdf(store, email="ana@example.com", customer_name="Ana", locale="en_US",
                        company="Example Co", as_of=date(2026, 3, 1))
    pdf.filename   # 'statement-2026-03-01.pdf'
"""

from __future__ import annotations

from datetime import date
from functools import lru_cache
from typing import Any

from babel.dates import format_date
from jinja2 import Environment, PackageLoader, select_autoescape

from ...store import Store
from ..render import format_money
from ..translations import DEFAULT_FALLBACK_LOCALE, email_locale, translations
from .attachments import Attachment, AttachmentError

__all__ = ["BUCKETS", "statement_html", "statement_pdf", "statement_rows"]

#: The aging buckets (labels and the highest days past due each holds), as the aging report's.
BUCKETS: tuple[tuple[str, int | None], ...] = (("current", 0), ("1-30", 30), ("31-60", 60), ("61-90", 90),
                                                ("90+", None))


def _bucket(days: int) -> str:
    return next(label for label, top in BUCKETS if top is None or days <= top)


@lru_cache(maxsize=8)
def _env(language: str) -> Environment:
    """The statement's environment in ``language`` (one of the shipped catalogs: the reminder emails' words)."""
    env = Environment(loader=PackageLoader("oncebeat.reminders.notices", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True), auto_reload=False,
                      extensions=["jinja2.ext.i18n"])
    env.install_gettext_translations(translations(language), newstyle=True)  # type: ignore[attr-defined]
    return env


def statement_rows(store: Store, *, email: str, as_of: date) -> list[dict[str, Any]]:
    """Per currency (alphabetical): ``{"currency", "invoices": [{number, issued_on, due_on, days, amount_due}],
    "total", "buckets": {label: amount}}``, amounts in minor units, ``days`` = calendar days past due on
    ``as_of`` (0 or less: not yet due)."""
    out: dict[str, dict[str, Any]] = {}
    for r in store.read("statement_invoices", email=email):
        c = out.setdefault(r["currency"], {"currency": r["currency"], "invoices": [], "total": 0,
                                           "buckets": {label: 0 for label, _ in BUCKETS}})
        days = (as_of - r["due_on"]).days
        c["invoices"].append({"number": r["number"], "issued_on": r["issued_on"], "due_on": r["due_on"],
                              "days": days, "amount_due": int(r["amount_due"])})
        c["total"] += int(r["amount_due"])
        c["buckets"][_bucket(days)] += int(r["amount_due"])
    return [out[k] for k in sorted(out)]


def statement_html(rows: list[dict[str, Any]], *, customer_name: str, email: str, locale: str | None, company: str,
                   as_of: date, fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> str:
    """The statement's HTML (autoescaped) for :func:`statement_rows`' ``rows``, in the language and formats the
    customer's reminder emails use (:func:`~oncebeat.reminders.translations.email_locale`: the customer's
    ``locale`` when its language ships a catalog, else the policy's ``fallback_locale``)."""
    chosen = email_locale(locale, fallback_locale)
    loc = chosen.locale
    tag = str(loc)

    def money(amount: int, currency: str) -> str:
        return format_money(amount, currency, tag)

    def day(d: date) -> str:
        return format_date(d, format="medium", locale=loc)

    currencies = [{"currency": c["currency"], "total_text": money(c["total"], c["currency"]),
                   "invoices": [i | {"issued_text": day(i["issued_on"]), "due_text": day(i["due_on"]),
                                     "amount_text": money(i["amount_due"], c["currency"])} for i in c["invoices"]],
                   "buckets": [{"key": label, "amount_text": money(amount, c["currency"])}
                               for label, amount in c["buckets"].items()]}
                  for c in rows]
    return _env(chosen.language).get_template("statement.html.j2").render(
        lang=loc.language, company=company, customer_name=customer_name, customer_email=email,
        as_of_text=day(as_of), currencies=currencies)


def _refuse_fetch(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    raise ValueError(f"a statement loads no resource ({url!r})")


def html_to_pdf(html: str) -> bytes:
    """``html`` rendered to PDF bytes by WeasyPrint (no resource fetched).

    Raises:
        AttachmentError: WeasyPrint or its system libraries (Debian's Pango) are missing.
    """
    try:
        from weasyprint import HTML  # type: ignore[import-untyped]
    except (ImportError, OSError) as exc:  # OSError: WeasyPrint is there, Pango (libpango, libpangoft2) is not
        raise AttachmentError("statement PDFs need WeasyPrint and Debian's Pango: apt-get install libpango-1.0-0 "
                              "libpangoft2-1.0-0 fonts-dejavu-core (as .ci/run does); the import said: "
                              f"{exc}") from None
    pdf = HTML(string=html, url_fetcher=_refuse_fetch).write_pdf()
    assert isinstance(pdf, bytes)
    return pdf


def statement_pdf(store: Store, *, email: str, customer_name: str, locale: str | None, company: str,
                  as_of: date, fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> Attachment:
    """The statement of account of the customer with ``email`` as of ``as_of``, as an ``application/pdf``
    attachment named ``statement-<as_of>.pdf``.

    Raises:
        AttachmentError: WeasyPrint cannot run (see :func:`html_to_pdf`).
    """
    rows = statement_rows(store, email=email, as_of=as_of)
    html = statement_html(rows, customer_name=customer_name, email=email, locale=locale, company=company,
                          as_of=as_of, fallback_locale=fallback_locale)
    return Attachment(filename=f"statement-{as_of.isoformat()}.pdf", content_type="application/pdf",
                      data=html_to_pdf(html))
