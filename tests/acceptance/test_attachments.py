"""Attachments (issue 24 item 3): the invoice PDF from ``pdf_path`` or ``<pdf_dir>/<number>.pdf``, a statement of
account per customer (WeasyPrint), frozen with the message at the first attempt (a retry sends the same bytes),
size-limited, path traversal refused, a missing file failing the reminder visibly; each email checked as a mail
client reads it (parsed back from the real aiosmtpd/Maildir delivery with ``policy=default``). Both backends."""

from __future__ import annotations

import email
import email.policy
import hashlib
import mailbox
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import date, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from oncebeat.clock import ClockProcess
from oncebeat.effects import EffectLedger
from oncebeat.errors import ConfigError, ImportRejected
from oncebeat.mail import Mailer, MailSink, build_message_bytes, make_message_id
from oncebeat.provenance import current_source
from oncebeat.reminders.bulk import BulkOptions
from oncebeat.reminders.notices.attachments import (
    Attachment,
    AttachmentError,
    AttachmentPolicy,
    attach,
    attachments_of,
    read_invoice_pdf,
    safe_filename,
)
from oncebeat.reminders.notices.sending import reminder_attachment, reminder_attachments
from oncebeat.reminders.notices.statement import statement_html, statement_pdf, statement_rows
from oncebeat.reminders.policy import policy_from_dict
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.sources.database import source_config
from oncebeat.reminders.syncing import sync_source
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on,pdf_path"


def fake_pdf(text: str) -> bytes:
    """A small file that is a PDF for the attach check (starts with %PDF-); bytes compared exactly."""
    return b"%PDF-1.4\n% " + text.encode() + b"\n" + os.urandom(64) + b"\n%%EOF\n"


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF, by poppler's pdfinfo when installed, else by counting its page objects."""
    if shutil.which("pdfinfo"):
        out = subprocess.run(["pdfinfo", "-"], input=data, capture_output=True, check=True).stdout.decode()
        return int(re.search(r"^Pages:\s+(\d+)", out, re.M).group(1))  # type: ignore[union-attr]
    return len(re.findall(rb"/Type\s*/Page\b(?!s)", data))


def parsed(data: bytes) -> EmailMessage:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


# --------------------------------------------------------------------------- MIME, no database

def message(number: str = "INV-1") -> bytes:
    return build_message_bytes(sender="Billing <billing@example.com>", to="Zoë <zoe@example.com>",
                               subject=f"Invoice {number} is overdue", text="Hello Zoë", html="<p>Hello Zoë</p>",
                               message_id=make_message_id(f"reminder:{number}:7", "example.com"))


def test_a_mail_client_sees_the_body_then_each_pdf_with_its_name_and_bytes() -> None:
    pdf = fake_pdf("one")
    # One message for both calls: its Date header is the wall clock, and a second boundary between two builds
    # would make the determinism check below compare two different inputs.
    base = message()
    data = attach(base, [Attachment(filename="INV-1.pdf", content_type="application/pdf", data=pdf),
                         Attachment(filename="Rechnung-Müller-€.pdf", content_type="application/pdf",
                                    data=b"%PDF-2")], seed="<x@example.com>")
    msg = parsed(data)
    assert msg.get_content_type() == "multipart/mixed" and msg["Subject"] == "Invoice INV-1 is overdue"
    body, first, second = msg.iter_parts()
    assert body.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in body.iter_parts()] == ["text/plain", "text/html"]
    assert first.get_content_type() == "application/pdf" and first.get_filename() == "INV-1.pdf"
    assert first.get_content() == pdf and first.get_content_disposition() == "attachment"
    assert second.get_filename() == "Rechnung-Müller-_.pdf"  # RFC 2231, decoded back whole
    assert b"filename*=utf-8''Rechnung-M%C3%BCller-_.pdf" in data
    assert all(len(line) <= 78 for line in data.split(b"\r\n")), "every line within RFC 5322's 78"
    assert data == attach(base, [Attachment(filename="INV-1.pdf", content_type="application/pdf", data=pdf),
                                 Attachment(filename="Rechnung-Müller-€.pdf", content_type="application/pdf",
                                            data=b"%PDF-2")], seed="<x@example.com>"), "deterministic"


@pytest.mark.parametrize("hostile", ['INV-"7"\r\nBcc: eve@evil.example', "INV-7\nContent-Type: text/html",
                                     "INV-7\u2028X-Evil: 1", '"; filename="evil.exe', "ünï\r\ncödé\" x"])
