"""Collection reports against numbers worked out by hand on a small book (tests/reports_book.py), on both backends.

Each expected value is written with its arithmetic; the formulas are docs/reports.md's. A report that cannot be
right says "not enough data" instead of a number, and amounts of different currencies are never added.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.reports import (
    WINDOWS,
    Month,
    MonthError,
    ReportError,
    build,
    countback_dso,
    csv_text,
    json_table,
    month_figures,
    promises,
    stage_effectiveness,
    text_lines,
)
from oncebeat.reminders.runtime import Runtime, load_runtime
from reports_book import AS_OF, seed

JAN, FEB, MAR, APR = Month(2026, 1), Month(2026, 2), Month(2026, 3), Month(2026, 4)


@pytest.fixture
def runtime_only(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def rt(runtime_only: Runtime) -> Runtime:
    seed(runtime_only.service, runtime_only.store)
    return runtime_only


def test_dso_and_cei_match_the_hand_computed_months(rt: Runtime) -> None:
    rows = {(r.currency, str(r.month)): r
            for r in month_figures(rt.store, first=Month(2025, 12), last=APR, as_of=AS_OF, currency="EUR")}
    assert sorted(rows) == [("EUR", m) for m in ("2025-12", "2026-01", "2026-02", "2026-03", "2026-04")]
    assert rows["EUR", "2025-12"].dso is None and rows["EUR", "2025-12"].note == "no EUR invoice before 2026-01"
    assert rows["EUR", "2026-04"].dso is None and rows["EUR", "2026-04"].note == "month not over on 2026-04-10"
    jan, feb, mar = rows["EUR", "2026-01"], rows["EUR", "2026-02"], rows["EUR", "2026-03"]
    # Credit sales (G is void, so it is no sale): Jan A+B+C = 100000+200000+50000 = 350000;
    # Feb D+E = 300000+150000 = 450000; Mar F+H = 80000+120000 = 200000.
    assert (jan.credit_sales, feb.credit_sales, mar.credit_sales) == (350000, 450000, 200000)
    # Receivables at Jan 31: B (paid Feb 10) 200000 + C 50000 = 250000; current (due_on >= Jan 31): B and C (due
    # Jan 31 itself is not past due) = 250000.
    assert (jan.begin_receivables, jan.end_receivables, jan.end_current) == (0, 250000, 250000)
    # Feb 28: C 50000 (past due) + D (paid Mar 5) 300000 + E 150000 = 500000; current D + E = 450000.
    assert (feb.begin_receivables, feb.end_receivables, feb.end_current) == (250000, 500000, 450000)
    # Mar 31: C 50000 + E 150000 (due Mar 22, past due) + F 80000 (uncollectible: never collected, due Mar 31:
    # current) + H 120000 (paid Apr 5, due Apr 19: current) = 400000; current F + H = 200000.
    assert (mar.begin_receivables, mar.end_receivables, mar.end_current) == (500000, 400000, 200000)
    # Collected = beginning + sales - ending: Jan 0+350000-250000 = 100000 (A); Feb 250000+450000-500000 = 200000
    # (B); Mar 500000+200000-400000 = 300000 (D).
    assert (jan.collected, feb.collected, mar.collected) == (100000, 200000, 300000)
    # DSO countback. Jan: 250000 <= Jan sales 350000 -> 31 * 250000/350000 = 155/7 (22.14 days).
    assert jan.dso == Fraction(155, 7)
    # Feb: 500000 - Feb sales 450000 = 50000 left after 28 days; Jan: 31 * 50000/350000 = 31/7 -> 28 + 31/7 = 227/7.
    assert feb.dso == Fraction(227, 7)
    # Mar: 400000 - Mar sales 200000 = 200000 left after 31 days; Feb: 28 * 200000/450000 = 112/9 -> 391/9.
    assert mar.dso == Fraction(391, 9)
    # CEI = (B + S - E) / (B + S - Ec) x 100. Jan (0+350000-250000)/(0+350000-250000) = 100 %;
    # Feb (250000+450000-500000)/(250000+450000-450000) = 200000/250000 = 80 %;
    # Mar (500000+200000-400000)/(500000+200000-200000) = 300000/500000 = 60 %.
    assert (jan.cei, feb.cei, mar.cei) == (100, 80, 60)


def test_a_paid_invoice_without_a_date_makes_its_months_not_enough_data(rt: Runtime) -> None:
    rows = {str(r.month): r for r in month_figures(rt.store, first=JAN, last=MAR, as_of=AS_OF, currency="JPY")}
    jan = rows["2026-01"]
    # Jan: J2 7000 issued Jan 10, due Feb 9: receivable and current at Jan 31. DSO 31 * 7000/7000 = 31.
    assert (jan.credit_sales, jan.end_receivables, jan.end_current, jan.dso) == (7000, 7000, 7000, 31)
    # CEI's denominator 0 + 7000 - 7000 = 0: nothing was due, so no index (not 0 %, not 100 %).
    assert jan.cei is None and jan.cei_note == "nothing was due to collect"
    # J1 (issued Feb 3) is paid with no payment date: from February on, receivables cannot be placed.
    for month in ("2026-02", "2026-03"):
        assert rows[month].dso is None and rows[month].cei is None and rows[month].end_receivables is None
        assert rows[month].note == f"1 paid JPY invoice(s) issued by {month} have no payment date"


def test_currencies_are_reported_side_by_side_never_added(rt: Runtime) -> None:
    rows = month_figures(rt.store, first=MAR, last=MAR, as_of=AS_OF)
    assert [r.currency for r in rows] == ["EUR", "JPY", "USD"]
    usd = rows[2]
    # USD March: sales M 10000 + Q 25000 = 35000; at Mar 31 M (paid Apr 4) 10000 + Q 25000 = 35000, both current;
    # beginning (Feb 28): K, L, N, P (all due Mar 1, paid in March) = 40000. DSO: 35000 <= 35000 -> 31 days.
    assert (usd.begin_receivables, usd.credit_sales, usd.end_receivables, usd.end_current) == (40000, 35000, 35000,
                                                                                                35000)
    # CEI: (40000 + 35000 - 35000) / (40000 + 35000 - 35000) = 100 %.
    assert (usd.dso, usd.cei) == (31, 100)


def test_stage_effectiveness_against_a_baseline_of_invoices_never_reminded(rt: Runtime) -> None:
    rows = {r.stage: r for r in stage_effectiveness(rt.store, first=JAN, last=APR, as_of=AS_OF)}
    assert sorted(rows) == [1, 7]
    one, seven = rows[1], rows[7]
    # Reminded at stage 1 (anchor = send date; age = AS_OF - anchor; d = paid_on - anchor):
    #   C 02-01 unpaid age 68; E 03-23 unpaid age 18; K 03-02 paid d=2; L 03-02 paid d=6; M 04-02 paid d=2 age 8;
    #   N was paid 03-01, before its stage went out (03-02): not "unpaid at the stage", left out.
    assert (one.reminded.unpaid, one.reminded.undated) == (5, 0)
    # 3 days: all 5 windows over (ages > 3); paid within 3: K, M -> 2/5.
    # 7 days: all 5 over (M's age 8 > 7); paid within 7: K, L, M -> 3/5.
    # 14 days: M's window (age 8) is not over -> 4 eligible; paid within 14: K, L -> 2/4.
    assert one.reminded.eligible == {3: 5, 7: 5, 14: 4} and one.reminded.paid == {3: 2, 7: 3, 14: 2}
    assert (one.reminded.share(3), one.reminded.share(7), one.reminded.share(14)) == (
        Fraction(2, 5), Fraction(3, 5), Fraction(1, 2))
    # Stage 7: C 02-07 unpaid (age 62); L 03-08 paid that same day (d=0, still unpaid on the anchor) -> 1/2 each.
    assert seven.reminded.eligible == {3: 2, 7: 2, 14: 2} and seven.reminded.paid == {3: 1, 7: 1, 14: 1}
    # Baseline (no sent reminder; anchor = due_on + stage; paid before the anchor: left out):
    #   stage 1: F anchor 04-01 unpaid age 9 (windows 3 and 7 over, not 14); J1 paid without date (undated);
    #   J2 anchor 02-10 unpaid age 59; P anchor 03-02 paid 03-10 (d=8, age 39); Q anchor 04-10 (age 0, none over).
    #   A, B, D, H were paid before their anchors.
    assert (one.baseline.unpaid, one.baseline.undated) == (5, 1)
    # 3 and 7 days: F, J2, P eligible, none paid within -> 0/3; 14 days: J2, P eligible, P paid (d=8) -> 1/2.
    assert one.baseline.eligible == {3: 3, 7: 3, 14: 2} and one.baseline.paid == {3: 0, 7: 0, 14: 1}
    #   stage 7: F anchor 04-07 (age 3: no window over); J1 undated; J2 anchor 02-16 unpaid; P anchor 03-08 paid
    #   03-10 (d=2); Q anchor 04-16 (not over). Eligible J2, P; paid P -> 1/2 each.
    assert (seven.baseline.unpaid, seven.baseline.undated) == (5, 1)
    assert seven.baseline.eligible == {3: 2, 7: 2, 14: 2} and seven.baseline.paid == {3: 1, 7: 1, 14: 1}
    # One currency only: USD stage 1 reminded K, L, M (N left out): 3 days K, M of 3; 14 days K, L of 2.
    usd = stage_effectiveness(rt.store, first=JAN, last=APR, as_of=AS_OF, currency="USD")[0]
    assert usd.reminded.eligible == {3: 3, 7: 3, 14: 2} and usd.reminded.paid == {3: 2, 7: 3, 14: 2}


def test_promises_kept_broken_pending_and_unknown(rt: Runtime) -> None:
    got = {(r.currency, str(r.month)): (r.counts, r.amount, r.amount_kept, r.kept_rate)
           for r in promises(rt.store, first=JAN, last=APR, as_of=AS_OF)}
    assert got == {
        # P1 on E (150000, open) until 03-30, now past: broken.
        ("EUR", "2026-03"): ({"broken": 1}, 150000, 0, Fraction(0)),
        # P2 on H (120000) until 04-06, paid 04-05: kept.
        ("EUR", "2026-04"): ({"kept": 1}, 120000, 120000, Fraction(1)),
        # P5 on customer jpy@ (placed 02-20) covers J2 (7000, open) and J1 (50000, paid without date): unknown.
        ("JPY", "2026-03"): ({"unknown": 1}, 57000, 0, None),
        # P3 on K (10000) until 03-03, paid 03-04: a day late, broken.
        ("USD", "2026-03"): ({"broken": 1}, 10000, 0, Fraction(0)),
        # P4 on customer usd@ (placed 04-08) covers Q only (25000; K..P were paid before 04-08); until 04-20: pending.
        ("USD", "2026-04"): ({"pending": 1}, 25000, 0, None),
    }


def test_disputes_per_currency_and_month_opened(rt: Runtime) -> None:
    (table,) = build(rt.store, "disputes", first=JAN, last=APR, as_of=AS_OF)
    assert table.rows == [
        # D1 on C (50000, open) placed 02-10 23:30 UTC, released 03-01.
        {"currency": "EUR", "month": "2026-02", "disputes": 1, "released": 1, "amount": 50000, "amount_paid": 0,
         "amount_void": 0, "amount_unpaid": 50000},
        # D2 on G (void 400000) placed 03-16; D3 on customer eur@ placed 03-31 23:59:59 UTC covers the invoices issued
        # by 03-31 and not paid before it: C 50000 + E 150000 + F 80000 + G 400000 + H 120000 (paid 04-05) = 800000.
        # Total 400000 + 800000 = 1200000; paid H 120000; void G twice 800000; unpaid C + E + F = 280000.
        {"currency": "EUR", "month": "2026-03", "disputes": 2, "released": 0, "amount": 1200000,
         "amount_paid": 120000, "amount_void": 800000, "amount_unpaid": 280000},
    ]


def test_aging_per_currency_reuses_the_aging_buckets(rt: Runtime) -> None:
    (table,) = build(rt.store, "aging", first=JAN, last=APR, as_of=AS_OF)
    # Open invoices on 04-10: C due 01-31 (69 days) 50000; E due 03-22 (19 days) 150000; J2 due 02-09 (60 days);
    # Q due 04-09 (1 day). F is uncollectible, not open: aging lists open invoices only.
    assert [(r["currency"], r["bucket"], r["invoices"], r["amount"]) for r in table.rows] == [
        ("EUR", "1-30", 1, 150000), ("EUR", "61-90", 1, 50000), ("JPY", "31-60", 1, 7000), ("USD", "1-30", 1, 25000)]


def test_text_csv_and_json_show_the_same_numbers(rt: Runtime) -> None:
    (table,) = build(rt.store, "dso", first=FEB, last=MAR, as_of=AS_OF, currency="EUR")
    text = "\n".join(text_lines(table, "en_US"))
    # 227/7 = 32.43 -> 32.4; 391/9 = 43.44 -> 43.4; receivables with Babel's currency format.
    assert "32.4" in text and "43.4" in text and "€5,000.00" in text and "€4,000.00" in text
    assert "1.234" not in text
    lines = csv_text(table).splitlines()
    assert lines[0] == "currency,month,receivables,credit_sales,dso,note"
    assert lines[1:] == ["EUR,2026-02,5000.00,4500.00,32.4,", "EUR,2026-03,4000.00,2000.00,43.4,"]
    data = json.loads(json.dumps(json_table(table)))
    assert data["rows"][0] == {"currency": "EUR", "month": "2026-02", "receivables": 500000, "credit_sales": 450000,
                               "dso": 32.4, "note": ""}
    (german,) = build(rt.store, "cei", first=FEB, last=FEB, as_of=AS_OF, currency="EUR")
    assert "80,0 %" in "\n".join(text_lines(german, "de_DE"))


def test_bad_input_is_named(rt: Runtime) -> None:
    with pytest.raises(ReportError, match="--currency: 'eur' is not an ISO 4217 code"):
        build(rt.store, "dso", first=JAN, last=MAR, as_of=AS_OF, currency="eur")
    with pytest.raises(MonthError, match="--from 2026-03 is after --to 2026-01"):
        build(rt.store, "dso", first=MAR, last=JAN, as_of=AS_OF)
    with pytest.raises(MonthError, match="--from: '2026-13' is not a month"):
        Month.parse("2026-13", "--from")


def test_countback_walks_back_until_the_receivables_are_used_up() -> None:
    sales = {Month(2026, 1): 300, Month(2026, 2): 0, Month(2026, 3): 100}
    # 350 at Mar 31: Mar 100 (31 days, 250 left), Feb 0 (28 days), Jan 31 * 250/300 -> 31 + 28 + 155/6.
    assert countback_dso(350, lambda m: sales.get(m, 0), Month(2026, 3), Month(2026, 1)) == 59 + Fraction(155, 6)
    assert countback_dso(0, lambda m: sales.get(m, 0), Month(2026, 3), Month(2026, 1)) == 0
    # More receivables than all the sales since the first month: refused, not guessed.
    assert countback_dso(401, lambda m: sales.get(m, 0), Month(2026, 3), Month(2026, 1)) is None


def _oracle(invoices: list[tuple[str, int, date, date, str, date | None]], cur: str, month: Month,
            first_month: Month) -> tuple[int, int, int, int, Fraction, Fraction | None]:
    """DSO and CEI of one month straight from the definitions, invoice by invoice (docs/reports.md)."""
    def ar(day: date, current_only: bool = False) -> int:
        return sum(a for c, a, issued, due, status, paid in invoices
                   if c == cur and status != "void" and issued <= day
                   and not (status == "paid" and paid is not None and paid <= day)
                   and (not current_only or due >= day))

    def sales(m: Month) -> int:
        return sum(a for c, a, issued, _, status, _ in invoices
                   if c == cur and status != "void" and Month.of(issued) == m)

    begin, end, current = ar(month.shift(-1).end), ar(month.end), ar(month.end, current_only=True)
    left, days, m = Fraction(end), Fraction(0), month
    while left > 0:
        assert m >= first_month
        if sales(m) >= left:
            days += Fraction(m.days) * left / sales(m)
            break
        left -= sales(m)
        days += m.days
        m = m.shift(-1)
    due = begin + sales(month) - current
    return begin, sales(month), end, current, days, Fraction(100 * (begin + sales(month) - end), due) if due else None


def test_dso_and_cei_agree_with_the_definitions_on_a_random_book(runtime_only: Runtime) -> None:
    rng = random.Random(24)
    rows: list[tuple[str, int, date, date, str, date | None]] = []
    invoices = []
    for n in range(300):
        cur = rng.choice(["EUR", "JPY"])
        issued = date(2025, 1, 1) + timedelta(days=rng.randrange(365))
        due = issued + timedelta(days=rng.choice([0, 7, 14, 30, 45]))
        status = rng.choices(["open", "paid", "void", "uncollectible"], [3, 8, 1, 1])[0]
        paid = issued + timedelta(days=rng.randrange(0, 90)) if status == "paid" else None
        if paid is not None and paid >= date(2026, 3, 1):
            paid = date(2026, 2, 27)
        amount = rng.randrange(1, 500_000)
        rows.append((cur, amount, issued, due, status, paid))
        invoices.append(Invoice(number=f"R-{n}", customer_email="ann@example.test", currency=cur, amount_due=amount,
                                issued_on=issued, due_on=due, status=status, paid_on=paid))
    runtime_only.service.upsert([Customer(email="ann@example.test", name="Ann")], invoices)
    got = month_figures(runtime_only.store, first=Month(2025, 1), last=Month(2026, 1), as_of=date(2026, 3, 1))
    firsts = {cur: Month.of(min(r[2] for r in rows if r[0] == cur and r[4] != "void")) for cur in ("EUR", "JPY")}
    checked = 0
    for figure in got:
        if figure.month < firsts[figure.currency]:
            assert figure.dso is None
            continue
        begin, sales, end, current, dso, cei = _oracle(rows, figure.currency, figure.month, firsts[figure.currency])
        assert (figure.begin_receivables, figure.credit_sales, figure.end_receivables, figure.end_current) == (
            begin, sales, end, current), (figure.currency, str(figure.month))
        assert (figure.dso, figure.cei) == (dso, cei), (figure.currency, str(figure.month))
        checked += 1
    assert checked == 26
    # The SQL aggregates: at most five rows (one per kind) per currency and month, however many invoices.
    moves = runtime_only.store.read("report_receivable_moves", currency=None)
    assert len(moves) <= 5 * len({(r["currency"], r["month"]) for r in moves})


def test_the_baseline_leaves_out_a_window_in_which_the_invoice_was_reminded_before_it_paid(
        runtime_only: Runtime) -> None:
    rt = runtime_only
    rt.service.upsert([Customer(email="ann@example.test", name="Ann")], [
        Invoice(number="X1", customer_email="ann@example.test", currency="EUR", amount_due=100,
                issued_on=date(2025, 12, 1), due_on=date(2026, 1, 1), status="paid", paid_on=date(2026, 1, 10)),
        Invoice(number="X2", customer_email="ann@example.test", currency="EUR", amount_due=100,
                issued_on=date(2025, 12, 1), due_on=date(2026, 1, 1))])
    insert = ("INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, updated_at, sent_at) "
              "SELECT id, ?, 'sent', ?, ?, ?, ? FROM invoices WHERE number = ?")
    insert = insert.replace("?", "%s") if rt.store.backend == "postgres" else insert
    at = datetime(2026, 1, 8, 15, tzinfo=UTC)
    with rt.store.transaction() as tx:
        tx.execute(insert, (7, date(2026, 1, 8), at, at, at, "X1"))  # X1: first reminder is stage 7, on 01-08
        tx.execute(insert, (1, date(2026, 1, 2), at, at, at, "X2"))  # X2: stage 1 on 01-02, never paid
    rows = {r.stage: r for r in stage_effectiveness(rt.store, first=JAN, last=JAN, as_of=date(2026, 3, 1))}
    # Stage 1 baseline: X1 unpaid on its anchor 01-02 and not reminded by then (fr = 01-08 - 01-02 = 6 days).
    # 3 days: reminded only after the window -> eligible; paid 01-10 (d = 8 > 3) -> not paid within 3.
    # 7 and 14 days: reminded on day 6, before paying on day 8 -> its outcome without a reminder is unknown: out.
    assert (rows[1].baseline.unpaid, rows[1].baseline.eligible, rows[1].baseline.paid) == (
        1, {3: 1, 7: 0, 14: 0}, {3: 0, 7: 0, 14: 0})
    assert rows[1].baseline.share(3) == 0 and rows[1].baseline.share(7) is None
    # X2 is stage 1's reminded invoice (unpaid); X1 is stage 7's (paid 2 days after it, d = 2).
    assert rows[1].reminded.paid == {3: 0, 7: 0, 14: 0} and rows[1].reminded.eligible == {3: 1, 7: 1, 14: 1}
    assert rows[7].reminded.paid == {3: 1, 7: 1, 14: 1}
    # Stage 7 baseline: X2 was reminded (01-02) before its anchor 01-08, X1 on it: neither is a baseline invoice.
    assert rows[7].baseline.unpaid == 0


def test_stage_effectiveness_agrees_with_the_definitions_on_a_random_book(runtime_only: Runtime) -> None:
    rt, rng = runtime_only, random.Random(5)
    as_of, first_day, last_day = date(2026, 3, 20), JAN.start, FEB.end
    invoices, sent = [], []
    for n in range(250):
        due = date(2025, 12, 1) + timedelta(days=rng.randrange(90))
        status = rng.choices(["open", "paid", "void", "uncollectible"], [3, 8, 1, 1])[0]
        paid = min(due + timedelta(days=rng.randrange(-5, 40)), as_of - timedelta(days=1)) if status == "paid" else None
        invoices.append(Invoice(number=f"S-{n}", customer_email="ann@example.test", currency=rng.choice(["EUR", "USD"]),
                                amount_due=100, issued_on=due - timedelta(days=30), due_on=due, status=status,
                                paid_on=paid))
        for stage in (-3, 1, 7, 14):  # a reminder goes (sometimes late, sometimes on stale payment news) or not;
            # -3: a courtesy notice before the due date (a negative stage: SQLite once read "+-3 days" as no date)
            day = due + timedelta(days=stage + rng.choice([0, 0, 0, 1, 2]))
            if day < as_of and rng.random() < 0.6:
                sent.append((f"S-{n}", stage, day))
    rt.service.upsert([Customer(email="ann@example.test", name="Ann")], invoices)
    insert = ("INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, updated_at, sent_at) "
              "SELECT id, ?, 'sent', ?, ?, ?, ? FROM invoices WHERE number = ?")
    insert = insert.replace("?", "%s") if rt.store.backend == "postgres" else insert
    at = datetime(2026, 1, 1, tzinfo=UTC)
    with rt.store.transaction() as tx:
        for number, stage, day in sent:
            tx.execute(insert, (stage, day, at, at, at, number))
    by_number = {i.number: i for i in invoices}
    first_sent: dict[str, date] = {}
    for number, _, day in sent:
        first_sent[number] = min(day, first_sent.get(number, day))
    expected: dict[tuple[int, str], list[int]] = {}

    def count(stage: int, group: str, inv: Invoice, anchor: date, fr: int | None) -> None:
        row = expected.setdefault((stage, group), [0, 0] + [0] * 6)
        undated = inv.status == "paid" and inv.paid_on is None
        d = (inv.paid_on - anchor).days if inv.status == "paid" and inv.paid_on else None
        row[0] += 1
        row[1] += undated
        for k, window in enumerate(WINDOWS):
            if not undated and (as_of - anchor).days > window and (fr is None or fr > window or (
                    d is not None and fr > d)):
                row[2 + 2 * k] += 1
                row[3 + 2 * k] += d is not None and d <= window

    def unpaid_on(inv: Invoice, day: date) -> bool:
        return inv.status != "void" and not (inv.status == "paid" and inv.paid_on and inv.paid_on < day)

    for number, stage, day in sent:
        if first_day <= day <= last_day and unpaid_on(by_number[number], day):
            count(stage, "reminded", by_number[number], day, None)
    for stage in sorted({s for _, s, _ in sent}):
        for inv in invoices:
            anchor = inv.due_on + timedelta(days=stage)
            first = first_sent.get(inv.number)
            if first_day <= anchor <= last_day and unpaid_on(inv, anchor) and (first is None or first > anchor):
                count(stage, "baseline", inv, anchor, (first - anchor).days if first else None)
    got = {}
    for r in stage_effectiveness(rt.store, first=JAN, last=FEB, as_of=as_of):
        for group, g in (("reminded", r.reminded), ("baseline", r.baseline)):
            if g.unpaid:
                got[r.stage, group] = [g.unpaid, g.undated] + [x for w in WINDOWS for x in (g.eligible[w], g.paid[w])]
    assert got == expected
    assert sum(v[2] for k, v in expected.items() if k[1] == "baseline") > 20  # the baseline really is exercised
