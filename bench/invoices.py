"""Invoice books of any size for W2/W3, built from the Online Retail invoices.

The UCI "Online Retail" and "Online Retail II" (first year) invoice rows in
``../shared/data/online_retail/`` (read in place, never copied; CC BY 4.0,
Chen 2015/2019) give real invoice numbers, customers, countries, amounts and a
real seasonal spread of dates. A book of ``n`` invoices takes those rows in a
fixed strided order (so 10,000 invoices still span every date) and repeats
them (``<number>-<k>`` for the k-th repetition), maps their two-year date range
onto the 365 days before the business date (shifted by ``k mod 7`` days per
repetition), adds net-30 due dates, and assigns a status from a fixed hash:
open with probability 60 % for invoices up to 45 days old, 25 % up to 120
days, 8 % after that; 3 % void; the rest paid. Same ``n`` and business date →
same book. Rows go in with ``COPY`` (PostgreSQL) or one ``executemany``
(SQLite), not through the import path (W2 measures the scan, not the import).
"""

from __future__ import annotations

import csv
import gzip
import os
import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path

from bench.common import ROOT, pg_connect

RETAIL_DIR = Path(os.environ.get("BENCH_RETAIL_DIR", ROOT.parent / "shared" / "data" / "online_retail"))
FILES = ("online_retail_ii_2009_2010_invoices.csv.gz", "online_retail_invoices.csv.gz")


def data_problem() -> str | None:
    """Why the invoice books cannot be built here (a sentence naming the folder, the files and the fix), or None.

    The data is read in place from ``BENCH_RETAIL_DIR``, by default ``../shared/data/online_retail`` beside the
    repository: a clone elsewhere has no such folder, and W2/W3/whatif then need the variable set.
    """
    missing = [name for name in FILES if not (RETAIL_DIR / name).is_file()]
    if not missing:
        return None
    where = "BENCH_RETAIL_DIR" if "BENCH_RETAIL_DIR" in os.environ else "the default folder beside the repository"
    return (f"the Online Retail invoices are not in {RETAIL_DIR} ({where}): missing {', '.join(missing)}. "
            "Set BENCH_RETAIL_DIR to the folder holding them (UCI Online Retail and Online Retail II, first "
            "year, one invoice per row as the project's shared data has them), or run only the workloads that "
            "need no data: w1, w4, memory, growth")

LOCALES = {"United Kingdom": ("en_GB", "Europe/London"), "Germany": ("de_DE", "Europe/Berlin"),
           "France": ("fr_FR", "Europe/Paris"), "Spain": ("es_ES", "Europe/Madrid"),
           "Netherlands": ("nl_NL", "Europe/Amsterdam"), "Japan": ("ja_JP", "Asia/Tokyo"),
           "USA": ("en_US", "America/New_York"), "Brazil": ("pt_BR", "America/Sao_Paulo")}