def test_no_header_can_be_injected_through_a_file_name(hostile: str) -> None:
    name = safe_filename(hostile)
    assert not re.search(r"[\"\\/\r\n\x00-\x1f\u2028]", name) and name.endswith(".pdf")
    data = attach(message(), [Attachment(filename=name, content_type="application/pdf", data=b"%PDF-1")],
                  seed="<x@example.com>")
    msg = parsed(data)
    assert msg["Bcc"] is None and msg["X-Evil"] is None and msg.get_content_type() == "multipart/mixed"
    [got] = attachments_of(data)
    assert got.filename == name and got.content_type == "application/pdf" and got.data == b"%PDF-1"
    assert not any(p.get_filename() == "evil.exe" for p in msg.walk())


def test_the_attachments_section_is_checked_with_every_problem_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        policy_from_dict({"attachments": {"invoice_pdf": "yes", "statement": "sometimes", "max_attachment_bytes": 5,
                                          "pdf_dri": "x"}}, "oncebeat.toml", base_dir=tmp_path)
    text = str(info.value)
    for part in ("[attachments] invoice_pdf", "must be true or false", "\"final\"", "max_attachment_bytes",
                 "pdf_dri is not a known key"):
        assert part in text, text
    with pytest.raises(ConfigError, match="needs pdf_dir"):
        policy_from_dict({"attachments": {"invoice_pdf": True}}, "oncebeat.toml", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        policy_from_dict({"attachments": {"invoice_pdf": True, "pdf_dir": "nope"}}, "t", base_dir=tmp_path)
    with pytest.raises(ConfigError) as across:  # a cross-field problem names the file as the others do
        policy_from_dict({"reminders": {"stages": [1, 7]}, "attachments": {"statement": [7, 30]}},
                         str(tmp_path / "oncebeat.toml"))
    assert str(across.value).startswith(f"{tmp_path / 'oncebeat.toml'}: [attachments] statement = [7, 30] names a "
                                        "stage the ladder [1, 7] does not have. List stages"), str(across.value)
    (tmp_path / "pdf").mkdir()
    p = policy_from_dict({"attachments": {"invoice_pdf": True, "pdf_dir": "pdf", "statement": [30, 14]}}, "t",
                         base_dir=tmp_path)
    assert p.attachments == AttachmentPolicy(invoice_pdf=True, pdf_dir=tmp_path / "pdf", statement=(14, 30))
    assert p.attachments.wants_statement(30, p.stages) and not p.attachments.wants_statement(7, p.stages)
    final = AttachmentPolicy(statement="final")
    assert final.wants_statement(30, (1, 7, 14, 30)) and not final.wants_statement(14, (1, 7, 14, 30))


# --------------------------------------------------------------------------- reading a PDF from its folder

def test_the_pdf_is_read_only_from_inside_its_folder(tmp_path: Path) -> None:
    root = tmp_path / "pdf"
    (root / "2026").mkdir(parents=True)
    outside = tmp_path / "secret.pdf"
    outside.write_bytes(fake_pdf("secret"))
    (root / "INV-1.pdf").write_bytes(fake_pdf("one"))
    (root / "2026" / 'odd "name"\nx.pdf').write_bytes(fake_pdf("odd"))
    (root / "link.pdf").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp_path)
    (root / "inner-link.pdf").symlink_to(root / "INV-1.pdf")  # a symlink that stays inside is fine
    (root / "INV-3.pdf").write_bytes(b"<html>not a pdf")
    (root / "INV-4.pdf").write_bytes(fake_pdf("big") + b"x" * 5000)
    os.mkfifo(root / "INV-5.pdf")
    policy = AttachmentPolicy(invoice_pdf=True, pdf_dir=root)

    def read(number: str, path: str | None = None, limit: int = 4096) -> Attachment:
        return read_invoice_pdf(policy, number=number, pdf_path=path, limit=limit)

    assert read("INV-1").data == (root / "INV-1.pdf").read_bytes() and read("INV-1").filename == "INV-1.pdf"
    got = read("INV-2", '2026/odd "name"\nx.pdf')
    assert got.data.startswith(b"%PDF-1.4\n% odd") and got.filename == "INV-2.pdf"
    assert read("INV-9", "inner-link.pdf").data == (root / "INV-1.pdf").read_bytes()
    assert read("INV-9", str(root / "INV-1.pdf")).size > 0  # an absolute path inside the folder
    refusals = {("INV-2", "../secret.pdf"): "outside [attachments] pdf_dir",
                ("INV-2", str(outside)): "outside [attachments] pdf_dir",
                ("INV-2", "link.pdf"): "outside [attachments] pdf_dir",
                ("INV-2", "dirlink/secret.pdf"): "outside [attachments] pdf_dir",
                ("../secret", None): "starts with '.'",
                ("a/../../secret", None): "holds '/'",
                ("INV-2", None): "is missing",
                ("INV-3", None): "is not a PDF",
                ("INV-4", None): "max_attachment_bytes",
                ("INV-5", None): "not a regular file",
                ("INV-\r\n6", None): "control character"}
    for (number, path), why in refusals.items():
        with pytest.raises(AttachmentError) as info:
            read(number, path)
        assert why in str(info.value) and repr(number) in str(info.value), str(info.value)
    os.chmod(root / "INV-1.pdf", 0)
    if os.geteuid() != 0:  # root reads any file: the permission case needs an ordinary user
        with pytest.raises(AttachmentError, match="cannot be read"):
            read("INV-1")


