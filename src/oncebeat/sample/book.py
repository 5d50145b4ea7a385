"""Sample invoice books for the demo and the simulator: generated, converted from Chinook, or read from CSV.

A :class:`Book` is the state of a company's receivables at the start of its
reference day ``as_of``: customers, invoices (``open``, ``void``, or ``paid``
when the payment came before ``as_of``) and the payments that will arrive on
or after ``as_of`` (the invoice is still ``open`` in ``invoices``; the
simulator applies each payment on its ``paid_on`` date).

Everything is deterministic: the same arguments give the same book. Random
choices come from ``random.Random(seed)`` only, never from the global
generator or the wall clock.

Script use (writes the standard invoice CSV, see ``importing.INVOICE_CSV_HELP``)::

    python -m oncebeat.sample.book chinook OUT.csv [--data DIR] [--seed 7] [--paid-share 0.7]
                                                  [--today YYYY-MM-DD] [--payments PAYMENTS.csv]
    python -m oncebeat.sample.book generate OUT.csv --start YYYY-MM-DD [--seed 7] [--customers 40]
                                                   [--invoices 200] [--history-days 120] [--payments PAYMENTS.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from oncebeat.csvsafe import safe_row
from oncebeat.errors import ConfigError
from oncebeat.reminders.importing import STANDARD_COLUMNS, raise_if_problems, read_invoices_csv, read_payments_csv
from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.reminders.money import minor_digits

__all__ = [
    "Book",
    "generate_book",
    "chinook_book",
    "load_book",
    "write_invoices_csv",
    "write_payments_csv",
    "CHINOOK_NET_DAYS",
    "CHINOOK_LEAD_DAYS",
    "main",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Book:
    """Customers, invoices as of ``as_of``, and the payments still to come (sorted by ``paid_on``)."""

    customers: list[Customer]
    invoices: list[Invoice]
    payments: list[Payment]
    as_of: date | None = None  # the reference date: the book is the state at the start of this day


# --------------------------------------------------------------------------- generated book


@dataclass(frozen=True, slots=True)
class _Region:
    key: str
    weight: int
    currency: str
    usd_rate: float  # units of ``currency`` per USD, roughly
    places: tuple[tuple[str, str], ...]  # (locale, IANA zone)
    first: tuple[tuple[str, str], ...]  # (display, ASCII for the email)
    last: tuple[tuple[str, str], ...]
    companies: tuple[tuple[str, str], ...]  # (display, ASCII slug)
    family_first: bool = False  # names written "family given" (Japan)


_REGIONS: tuple[_Region, ...] = (
    _Region(
        "US", 28, "USD", 1.0,
        (("en_US", "America/Chicago"), ("en_US", "America/New_York"), ("en_US", "America/Los_Angeles"),
         ("en_US", "America/Denver"), ("en_US", "America/Phoenix")),
        (("Zoë", "zoe"), ("José", "jose"), ("Emily", "emily"), ("Michael", "michael"), ("Aaliyah", "aaliyah"),
         ("Daniel", "daniel"), ("Renée", "renee"), ("Tyler", "tyler")),
        (("Martínez", "martinez"), ("Johnson", "johnson"), ("O'Brien", "obrien"), ("Nguyen", "nguyen"),
         ("Kowalski", "kowalski"), ("Washington", "washington"), ("Peña", "pena")),
        (("Bright Harbor Logistics LLC", "brightharbor"), ("Peña Design Studio", "pena-design"),
         ("Lakeshore Dental Group", "lakeshore-dental"), ("Redwood Analytics Inc.", "redwood-analytics")),
    ),
    _Region(
        "GB", 10, "GBP", 0.79,
        (("en_GB", "Europe/London"),),
        (("Siobhán", "siobhan"), ("Oliver", "oliver"), ("Amelia", "amelia"), ("Harry", "harry"), ("Niamh", "niamh")),
        (("Patel", "patel"), ("Smith", "smith"), ("O'Connor", "oconnor"), ("Brontë", "bronte"), ("Evans", "evans")),
        (("Ashford & Lyle Ltd", "ashford-lyle"), ("Kestrel Print Works", "kestrel-print")),
    ),
    _Region(
        "DE", 10, "EUR", 0.92,
        (("de_DE", "Europe/Berlin"),),
        (("Jürgen", "juergen"), ("Lena", "lena"), ("Maximilian", "maximilian"), ("Sören", "soeren"), ("Anja", "anja")),
        (("Müller", "mueller"), ("Schröder", "schroeder"), ("Weiß", "weiss"),
         ("Becker", "becker"), ("Köhler", "koehler")),
        (("Müller & Söhne GmbH", "mueller-soehne"), ("Bäckerei Weiß KG", "baeckerei-weiss")),
    ),
    _Region(
        "FR", 8, "EUR", 0.92,
        (("fr_FR", "Europe/Paris"),),
        (("Chloé", "chloe"), ("Léa", "lea"), ("François", "francois"), ("Hélène", "helene"), ("Mathis", "mathis")),
        (("Lefèvre", "lefevre"), ("Dubois", "dubois"), ("Moreau", "moreau"),
         ("Girard", "girard"), ("Lemaître", "lemaitre")),
        (("Atelier Lumière SARL", "atelier-lumiere"), ("Crêperie du Port", "creperie-du-port")),
    ),
    _Region(
        "JP", 7, "JPY", 150.0,
        (("ja_JP", "Asia/Tokyo"),),
        (("太郎", "taro"), ("花子", "hanako"), ("一郎", "ichiro"), ("美咲", "misaki"), ("健", "ken")),
        (("山田", "yamada"), ("佐藤", "sato"), ("鈴木", "suzuki"), ("田中", "tanaka"), ("高橋", "takahashi")),
        (("株式会社山田商事", "yamada-shoji"), ("東京デザイン合同会社", "tokyo-design")),
        family_first=True,
    ),
    _Region(
        "BR", 7, "BRL", 5.0,
        (("pt_BR", "America/Sao_Paulo"), ("pt_BR", "America/Manaus"), ("pt_BR", "America/Recife")),
        (("João", "joao"), ("Luísa", "luisa"), ("Ana", "ana"), ("Conceição", "conceicao"), ("Thiago", "thiago")),
        (("Gonçalves", "goncalves"), ("Araújo", "araujo"), ("Silva", "silva"),
         ("Pereira", "pereira"), ("Simões", "simoes")),
        (("Padaria São Jorge Ltda.", "padaria-sao-jorge"), ("Construtora Ipê S.A.", "construtora-ipe")),
    ),
    _Region(
        "IN", 6, "INR", 83.0,
        (("en_IN", "Asia/Kolkata"),),
        (("Priya", "priya"), ("Arjun", "arjun"), ("Aarav", "aarav"), ("Ananya", "ananya"), ("Kavya", "kavya")),
        (("Sharma", "sharma"), ("Iyer", "iyer"), ("Reddy", "reddy"), ("Banerjee", "banerjee"), ("Gupta", "gupta")),
        (("Sharma Textiles Pvt Ltd", "sharma-textiles"), ("Deccan Software Services", "deccan-software")),
    ),
    _Region(
        "AU", 6, "AUD", 1.5,
        (("en_AU", "Australia/Sydney"), ("en_AU", "Australia/Melbourne"), ("en_AU", "Australia/Perth"),
         ("en_AU", "Australia/Brisbane")),
        (("Chloe", "chloe"), ("Liam", "liam"), ("Mia", "mia"), ("Jack", "jack"), ("Matilda", "matilda")),
        (("Nguyen", "nguyen"), ("Wilson", "wilson"), ("Murphy", "murphy"),
         ("Taylor", "taylor"), ("Papadopoulos", "papadopoulos")),
        (("Koala Coast Surf Co", "koala-coast"), ("Southern Cross Plumbing", "southern-cross")),
    ),
    _Region(
        "CA-QC", 4, "CAD", 1.36,
        (("fr_CA", "America/Toronto"),),
        (("Geneviève", "genevieve"), ("Étienne", "etienne"), ("Mélanie", "melanie"), ("Benoît", "benoit")),
        (("Tremblay", "tremblay"), ("Gagnon", "gagnon"), ("Côté", "cote"), ("Bélanger", "belanger")),
        (("Érablière Gagnon inc.", "erabliere-gagnon"),),
    ),
    _Region(
        "CA", 4, "CAD", 1.36,
        (("en_CA", "America/Toronto"), ("en_CA", "America/Vancouver"), ("en_CA", "America/Edmonton"),
         ("en_CA", "America/Halifax")),
        (("Liam", "liam"), ("Olivia", "olivia"), ("Noah", "noah"), ("Ava", "ava")),
        (("MacDonald", "macdonald"), ("Singh", "singh"), ("Campbell", "campbell"), ("Li", "li")),
        (("Maple Ridge Outfitters", "maple-ridge"),),
    ),
)

_DOMAINS = ("example.com", "example.org", "example.net")
_COMPANY_MAILBOXES = ("ap", "accounts", "billing", "finance")
_TERMS = (15, 30, 30, 30, 45)  # net days, net 30 most common

# Payment behaviour per customer: (share of customers, chance an invoice is never paid,
# (min, max) days paid relative to the due date). Averages to ~15% never paid.
_BEHAVIOURS: tuple[tuple[str, float, float, tuple[int, int]], ...] = (
    ("prompt", 0.30, 0.05, (-10, 2)),
    ("usual", 0.45, 0.13, (-3, 7)),
    ("late", 0.20, 0.22, (3, 35)),
    ("bad", 0.05, 0.50, (20, 60)),
)
_VOID_SHARE = 0.03


@dataclass(frozen=True, slots=True)
class _Profile:
    customer: Customer
    currency: str
    usd_rate: float
    terms: int
    behaviour: tuple[str, float, float, tuple[int, int]]
    size_usd: float  # typical invoice size


def _round_amount(rng: random.Random, major: float, currency: str) -> int:
    """Minor units of a realistic-looking amount near ``major``."""
    precision: int = minor_digits(currency)
    if precision == 0:
        step = 100 if major >= 10_000 else 10
        return max(step, round(major / step) * step)
    unit: int = 10**precision
    style = rng.random()
    if style < 0.3 and major >= 200:
        return max(unit, round(major / 50) * 50 * unit)  # a round fee, e.g. 1,250.00
    if style < 0.6:
        return max(unit, round(major) * unit)  # whole units
    return max(1, round(major * unit))  # with cents


def _weekday(day: date) -> date:
    """Invoices are issued on working days: Saturday -> Friday, Sunday -> Monday."""
    if day.weekday() == 5:
        return day - timedelta(days=1)
    if day.weekday() == 6:
        return day + timedelta(days=1)
    return day


def _make_customers(rng: random.Random, count: int) -> list[_Profile]:
    profiles: list[_Profile] = []
    used_emails: set[str] = set()
    used_companies: set[str] = set()
    weights = [r.weight for r in _REGIONS]
    behaviour_weights = [b[1] for b in _BEHAVIOURS]
    # Every region at least once (when there are enough customers), the rest by weight.
    regions = list(_REGIONS[:count]) + rng.choices(_REGIONS, weights, k=max(0, count - len(_REGIONS)))
    rng.shuffle(regions)
    for region in regions:
        locale, zone = rng.choice(region.places)
        domain = rng.choice(_DOMAINS)
        free_companies = [c for c in region.companies if c[0] not in used_companies]
        if free_companies and rng.random() < 0.35:
            name, slug = rng.choice(free_companies)
            used_companies.add(name)
            base = f"{rng.choice(_COMPANY_MAILBOXES)}.{slug}"
            size = rng.lognormvariate(math.log(2500), 0.9)
        else:
            (first, first_ascii), (last, last_ascii) = rng.choice(region.first), rng.choice(region.last)
            name = f"{last} {first}" if region.family_first else f"{first} {last}"
            base = f"{first_ascii}.{last_ascii}"
            size = rng.lognormvariate(math.log(450), 0.8)
        email = f"{base}@{domain}"
        n = 2
        while email in used_emails:
            email = f"{base}{n}@{domain}"
            n += 1
        used_emails.add(email)
        profiles.append(
            _Profile(
                customer=Customer(email=email, name=name, locale=locale, tz=zone),
                currency=region.currency,
                usd_rate=region.usd_rate,
                terms=rng.choice(_TERMS),
                behaviour=rng.choices(_BEHAVIOURS, behaviour_weights)[0],
                size_usd=min(max(size, 40.0), 40_000.0),
            )
        )
    return profiles


def generate_book(
    *,
    seed: int = 7,
    start: date,
    customers: int = 40,
    invoices: int = 200,
    history_days: int = 120,
) -> Book:
    """A realistic, seeded invoice book as of ``start`` (the first day of the demo/simulation).

    Customers live in ten regions (US, UK, Germany, France, Japan, Brazil,
    India, Australia, Québec, English Canada) with matching locale, zone and
    currency; names include non-ASCII ones; emails use only example.com/.org/.net.
    Invoices are issued on working days in the ``history_days`` before
    ``start``, on net 15/30/45 terms, numbered ``INV-<year>-<nnnnn>``.
    Payment behaviour depends on the customer: most pay within a few days of
    the due date (some early, some weeks late), about 15% of invoices are never
    paid, about 3% are void. Payments dated before ``start`` make the invoice
    ``paid``; later ones are listed in ``payments``.
    """
    if customers < 1:
        raise ConfigError(f"generate_book: customers must be at least 1 (got {customers})")
    if invoices < 0:
        raise ConfigError(f"generate_book: invoices must be 0 or more (got {invoices})")
    if history_days < 1:
        raise ConfigError(f"generate_book: history_days must be at least 1 (got {history_days})")
    rng = random.Random(seed)
    profiles = _make_customers(rng, customers)

    # Who gets each invoice: everyone at least once (when possible), a few big accounts get many.
    activity = [min(rng.paretovariate(2.0), 6.0) for _ in profiles]
    owners = list(range(min(customers, invoices)))
    owners += rng.choices(range(customers), activity, k=invoices - len(owners))
    rng.shuffle(owners)

    drafts: list[tuple[date, int, _Profile]] = []
    for tiebreak, owner in enumerate(owners):
        issued = _weekday(start - timedelta(days=rng.randint(1, history_days)))
        if issued >= start:
            issued -= timedelta(days=3)  # Sunday moved to a Monday that is `start`: use the Friday before
        drafts.append((issued, tiebreak, profiles[owner]))
    drafts.sort(key=lambda d: (d[0], d[1]))

    first_year = drafts[0][0].year if drafts else start.year
    counters: dict[int, int] = {first_year: rng.randint(0, 300)}  # the year began before the window
    result: list[Invoice] = []
    payments: list[Payment] = []
    for issued, _, profile in drafts:
        counters[issued.year] = counters.get(issued.year, 0) + 1
        number = f"INV-{issued.year}-{counters[issued.year]:05d}"
        due = issued + timedelta(days=profile.terms)
        major = profile.size_usd * rng.lognormvariate(0.0, 0.45) * profile.usd_rate
        amount = _round_amount(rng, major, profile.currency)
        _, _, never_share, (early, late) = profile.behaviour
        fate = rng.random()
        offset = rng.randint(early, late)
        status, paid_on = "open", None
        if fate < _VOID_SHARE:
            status = "void"
        elif fate >= _VOID_SHARE + never_share * (1 - _VOID_SHARE):
            paid = max(issued, due + timedelta(days=offset))
            if paid < start:
                status, paid_on = "paid", paid
            else:
                payments.append(Payment(number=number, paid_on=paid))
        result.append(
            Invoice(
                number=number,
                customer_email=profile.customer.email,
                currency=profile.currency,
                amount_due=amount,
                issued_on=issued,
                due_on=due,
                status=status,
                paid_on=paid_on,
            )
        )
    payments.sort(key=lambda p: (p.paid_on, p.number))
    return Book(customers=[p.customer for p in profiles], invoices=result, payments=payments, as_of=start)


# --------------------------------------------------------------------------- Chinook

#: Chinook has no due dates: every invoice is net 30.
CHINOOK_NET_DAYS = 30
#: The latest Chinook invoice is dated this many days before the book's reference date.
CHINOOK_LEAD_DAYS = 20
_CHINOOK_MAX_DELAY = 60


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError as exc:
        raise ConfigError(
            f"Chinook data: {path} not found (pass the folder that holds csv/Invoice.csv, csv/Customer.csv "
            "and customer_timezones.csv, e.g. shared/data/chinook)"
        ) from exc


def chinook_book(
    data_dir: Path,
    *,
    seed: int = 7,
    paid_share: float = 0.7,
    today: date | None = None,
) -> tuple[Book, str]:
    """A book built from the Chinook sample database, plus a paragraph saying how.

    - invoice ``CHINOOK-<InvoiceId>``, customer from ``Customer.csv`` (email,
      "FirstName LastName"), zone and locale from ``customer_timezones.csv``
      (``pt-BR`` becomes ``pt_BR``), amount = ``Total`` in USD cents, due =
      issue + 30 days.
    - Dates are shifted by whole days so the latest invoice is dated ``today``
      minus 20 days. ``today`` (the book's ``as_of``) defaults to the latest
      InvoiceDate + 20 days (2026-01-11 for the shipped data), which leaves the
      dates unshifted, so the default book is the same whatever the wall clock says.
    - Chinook has no payments. With ``random.Random(seed)`` each invoice (in
      InvoiceId order) is paid with probability ``paid_share``, 0–60 days
      after issue. Payments dated before ``today`` make the invoice ``paid``;
      the others go into ``payments`` (they arrive during the demo).
    """
    if not 0.0 <= paid_share <= 1.0:
        raise ConfigError(f"chinook_book: paid_share must be between 0 and 1 (got {paid_share})")
    data_dir = Path(data_dir)
    invoice_rows = _read_csv(data_dir / "csv" / "Invoice.csv")
    customer_rows = _read_csv(data_dir / "csv" / "Customer.csv")
    zone_rows = {row["CustomerId"]: row for row in _read_csv(data_dir / "customer_timezones.csv")}
    if not invoice_rows:
        raise ConfigError(f"Chinook data: {data_dir / 'csv' / 'Invoice.csv'} has no invoices")
    customers = _chinook_customers(customer_rows, zone_rows)

    invoice_rows.sort(key=lambda r: int(r["InvoiceId"]))
    latest = max(_chinook_invoice_date(r) for r in invoice_rows)
    reference = today if today is not None else latest + timedelta(days=CHINOOK_LEAD_DAYS)
    shift = (reference - timedelta(days=CHINOOK_LEAD_DAYS)) - latest

    invoices, payments, used, already_paid = _chinook_invoices(invoice_rows, customers, shift=shift,
                                                               reference=reference, rng=random.Random(seed),
                                                               paid_share=paid_share)
    book = Book(
        customers=[c for key, c in customers.items() if key in used],
        invoices=invoices,
        payments=payments,
        as_of=reference,
    )
    return book, _chinook_description(book, reference=reference, latest=latest, shift=shift, seed=seed,
                                      paid_share=paid_share, already_paid=already_paid)


def _chinook_invoice_date(row: dict[str, str]) -> date:
    return datetime.fromisoformat(row["InvoiceDate"].strip()).date()


def _chinook_customers(customer_rows: list[dict[str, str]],
                       zone_rows: dict[str, dict[str, str]]) -> dict[str, Customer]:
    """Chinook's customers by CustomerId (in id order), with the zone and locale of ``customer_timezones.csv``."""
    customers: dict[str, Customer] = {}
    for row in sorted(customer_rows, key=lambda r: int(r["CustomerId"])):
        zone = zone_rows.get(row["CustomerId"], {})
        name = " ".join(f"{row['FirstName']} {row['LastName']}".split()) or row["Company"].strip()
        customers[row["CustomerId"]] = Customer(
            email=row["Email"].strip().lower(),
            name=name,
            locale=(zone.get("SuggestedLocale") or "en_US").replace("-", "_"),
            tz=zone.get("SuggestedTimeZone") or "UTC",
        )
    return customers


def _chinook_invoices(
    invoice_rows: list[dict[str, str]],
    customers: dict[str, Customer],
    *,
    shift: timedelta,
    reference: date,
    rng: random.Random,
    paid_share: float,
) -> tuple[list[Invoice], list[Payment], set[str], int]:
    """(invoices, payments still to come sorted by date, CustomerIds used, invoices already paid), in row order.

    Raises:
        ConfigError: an invoice names an unknown customer, or its Total is not whole cents.
    """
    invoices: list[Invoice] = []
    payments: list[Payment] = []
    used: set[str] = set()
    already_paid = 0
    for row in invoice_rows:
        customer = customers.get(row["CustomerId"])
        if customer is None:
            raise ConfigError(f"Chinook data: invoice {row['InvoiceId']} names unknown customer {row['CustomerId']}")
        used.add(row["CustomerId"])
        issued = _chinook_invoice_date(row) + shift
        cents = Decimal(row["Total"].strip()).scaleb(2)
        if cents != cents.to_integral_value():
            raise ConfigError(f"Chinook data: invoice {row['InvoiceId']} Total {row['Total']!r} is not whole cents")
        # Always draw both numbers, so paid_share changes which invoices are paid, not the delays.
        paid = rng.random() < paid_share
        delay = rng.randint(0, _CHINOOK_MAX_DELAY)
        number = f"CHINOOK-{int(row['InvoiceId'])}"
        status, paid_on = "open", None
        if paid:
            day = issued + timedelta(days=delay)
            if day < reference:
                status, paid_on = "paid", day
                already_paid += 1
            else:
                payments.append(Payment(number=number, paid_on=day))
        invoices.append(
            Invoice(
                number=number,
                customer_email=customer.email,
                currency="USD",
                amount_due=int(cents),
                issued_on=issued,
                due_on=issued + timedelta(days=CHINOOK_NET_DAYS),
                status=status,
                paid_on=paid_on,
            )
        )
    payments.sort(key=lambda p: (p.paid_on, p.number))
    return invoices, payments, used, already_paid


def _chinook_description(book: Book, *, reference: date, latest: date, shift: timedelta, seed: int,
                         paid_share: float, already_paid: int) -> str:
    """The paragraph :func:`chinook_book` returns: how the book was made, with its counts."""
    invoices, payments = book.invoices, book.payments
    never = len(invoices) - already_paid - len(payments)
    shift_text = (
        f"shifted by {shift.days:+d} "
        "days" if shift.days else "left as they are (the default reference date needs no shift)"
    )
    return (
        f"Converted from the Chinook sample database (MIT; fictitious customers, emails moved to example.com): "
        f"{len(invoices)} invoices of {len(book.customers)} customers. Each invoice is numbered CHINOOK-<InvoiceId>, "
        f"issued on its InvoiceDate, due {CHINOOK_NET_DAYS} days later (net {CHINOOK_NET_DAYS}), for its Total in USD; "
        f"the customer's name and email come from Customer.csv and the time zone and locale from "
        f"customer_timezones.csv. The dates were {shift_text}, so the latest invoice is dated "
        f"{(latest + shift).isoformat()}, {CHINOOK_LEAD_DAYS} days before the reference date {reference.isoformat()}. "
        f"Chinook has no payments, so they are simulated with random.Random({seed}): each invoice is paid with "
        f"probability {paid_share:.2f}, 0 to {_CHINOOK_MAX_DELAY} days after issue. As of {reference.isoformat()}, "
        f"{already_paid} invoices are paid, {len(payments)} payments are still to arrive, and {never} invoices "
        f"will never be paid. The same data, seed and reference date always give the same book."
    )


# --------------------------------------------------------------------------- the book of a run


def load_book(
    *,
    seed: int = 7,
    start: date,
    invoices_csv: Path | None = None,
    payments_csv: Path | None = None,
    invoices: int = 200,
    customers: int | None = None,
) -> Book:
    """The book a demo or simulation runs on, as of ``start`` (its first simulated day).

    Without ``invoices_csv``: :func:`generate_book` with ``seed``, ``invoices`` invoices and
    ``customers`` customers (default one per five invoices, at least 10). With it: the customers and
    invoices of that file (the import format, ``importing.INVOICE_CSV_HELP``) and the payments of
    ``payments_csv`` (``invoice_number,paid_on[,paid_at]``; none when not given), sorted by ``paid_on``;
    ``seed``, ``invoices`` and ``customers`` are then ignored.

    Raises:
        ImportRejected: a file has invalid rows, or cannot be read (the message names the file, the
            lines and the fix, as ``oncebeat import`` does).
        ConfigError: ``invoices`` below 0 or ``customers`` below 1.
    """
    if invoices_csv is None:
        return generate_book(seed=seed, start=start, invoices=invoices,
                             customers=max(10, invoices // 5) if customers is None else customers)
    data = read_invoices_csv(invoices_csv)
    raise_if_problems(data.problems, source=str(invoices_csv), rows_read=data.rows_read)
    payments: list[Payment] = []
    if payments_csv is not None:
        payments, problems = read_payments_csv(payments_csv)
        raise_if_problems(problems, source=str(payments_csv))
    return Book(customers=data.customers, invoices=data.invoices, payments=sorted(payments, key=lambda p: p.paid_on),
                as_of=start)


# --------------------------------------------------------------------------- CSV output


def _format_amount(minor: int, currency: str) -> str:
    precision: int = minor_digits(currency)
    return f"{Decimal(minor).scaleb(-precision):.{precision}f}"


def write_invoices_csv(book: Book, path: Path) -> None:
    """Write the book's invoices in the standard import format (UTF-8, header ``STANDARD_COLUMNS``).

    ``read_invoices_csv`` reads the file back with no problems and the same
    customers and invoices, except that a value starting with ``= + - @``, TAB
    or CR comes back with the leading ``'`` that keeps spreadsheets from running
    it (:mod:`oncebeat.csvsafe`). Future ``payments`` are not in it (see
    :func:`write_payments_csv`).
    """
    by_email = {c.email: c for c in book.customers}
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        # payment_url only when an invoice has one: the column left empty would clear a stored link (README)
        links = any(inv.payment_url for inv in book.invoices)
        pdfs = any(inv.pdf_path for inv in book.invoices)  # likewise pdf_path (docs/attachments.md)
        # likewise a customer's country and tags (README "Several ladders")
        segments = {c for c, on in (("customer_country", any(c.country for c in book.customers)),
                                    ("customer_tags", any(c.tags for c in book.customers))) if not on}
        left_out = segments | ({"payment_url"} if not links else set()) | ({"pdf_path"} if not pdfs else set())
        writer.writerow([c for c in STANDARD_COLUMNS if c not in left_out])
        for inv in book.invoices:  # cells through safe_row: no spreadsheet formula (CSV injection)
            customer = by_email.get(inv.customer_email)
            if customer is None:
                raise ConfigError(f"write_invoices_csv: invoice {inv.number} names unknown customer "
                                  f"{inv.customer_email}")
            writer.writerow(safe_row(
                [
                    inv.number,
                    customer.email,
                    customer.name,
                    inv.currency,
                    _format_amount(inv.amount_due, inv.currency),
                    inv.issued_on.isoformat(),
                    inv.due_on.isoformat(),
                    customer.locale,
                    customer.tz,
                    inv.status,
                    inv.paid_on.isoformat() if inv.paid_on else "",
                    inv.status_on.isoformat() if inv.status_on else "",
                    *([inv.payment_url or ""] if links else []),
                    *([inv.pdf_path or ""] if pdfs else []),
                    *([customer.country or ""] if "customer_country" not in left_out else []),
                    *([customer.tags or ""] if "customer_tags" not in left_out else []),
                ]
            ))


def write_payments_csv(payments: Sequence[Payment], path: Path) -> None:
    """Write payments in the payments import format (``invoice_number,paid_on``)."""
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["invoice_number", "paid_on"])
        for p in payments:
            writer.writerow(safe_row([p.number, p.paid_on.isoformat()]))


# --------------------------------------------------------------------------- script


def _default_chinook_dir() -> Path | None:
    here = Path(__file__).resolve()
    candidates = [
        Path.cwd() / "shared" / "data" / "chinook",
        Path.cwd().parent / "shared" / "data" / "chinook",
    ]
    if len(here.parents) > 3:
        candidates.append(here.parents[3].parent / "shared" / "data" / "chinook")  # beside the repository
    return next((c for c in candidates if (c / "csv" / "Invoice.csv").is_file()), None)


def _iso_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (use YYYY-MM-DD)") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oncebeat.sample.book",
        description="Write an invoice book as a standard invoice CSV (for `oncebeat import`).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("chinook", help="convert the Chinook sample database")
    ch.add_argument("out", type=Path, help="invoice CSV to write")
    ch.add_argument("--data", type=Path, default=None, help="Chinook folder (default: shared/data/chinook if found)")
    ch.add_argument("--seed", type=int, default=7)
    ch.add_argument("--paid-share", type=float, default=0.7)
    ch.add_argument("--today", type=_iso_date, default=None, help="reference date (default: latest invoice + 20 days)")
    ch.add_argument("--payments", type=Path, default=None, help="also write the payments still to come")
    gen = sub.add_parser("generate", help="generate a synthetic book")
    gen.add_argument("out", type=Path)
    gen.add_argument("--start", type=_iso_date, required=True, help="reference date YYYY-MM-DD")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--customers", type=int, default=40)
    gen.add_argument("--invoices", type=int, default=200)
    gen.add_argument("--history-days", type=int, default=120)
    gen.add_argument("--payments", type=Path, default=None, help="also write the payments still to come")
    args = parser.parse_args(argv)
    try:
        if args.command == "chinook":
            data = args.data or _default_chinook_dir()
            if data is None:
                raise ConfigError("Chinook data not found: pass --data DIR (the folder with csv/Invoice.csv)")
            book, text = chinook_book(data, seed=args.seed, paid_share=args.paid_share, today=args.today)
        else:
            book = generate_book(
                seed=args.seed,
                start=args.start,
                customers=args.customers,
                invoices=args.invoices,
                history_days=args.history_days,
            )
            text = (
                f"Generated with seed {args.seed} as of {args.start.isoformat()}: {len(book.customers)} customers, "
                f"{len(book.invoices)} invoices, {len(book.payments)} payments still to come."
            )
        write_invoices_csv(book, args.out)
        if args.payments is not None:
            write_payments_csv(book.payments, args.payments)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(text)
    print(f"wrote {len(book.invoices)} invoices to "
          f"{args.out}" + (f" and {len(book.payments)} payments to {args.payments}" if args.payments else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
