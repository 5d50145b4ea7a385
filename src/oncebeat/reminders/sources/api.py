"""Customers, invoices and payments sent as JSON to the HTTP API: the CSV import's checks, named by JSON pointer.

An API write is a JSON object holding one array, ``{"invoices": [...]}``, ``{"payments": [...]}`` or
``{"customers": [...]}``, of at most :data:`MAX_ITEMS` objects. Invoice and payment objects use the columns of
the CSV files as field names (``invoice_number``, ``amount_due``, …, :data:`INVOICE_FIELDS`,
:data:`PAYMENT_FIELDS`) and are checked by the very row checkers of the CSV import
(:class:`~.invoices.InvoiceRowChecker`, :class:`~.payments.PaymentRowChecker`) and its rules across rows
(:func:`~.invoices.duplicate_problems`, :func:`~.invoices.customer_rule`): the same values are accepted and
refused with the same reasons. Values are JSON strings (an amount too: ``"1234.50"`` in major units, as in the
CSV, never a binary float) or null (absent).

Every problem is reported (never only the first) as a :class:`FieldProblem` whose ``pointer`` is an RFC 6901
JSON pointer into the request (``/invoices/3/amount_due``); nothing here touches the database. The database
rules (a payment for an unknown invoice, a paid invoice never reopened by a stale write) run where the rows are
applied (:meth:`~oncebeat.reminders.service.ReminderService.unpayable`, ``upsert_invoice``).

Example::

    invoices, customers = read_invoices({"invoices": [{"invoice_number": "INV-1", ...}]}, today=date(2026, 3, 1))
    # raises RequestRejected([FieldProblem(pointer="/invoices/0/due_on", message="... is before issued_on ...")])
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from ...errors import OncebeatError
from ..conversions import length_reason, text_reason
from ..model import Customer, Invoice, Payment
from ..segments import check_country, check_tags
from .invoices import (
    STANDARD_COLUMNS,
    CustomerRow,
    InvoiceRowChecker,
    customer_rule,
    duplicate_problems,
)
from .payments import PAYMENT_COLUMNS, PAYMENT_OPTIONAL_COLUMNS, PaymentRowChecker
from .problems import RowProblem
from .values import check_locale, check_zone, email_reason

__all__ = ["CUSTOMER_FIELDS", "INVOICE_FIELDS", "MAX_ITEMS", "PAYMENT_FIELDS", "FieldProblem", "RequestRejected",
           "read_customers", "read_invoices", "read_payments"]

#: Objects per request at most (a larger batch is refused whole: split it).
MAX_ITEMS = 1000
#: Problems listed in one answer at most (the count says how many there were).
MAX_PROBLEMS = 100
INVOICE_FIELDS: tuple[str, ...] = STANDARD_COLUMNS
PAYMENT_FIELDS: tuple[str, ...] = PAYMENT_COLUMNS + PAYMENT_OPTIONAL_COLUMNS
CUSTOMER_FIELDS: tuple[str, ...] = ("email", "name", "locale", "tz", "country", "tags")
_LINE = re.compile(r"\bline (\d+)\b")


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldProblem:
    """One problem in a request: where (a JSON pointer, ``""`` for the whole body) and what is wrong."""

    pointer: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """``{"pointer", "field", "message"}`` (``field``: the pointer's last name, ``""`` for the body)."""
        last = self.pointer.rsplit("/", 1)[-1] if self.pointer else ""
        return {"pointer": self.pointer, "field": "" if last.isdigit() else last, "message": self.message}

    def __str__(self) -> str:
        return f"{self.pointer or '(body)'}: {self.message}"


class RequestRejected(OncebeatError):
    """A request with problems; nothing was applied. ``problems``: the first :data:`MAX_PROBLEMS`; ``total``."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        self.problems = list(problems[:MAX_PROBLEMS])
        self.total = len(problems)
        more = f" (and {self.total - 1} more)" if self.total > 1 else ""
        super().__init__(f"{problems[0]}{more}; nothing was applied" if problems else "the request was refused")


def _pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _items(body: Any, collection: str, fields: Sequence[str], problems: list[FieldProblem]
           ) -> list[tuple[int, dict[str, str]]]:
    """``(index, {field: text})`` of each well-formed object of ``body[collection]`` (absent and null fields
    left out); a problem for every other shape: not an object, a missing or empty array, too many objects,
    an unknown field, a value that is not a string."""
    if not isinstance(body, dict):
        problems.append(FieldProblem(pointer="", message=f'the body must be a JSON object such as {{"{collection}": '
                                                         "[…]}"))
        return []
    for name in body:
        if name != collection:
            problems.append(FieldProblem(pointer=_pointer(name), message=f"unknown field; the body holds only "
                                                                         f'"{collection}"'))
    items = body.get(collection)
    if not isinstance(items, list) or not items:
        problems.append(FieldProblem(pointer=_pointer(collection),
                                     message=f"required: an array of 1 to {MAX_ITEMS} objects"))
        return []
    if len(items) > MAX_ITEMS:
        problems.append(FieldProblem(pointer=_pointer(collection), message=f"holds {len(items)} objects; at most "
                                                                           f"{MAX_ITEMS} per request: split it"))
        return []
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(FieldProblem(pointer=_pointer(collection, n), message="must be an object"))
            continue
        values: dict[str, str] = {}
        for name, value in item.items():
            where = _pointer(collection, n, name)
            if name not in fields:
                problems.append(FieldProblem(pointer=where, message=f"unknown field; the fields are "
                                                                    f"{', '.join(fields)}"))
            elif value is None:
                continue
            elif not isinstance(value, str):
                hint = ' (an amount too: "1234.50" in major units, never a JSON number)' if name == "amount_due" \
                    else ""
                problems.append(FieldProblem(pointer=where, message=f"must be a string{hint}"))
            elif any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
                problems.append(FieldProblem(pointer=where, message="is not valid Unicode (a lone surrogate)"))
            else:
                values[name] = value
        out.append((n, values))
    return out


def _from_rows(found: Sequence[RowProblem], collection: str) -> list[FieldProblem]:
    """The CSV checkers' problems as field problems: a row's "line" is the item's index."""
    return [FieldProblem(pointer=_pointer(collection, p.line, *([p.column] if p.column else [])),
                         message=_LINE.sub(lambda m: f"item {_pointer(collection, int(m.group(1)))}",
                                           p.reason if p.value is None else f"{p.value!r} {p.reason}"))
            for p in found]


def _add_row_problems(problems: list[FieldProblem], found: Sequence[RowProblem], collection: str) -> None:
    """Add the checkers' problems, except on a field already refused for its JSON type (which the checker saw as
    empty: "required value is empty" would repeat it)."""
    typed = {p.pointer for p in problems}
    problems.extend(p for p in _from_rows(found, collection) if p.pointer not in typed)


def _raise_if(problems: list[FieldProblem]) -> None:
    if problems:
        raise RequestRejected(sorted(problems, key=lambda p: _order(p.pointer)))


def _order(pointer: str) -> tuple[Any, ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pointer.split("/"))


def _checked(items: list[tuple[int, dict[str, str]]], fields: tuple[str, ...], checker_type: Any,
             today: date | None, found: list[RowProblem]) -> list[tuple[dict[str, str], Any]]:
    """Each item checked as a CSV row of ``fields`` is (the same checker, item ``n`` as line ``n``): the items that
    parse, with their values, in order; every problem (and each number given twice) appended to ``found``."""
    header = list(fields)
    checker = checker_type(source="", header=header, positions={c: i for i, c in enumerate(header)}, computed=(),
                           today=today)
    staged = []
    for n, values in items:
        row, row_problems = checker.check(n, [values.get(c, "") for c in header])
        found.extend(row_problems)
        if row is not None:
            staged.append((values, row))
    found.extend(duplicate_problems(sorted((row.number, row.line) for _, row in staged if row.number), ""))
    return staged


def read_invoices(body: Any, *, today: date | None) -> tuple[list[Invoice], list[Customer]]:
    """The invoices of ``{"invoices": [...]}`` and the customers they name, checked as CSV rows are.

    Args:
        body: the decoded JSON body.
        today: payments dated after ``today`` + 1 day are refused (None: no such check).
    Raises:
        RequestRejected: every problem found (nothing to apply).
    """
    problems: list[FieldProblem] = []
    items = _items(body, "invoices", INVOICE_FIELDS, problems)
    found: list[RowProblem] = []
    # A key the item leaves out keeps the stored value (records.py), as a CSV without the column does; a key
    # given as "" clears it.
    staged = [dataclasses.replace(row, x_locale=row.x_locale if "customer_locale" in values else None,
                                  x_tz=row.x_tz if "customer_tz" in values else None,
                                  x_country=row.x_country if "customer_country" in values else None,
                                  x_tags=row.x_tags if "customer_tags" in values else None,
                                  x_payment_url=row.x_payment_url if "payment_url" in values else None,
                                              x_pdf_path=row.x_pdf_path if "pdf_path" in values else None)
              for values, row in _checked(items, INVOICE_FIELDS, InvoiceRowChecker, today, found)]
    bad = {p.line for p in found}
    by_email = sorted((CustomerRow(email=s.email, line=s.line, name=s.name, x_locale=s.x_locale, x_tz=s.x_tz,
                                   x_country=s.x_country, x_tags=s.x_tags, bad=s.line in bad)
                       for s in staged if s.email and s.name),
                      key=lambda r: (r.email, r.line))
    customers = []
    for item in customer_rule(by_email, ""):
        if isinstance(item, RowProblem):
            found.append(item)
        else:
            customers.append(item)
    _add_row_problems(problems, found, "invoices")
    _raise_if(problems)
    return [s.invoice() for s in staged], customers


def read_payments(body: Any, *, today: date | None) -> list[Payment]:
    """The payments of ``{"payments": [...]}``, checked as CSV rows are (each names an invoice once).

    Raises:
        RequestRejected: every problem found (nothing to apply).
    """
    problems: list[FieldProblem] = []
    items = _items(body, "payments", PAYMENT_FIELDS, problems)
    found: list[RowProblem] = []
    staged = [row for _, row in _checked(items, PAYMENT_FIELDS, PaymentRowChecker, today, found)]
    _add_row_problems(problems, found, "payments")
    _raise_if(problems)
    return [s.payment() for s in staged]


def read_customers(body: Any) -> list[Customer]:
    """The customers of ``{"customers": [...]}``: ``email`` and ``name`` required, ``locale``, ``tz`` (an IANA
    zone), ``country`` (ISO 3166-1 alpha-2) and ``tags`` (``"enterprise;vip"``) optional: left out, a known
    customer keeps its stored value (a new one gets en_US, the schedule's zone, no country, no tags); ``""``
    clears it. Each email once per request.

    Raises:
        RequestRejected: every problem found (nothing to apply).
    """
    problems: list[FieldProblem] = []
    items = _items(body, "customers", CUSTOMER_FIELDS, problems)
    columns = {"email": "customer_email", "name": "customer_name", "locale": "customer_locale", "tz": "customer_tz",
               "country": "customer_country", "tags": "customer_tags"}
    seen: dict[str, int] = {}
    customers = []
    for n, values in items:
        def problem(name: str, message: str, n: int = n) -> None:
            problems.append(FieldProblem(pointer=_pointer("customers", n, name), message=message))

        clean: dict[str, str] = {}
        for name in CUSTOMER_FIELDS:
            text = values.get(name, "").strip()
            reason = text_reason(text, allow_joiners=name == "name") or length_reason(columns[name], text)
            if reason:
                problem(name, reason)
            elif text:
                clean[name] = " ".join(text.split()) if name == "name" else text
            elif name in ("email", "name"):
                problem(name, "required value is empty")
        email = clean.get("email", "")
        if email and (reason := email_reason(email)):
            problem("email", f"{email!r} {reason}")
            email = ""
        email = email.lower()
        if email in seen:
            problem("email", f"{email!r} is also given at {_pointer('customers', seen[email])}; one object per "
                             "customer")
            email = ""
        elif email:
            seen[email] = n
        # A key left out keeps the stored value (None), "" clears it (records.py: the rule of every source).
        given: dict[str, str | None] = {}
        valid = True
        for key, check in (("locale", check_locale), ("tz", check_zone), ("country", check_country),
                           ("tags", check_tags)):
            if key not in values:
                given[key] = None
            elif key not in clean:
                given[key] = ""
            else:
                given[key], reason = check(clean[key])
                if reason:
                    problem(key, f"{clean[key]!r} {reason}")
                    valid = False
        if email and "name" in clean and valid:
            customers.append(Customer(email=email, name=clean["name"], locale=given["locale"], tz=given["tz"],
                                      country=given["country"], tags=given["tags"]))
    _raise_if(problems)
    return customers


def problem_list(problems: Sequence[FieldProblem]) -> list[Mapping[str, str]]:
    """The problems as JSON objects (``pointer``, ``field``, ``message``)."""
    return [p.as_dict() for p in problems]