def test_a_statement_lists_open_invoices_per_currency_never_adding_currencies(store: Store, sim_clock: SimulatedClock,
                                                                              tmp_path: Path) -> None:
    service = ReminderService(store, policy_from_dict({}), clock=sim_clock)
    csv = tmp_path / "i.csv"
    csv.write_text("\n".join([HEADER.removesuffix(",pdf_path"),
                              "S-1,ana@example.com,Ana <b>&</b>,EUR,100.00,2026-01-01,2026-01-10",
                              "S-2,ana@example.com,Ana <b>&</b>,EUR,50.00,2026-01-01,2026-03-20",
                              "S-3,ana@example.com,Ana <b>&</b>,USD,7.25,2025-10-01,2025-11-01",
                              "S-4,bob@example.com,Bob,EUR,999.00,2026-01-01,2026-01-10"]) + "\n")
    service.import_invoices_csv(csv, BulkOptions(today=date(2026, 3, 1)))
    rows = statement_rows(store, email="ana@example.com", as_of=date(2026, 3, 1))
    assert [(c["currency"], c["total"], [i["number"] for i in c["invoices"]]) for c in rows] == [
        ("EUR", 15000, ["S-1", "S-2"]), ("USD", 725, ["S-3"])]
    assert rows[0]["buckets"] == {"current": 5000, "1-30": 0, "31-60": 10000, "61-90": 0, "90+": 0}
    assert rows[1]["buckets"] == {"current": 0, "1-30": 0, "31-60": 0, "61-90": 0, "90+": 725}  # 120 days
    html = statement_html(rows, customer_name="Ana <b>&</b>", email="ana@example.com", locale="de_DE",
                          company="Example Co", as_of=date(2026, 3, 1))
    assert "Ana &lt;b&gt;&amp;&lt;/b&gt;" in html and "<b>&</b>" not in html  # autoescaped
    assert "150,00\xa0€" in html and "7,25\xa0$" in html and "157" not in html  # per currency, never added
    pdf = statement_pdf(store, email="ana@example.com", customer_name="Ana", locale="en_US", company="Example Co",
                        as_of=date(2026, 3, 1))
    assert pdf.data.startswith(b"%PDF-") and pdf_pages(pdf.data) >= 1 and pdf.filename == "statement-2026-03-01.pdf"


STATEMENT_ROWS = [{"currency": "EUR", "total": 133350,
                   "buckets": {"current": 9900, "1-30": 0, "31-60": 123450, "61-90": 0, "90+": 0},
                   "invoices": [{"number": "RE-42", "issued_on": date(2026, 1, 5), "due_on": date(2026, 2, 4),
                                 "days": 40, "amount_due": 123450},
                                {"number": "RE-77", "issued_on": date(2026, 3, 1), "due_on": date(2026, 3, 31),
                                 "days": -5, "amount_due": 9900}]}]
ENGLISH = ("Statement of account", "Open invoices", "Days overdue", "Amount open", "not yet due", "Total open",
           "current", " days", "Amounts are shown", "As of", "Issued")