@cache
def retail_rows() -> tuple[tuple[str, date, str, str, int], ...]:
    """(number, invoice date, customer key, country, amount in pence) of every positive invoice, deduplicated."""
    problem = data_problem()
    if problem:
        raise SystemExit(f"bench: {problem}.")
    seen: set[str] = set()
    out: list[tuple[str, date, str, str, int]] = []
    for name in FILES:
        with gzip.open(RETAIL_DIR / name, "rt", encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                if r["Type"] != "invoice" or r["InvoiceNo"] in seen:
                    continue
                amount = int((Decimal(r["Total"]) * 100).to_integral_value())
                if amount <= 0:
                    continue
                seen.add(r["InvoiceNo"])
                cust = r["CustomerID"] or f"guest-{r['Country'].lower().replace(' ', '-')}"
                out.append((r["InvoiceNo"], date.fromisoformat(r["InvoiceDate"][:10]), cust, r["Country"], amount))
    out.sort(key=lambda t: (t[1], t[0]))
    return tuple(out)


@cache
def _real_customers() -> tuple[tuple[str, str], ...]:
    """(customer key, country) of every customer in the data, sorted by key."""
    found: dict[str, str] = {}
    for _, _, cust, country, _ in retail_rows():
        found.setdefault(cust, country)
    return tuple(sorted(found.items()))


def copies(n_customers: int | None) -> int:
    """How many copies of each real customer a book of ``n_customers`` needs (1: the real ones only)."""
    real = len(_real_customers())
    return 1 if not n_customers or n_customers <= real else -(-n_customers // real)


def _email(cust: str, k: int) -> str:
    return f"c{cust}@example.com" if k == 0 else f"c{cust}+{k}@example.com"


def customers(n_customers: int | None = None) -> list[tuple[str, str, str, str]]:
    """(email, name, locale, tz) of every customer in the data, × :func:`copies` (see the module docstring)."""
    out = []
    for k in range(copies(n_customers)):
        for cust, country in _real_customers():
            locale, tz = LOCALES.get(country, ("en_GB", "Europe/London"))
            out.append((_email(cust, k), f"Customer {cust}" if k == 0 else f"Customer {cust} #{k}", locale, tz))
    return out


def _status(i: int, age: int) -> str:
    h = ((i + 1) * 2654435761) % 4294967296 / 4294967296
    if h > 0.97:
        return "void"
    p_open = 0.60 if age <= 45 else 0.25 if age <= 120 else 0.08
    return "open" if h < p_open else "paid"


def invoices(n: int, business_date: date,
             n_customers: int | None = None) -> Iterator[tuple[str, str, str, int, date, date, str, date | None]]:
    """(number, customer email, currency, amount, issued_on, due_on, status, paid_on) × n."""
    rows = retail_rows()
    d0, d1 = rows[0][1], rows[-1][1]
    span = max(1, (d1 - d0).days)
    k_copies = copies(n_customers)
    base = [(number, cust, amount, (day - d0).days * 364 // span) for number, day, cust, _country, amount in rows]
    emails: dict[tuple[str, int], str] = {}
    b_ord = business_date.toordinal()
    days: dict[int, date] = {}

    def day_of(ordinal: int) -> date:
        d = days.get(ordinal)
        if d is None:
            d = days[ordinal] = date.fromordinal(ordinal)
        return d

    size = len(base)
    stride = 7919  # a prime not dividing len(base): any n < len(base) still spans every date
    for i in range(n):
        number, cust, amount, off = base[(i * stride) % size]
        k = i % k_copies
        email = emails.get((cust, k))
        if email is None:
            email = emails[(cust, k)] = _email(cust, k)
        rep = i // size
        issued = b_ord - 365 + off - rep % 7
        status = _status(i, b_ord - issued)
        paid_on = day_of(min(issued + 20 + i % 25, b_ord - 1)) if status == "paid" else None
        yield (number if rep == 0 else f"{number}-{rep}", email, "GBP", amount, day_of(issued), day_of(issued + 30),
               status, paid_on)


def load_postgres(schema: str, n: int, business_date: date, n_customers: int | None = None) -> None:
    now = datetime.now(UTC)
    with pg_connect(schema) as c:
        with c.cursor().copy("COPY customers (email, name, locale, tz) FROM STDIN") as cp:
            for row in customers(n_customers):
                cp.write_row(row)
        ids = dict(c.execute("SELECT email, id FROM customers").fetchall())
        with c.cursor().copy("COPY invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, "
                             "paid_on, updated_at) FROM STDIN") as cp:
            for num, email, cur, amt, iss, due, st, paid in invoices(n, business_date, n_customers):
                cp.write_row((num, ids[email], cur, amt, iss, due, st, paid, now))
        c.execute("ANALYZE customers")
        c.execute("ANALYZE invoices")


def load_sqlite(path: Path, n: int, business_date: date, n_customers: int | None = None) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    c.executemany("INSERT INTO customers (email, name, locale, tz) VALUES (?, ?, ?, ?)", customers(n_customers))
    ids = dict(c.execute("SELECT email, id FROM customers").fetchall())
    c.executemany(
        "INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((num, ids[email], cur, amt, iss.isoformat(), due.isoformat(), st, paid.isoformat() if paid else None, now)
         for num, email, cur, amt, iss, due, st, paid in invoices(n, business_date, n_customers)))
    c.execute("COMMIT")
    c.close()


def load(db: object, n: int, business_date: date, n_customers: int | None = None) -> None:
    """Load a book of ``n`` invoices (over at least ``n_customers`` customers) into a :class:`bench.common.FreshDb`."""
    if getattr(db, "backend") == "postgres":
        load_postgres(getattr(db, "schema"), n, business_date, n_customers)
    else:
        load_sqlite(getattr(db, "path"), n, business_date, n_customers)


def load_overdue(db: object, n: int, business_date: date) -> None:
    """A book of ``n`` open invoices all due 10 days before ``business_date`` (W3: one send each)."""
    from datetime import timedelta

    issued, due = business_date - timedelta(days=40), business_date - timedelta(days=10)
    rows = [(num, email, cur, amt, issued, due, "open", None)
            for num, email, cur, amt, _i, _d, _s, _p in invoices(n, business_date)]
    now = datetime.now(UTC)
    if getattr(db, "backend") == "postgres":
        with pg_connect(getattr(db, "schema")) as c:
            with c.cursor().copy("COPY customers (email, name, locale, tz) FROM STDIN") as cp:
                for row in customers():
                    cp.write_row(row)
            ids = dict(c.execute("SELECT email, id FROM customers").fetchall())
            with c.cursor().copy("COPY invoices (number, customer_id, currency, amount_due, issued_on, due_on, "
                                 "status, paid_on, updated_at) FROM STDIN") as cp:
                for num, email, cur, amt, iss, du, st, paid in rows:
                    cp.write_row((num, ids[email], cur, amt, iss, du, st, paid, now))
            c.execute("ANALYZE")
        return
    c = sqlite3.connect(getattr(db, "path"), isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    c.executemany("INSERT INTO customers (email, name, locale, tz) VALUES (?, ?, ?, ?)", customers())
    ids = dict(c.execute("SELECT email, id FROM customers").fetchall())
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    c.executemany("INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, "
                  "paid_on, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  [(num, ids[email], cur, amt, iss.isoformat(), du.isoformat(), st, None, stamp)
                   for num, email, cur, amt, iss, du, st, _p in rows])
    c.execute("COMMIT")
    c.close()