@pytest.mark.parametrize(("locale", "fallback", "words"), [
    ("de_DE", "en_US", ["Kontoauszug", "Offene Rechnungen in EUR", "Tage überfällig", "noch nicht fällig",
                        "Offen gesamt in EUR (2 Rechnungen)", "nicht fällig", "31-60 Tage", "Stand: 16.03.2026",
                        "1.234,50\xa0€"]),
    ("fr_CA", "en_US", ["Relevé de compte", "Factures ouvertes en EUR", "pas encore échue", "31-60 jours",
                        "Au 16 mars 2026"]),
    ("es_ES", "en_US", ["Estado de cuenta", "Facturas pendientes en EUR", "aún no vencida", "31-60 días"]),
    ("ja_JP", "fr_FR", ["Relevé de compte", "Au 16 mars 2026", "1\u202f234,50\xa0€"]),  # no catalog: the fallback
])
def test_a_statement_is_in_the_customers_language_as_the_reminder_emails_are(locale: str, fallback: str,
                                                                              words: list[str]) -> None:
    html = statement_html(STATEMENT_ROWS, customer_name="Jürgen Müller", email="jm@example.de", locale=locale,
                          company="Beispiel GmbH", as_of=date(2026, 3, 16), fallback_locale=fallback)
    for word in words:
        assert word in html, (locale, word)
    for english in ENGLISH:
        assert english not in html, (locale, english)


# --------------------------------------------------------------------------- end to end, both backends

def book(tmp_path: Path, today: date, *rows: str) -> Path:
    due = today - timedelta(days=31)
    lines = [HEADER] + [r.format(issued=due - timedelta(days=30), due=due) for r in rows]
    path = tmp_path / "book.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def policy(tmp_path: Path, **attachments: Any) -> Any:
    (tmp_path / "pdf").mkdir(exist_ok=True)
    return policy_from_dict({"reminders": {"stages": [1, 7, 14, 30], "collapse": "highest"},
                             "attachments": {"pdf_dir": "pdf", **attachments}}, "oncebeat.toml", base_dir=tmp_path)


def run(store: Store, sim_clock: SimulatedClock, pol: Any, sink: MailSink, *, scan: bool = True) -> ReminderService:
    mailer = Mailer(sink.url)
    try:
        service = ReminderService(store, pol, clock=sim_clock, mailer=mailer)
        app = build_app(service)
        if scan:
            clock = ClockProcess(app, store, clock=sim_clock)
            clock.start()
            sim_clock.set(app.schedules["reminders"].schedule().next_after(sim_clock.now()))
            clock.tick()
        Worker(app, store, clock=sim_clock).drain()
        return service
    finally:
        mailer.close()


def delivered(maildir: Path) -> list[bytes]:
    return [m.as_bytes() for m in mailbox.Maildir(maildir, factory=None)]


def states(store: Store) -> dict[str, tuple[str, str | None]]:
    out = {}
    for number in ("INV-1", "INV-2", "INV-3"):
        for row in store.read("invoice_by_number", number=number):
            [r] = store.read("reminders_of_invoice", invoice_id=row["id"])
            out[number] = (r["state"], r["reason"])
    return out


def test_each_reminder_carries_its_invoice_pdf_and_a_statement_as_a_mail_client_sees_them(
        store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> None:
    pol = policy(tmp_path, invoice_pdf=True, statement="final")
    files = {"INV-1.pdf": fake_pdf("one"), "sub/INV 2 \"q\".pdf": fake_pdf("two")}
    (tmp_path / "pdf" / "sub").mkdir()
    for name, data in files.items():
        (tmp_path / "pdf" / name).write_bytes(data)
    today = sim_clock.now().date()
    csv = book(tmp_path, today, "INV-1,ana@example.com,Ana,EUR,12.50,{issued},{due},",
               'INV-2,bob@example.com,Bob,USD,99.00,{issued},{due},"sub/INV 2 ""q"".pdf"')
    ReminderService(store, pol, clock=sim_clock).import_invoices_csv(csv, BulkOptions(today=today))
    sink = MailSink(tmp_path / "maildir").start()
    try:
        run(store, sim_clock, pol, sink)
    finally:
        sink.stop()
    assert states(store) == {"INV-1": ("sent", None), "INV-2": ("sent", None)}
    by_number = {parsed(d)["X-Oncebeat-Invoice"]: parsed(d) for d in delivered(tmp_path / "maildir")}
    for number, file in (("INV-1", "INV-1.pdf"), ("INV-2", "sub/INV 2 \"q\".pdf")):
        msg = by_number[number]
        assert msg.get_content_type() == "multipart/mixed"
        body, pdf, statement = msg.iter_parts()
        assert body.get_content_type() == "multipart/alternative"
        assert pdf.get_content_type() == "application/pdf" and pdf.get_filename() == f"{number}.pdf"
        assert pdf.get_content() == (tmp_path / "pdf" / file).read_bytes()
        content = statement.get_content()
        assert statement.get_content_type() == "application/pdf" and statement.get_filename().startswith("statement-")
        assert content.startswith(b"%PDF-") and pdf_pages(content) >= 1
        [invoice] = store.read("invoice_by_number", number=number)
        [recorded] = reminder_attachments(store, invoice["id"]).values()
        assert [(a["filename"], a["size"], a["sha256"]) for a in recorded] == [
            (p.get_filename(), len(p.get_content()), hashlib.sha256(p.get_content()).hexdigest())
            for p in (pdf, statement)]
        assert reminder_attachment(store, recorded[0]["reminder_id"], 1)["content"] == content  # type: ignore[index]


def test_a_missing_pdf_fails_the_reminder_visibly_and_a_retry_after_the_fix_sends_it(
        store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> None:
    pol = policy(tmp_path, invoice_pdf=True, max_attachment_bytes=4096)
    today = sim_clock.now().date()
    (tmp_path / "pdf" / "INV-2.pdf").write_bytes(fake_pdf("two") + b"x" * 5000)
    (tmp_path / "secret.pdf").write_bytes(fake_pdf("secret"))
    csv = book(tmp_path, today, "INV-1,ana@example.com,Ana,EUR,12.50,{issued},{due},",
               "INV-2,bob@example.com,Bob,EUR,12.50,{issued},{due},",
               "INV-3,cy@example.com,Cy,EUR,12.50,{issued},{due},evil.pdf")
    (tmp_path / "pdf" / "evil.pdf").symlink_to(tmp_path / "secret.pdf")
    service = ReminderService(store, pol, clock=sim_clock)
    service.import_invoices_csv(csv, BulkOptions(today=today))
    with pytest.raises(ImportRejected) as info:
        service.import_invoices_csv(book(tmp_path, today, "INV-3,cy@example.com,Cy,EUR,1,{issued},{due},../x.pdf"),
                                    BulkOptions(today=today))
    [problem] = info.value.problems
    assert "book.csv:2" in problem and "pdf_path" in problem and "'..' part" in problem, problem
    sink = MailSink(tmp_path / "maildir").start()
    try:
        run(store, sim_clock, pol, sink)
        got = states(store)
        assert {n: s for n, (s, _) in got.items()} == {"INV-1": "failed", "INV-2": "failed", "INV-3": "failed"}
        assert "'INV-1'" in got["INV-1"][1] and "is missing" in got["INV-1"][1] and "INV-1.pdf" in got["INV-1"][1]
        assert "'INV-2'" in got["INV-2"][1] and "max_attachment_bytes" in got["INV-2"][1]
        assert "'INV-3'" in got["INV-3"][1] and "outside [attachments] pdf_dir" in got["INV-3"][1]
        assert delivered(tmp_path / "maildir") == []  # nothing went out without its attachment
        (tmp_path / "pdf" / "INV-1.pdf").write_bytes(fake_pdf("one"))
        service.retry_failed(source=current_source("cli"))
        run(store, sim_clock, pol, sink, scan=False)
    finally:
        sink.stop()
    assert states(store)["INV-1"] == ("sent", None) and states(store)["INV-2"][0] == "failed"
    [msg] = [parsed(d) for d in delivered(tmp_path / "maildir")]
    assert [a.get_content() for a in msg.iter_attachments()] == [(tmp_path / "pdf" / "INV-1.pdf").read_bytes()]


def test_a_retry_sends_the_statement_frozen_at_the_first_attempt_not_a_new_one(
        store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> None:
    pol = policy(tmp_path, statement="always")
    today = sim_clock.now().date()
    csv = book(tmp_path, today, "INV-1,ana@example.com,Ana,EUR,12.50,{issued},{due},")
    service = ReminderService(store, pol, clock=sim_clock)
    service.import_invoices_csv(csv, BulkOptions(today=today))
    sink = MailSink(tmp_path / "maildir").start()
    sink.stop()  # the relay is down: the first attempt freezes the message, then cannot connect
    run(store, sim_clock, pol, sink)
    [r] = store.read("reminders_page", number=None, email=None, state=None, after_id=0, limit=10)
    assert r["state"] == "pending" and "mail outage" in r["reason"]
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("cli"))
    frozen = bytes(ledger.get(f"reminder:{r['id']}")["frozen"])  # type: ignore[index]
    [first_statement] = attachments_of(frozen)
    # Meanwhile the customer gets a second open invoice: a statement made now would list it.
    service.import_invoices_csv(book(tmp_path, today, "INV-9,ana@example.com,Ana,EUR,70.00,{issued},{due},"),
                                BulkOptions(today=today))
    sink.start()
    try:
        sim_clock.advance(300)
        run(store, sim_clock, pol, sink, scan=False)
    finally:
        sink.stop()
    [sent] = [d for d in delivered(tmp_path / "maildir") if parsed(d)["X-Oncebeat-Invoice"] == "INV-1"]
    [statement] = attachments_of(sent)
    assert statement.sha256 == first_statement.sha256, "the retry sent the statement frozen at the first attempt"
    assert parsed(sent)["Date"] == parsed(frozen)["Date"]  # the first attempt's message, not a new rendering
    assert sent.replace(b"\r\n", b"\n").endswith(frozen.replace(b"\r\n", b"\n").partition(b"\n\n")[2])


def test_the_sql_source_maps_a_column_to_pdf_path(store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> None:
    team = tmp_path / "team.sqlite3"
    with sqlite3.connect(team) as db:
        db.execute("CREATE TABLE inv (number TEXT, email TEXT, name TEXT, cur TEXT, cents INTEGER, issued TEXT, "
                   "due TEXT, pdf TEXT)")
        db.execute("INSERT INTO inv VALUES ('T-1', 'ana@example.com', 'Ana', 'EUR', 1250, '2026-01-01', "
                   "'2026-01-31', 'exports/2026/t1.pdf')")
    db.close()
    cfg = source_config({"url": f"sqlite:///{team}", "invoices": (
        "SELECT number AS invoice_number, email AS customer_email, name AS customer_name, cur AS currency, "
        "cents AS amount_due_minor, issued AS issued_on, due AS due_on, pdf AS pdf_path FROM inv")}, source="t")
    service = ReminderService(store, policy_from_dict({}), clock=sim_clock)
    sync_source(service, cfg)
    [row] = store.read("invoice_by_number", number="T-1")
    assert row["pdf_path"] == "exports/2026/t1.pdf"


def test_quotes_in_an_invoice_number_reach_no_header_of_the_delivered_email(store: Store, sim_clock: SimulatedClock,
                                                                            tmp_path: Path) -> None:
    pol = policy(tmp_path, invoice_pdf=True)
    today = sim_clock.now().date()
    number = 'INV-"Q"; filename="evil.exe'
    (tmp_path / "pdf" / f"{number}.pdf").write_bytes(fake_pdf("quoted"))
    csv = book(tmp_path, today, '"INV-""Q""; filename=""evil.exe",ana@example.com,Ana,EUR,12.50,{issued},{due},')
    ReminderService(store, pol, clock=sim_clock).import_invoices_csv(csv, BulkOptions(today=today))
    sink = MailSink(tmp_path / "maildir").start()
    try:
        run(store, sim_clock, pol, sink)
    finally:
        sink.stop()
    [data] = delivered(tmp_path / "maildir")
    msg = parsed(data)
    [pdf] = list(msg.iter_attachments())
    assert pdf.get_filename() == "INV-_Q_filename_evil.exe.pdf" and pdf.get_content_type() == "application/pdf"
    assert pdf.get_content() == (tmp_path / "pdf" / f"{number}.pdf").read_bytes()
    assert not any(p.get_filename() == "evil.exe" for p in msg.walk())


def test_a_host_without_pango_gets_the_install_command_not_a_traceback(tmp_path: Path) -> None:
    # WeasyPrint raises OSError at import when Debian's Pango is missing ("cannot load library 'libpango-1.0-0'");
    # a shadowing package raising the same stands in for a host without the library, in a real subprocess.
    (tmp_path / "weasyprint").mkdir()
    (tmp_path / "weasyprint" / "__init__.py").write_text(
        "raise OSError(\"cannot load library 'libpango-1.0-0': libpango-1.0-0: cannot open shared object file\")\n")
    code = ("from oncebeat.reminders.notices.statement import html_to_pdf\n"
            "from oncebeat.reminders.notices.attachments import AttachmentError\n"
            "try:\n    html_to_pdf('<p>x</p>')\nexcept AttachmentError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert "apt-get install libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core" in out.stdout, out
    assert "cannot load library" in out.stdout and "Traceback" not in out.stderr
