"""Proof of notice (issue 24 item 6) on both backends: one invoice whose four stages end four ways, through a real
aiosmtpd server: stage 1 in doubt (reply lost) then resolved delivered by an operator, stage 7 sent, stage 14 held
by a manual hold, stage 30 skipped because the invoice was paid between the scan and the send. The record (JSON)
names each state, its reason, its ids, and the SHA-256 of the exact bytes the server received; the PDF carries
the same, and its embedded JSON is byte for byte the record whose SHA-256 it prints."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.effects import EffectLedger
from oncebeat.provenance import cli_operator, current_source
from oncebeat.reminders.holds import place_hold, release_holds
from oncebeat.reminders.model import Payment
from oncebeat.reminders.notices.evidence import EvidenceRecord, build_evidence
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

CHICAGO = ZoneInfo("America/Chicago")
NUMBER = "INV-EV-1"


def fire(day: int) -> datetime:
    """The daily 08:00 America/Chicago fire of 2026-03-``day`` (CST, then CDT from March 8) in UTC."""
    return datetime(2026, 3, day, 8, 0, tzinfo=CHICAGO).astimezone(UTC)


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)))
    yield h
    h.close()
    sink.stop()


def _sink_bytes(harness: Harness) -> list[bytes]:
    """Each stored message as the server received it: the sink's trace lines (Return-Path, Delivered-To) removed
    and its line ends back to CRLF (the Maildir stores LF; the message oncebeat builds has CRLF line ends only)."""
    out = []
    for sub in ("new", "cur"):
        for path in sorted((harness.sink.maildir / sub).glob("*")):
            data = path.read_bytes()
            while data.startswith((b"Return-Path:", b"Delivered-To:")):
                data = data.split(b"\n", 1)[1]
            out.append(data.replace(b"\n", b"\r\n"))
    return out


@pytest.fixture
def story(harness: Harness) -> dict[str, object]:
    """Run the month of March 2026 day by day; return what the test needs to compare the record with."""
    harness.add_invoices(invoice(NUMBER, date(2026, 3, 1)))
    cli = current_source("cli", operator=cli_operator())
    harness.sink.faults.drop_before_reply_next(1)  # stage 1: the final "." went out, the reply never came
    harness.tick_to(fire(2))
    harness.new_worker().drain()
    (first,) = harness.reminders()
    assert first["state"] == "in_doubt"
    key = f"reminder:{first['id']}"
    frozen = EffectLedger(harness.store, clock=harness.clock, source=cli).get(key)
    assert frozen is not None and frozen["frozen"] is not None
    doubt_sha = hashlib.sha256(bytes(frozen["frozen"])).hexdigest()
    harness.service.resolve_effect(key, "done", source=cli)  # the operator found it in the relay's log
    hold_id = None
    for day in range(3, 32):
        if day == 10:
            hold = place_hold(harness.store, clock=harness.clock, zone=harness.policy.zone, source=cli,
                              reason="manual", invoice=NUMBER, customer=None, until=None,
                              note="customer on the phone with sales")
            assert hold is not None
            hold_id = hold.id
        if day == 16:
            release_holds(harness.store, clock=harness.clock, zone=harness.policy.zone, source=cli, hold_id=hold_id,
                          note="call done")
        harness.tick_to(fire(day))
        worker = harness.new_worker()
        if day == 31:
            worker.drain(max_batches=1)  # the scan creates stage 30; paid before its send job runs
            harness.service.apply_payments([Payment(number=NUMBER, paid_on=date(2026, 3, 31))])
        worker.drain()
    received = _sink_bytes(harness)
    assert len(received) == 1  # stage 7 only: stage 1's copy was lost with its reply, 14 held, 30 skipped
    return {"doubt_sha": doubt_sha, "received": received[0], "hold_id": hold_id}


def test_the_record_names_each_stage_its_reason_its_ids_and_the_bytes_sent(harness: Harness,
                                                                             story: dict[str, object]) -> None:
    record = build_evidence(harness.service, NUMBER, database="test database")
    assert record.sha256 == hashlib.sha256(record.text.encode("utf-8")).hexdigest()
    assert json.loads(record.text) == record.data
    data = record.data
    assert data["schema"] == "oncebeat.evidence/1"
    assert (data["invoice"]["number"], data["invoice"]["amount_due_minor"], data["invoice"]["currency"]) == (
        NUMBER, 12_345, "USD")
    stages = {s["stage"]: s for s in data["stages"]}
    assert [(s["stage"], s["state"], s["why"]["kind"]) for s in data["stages"]] == [
        (1, "sent", "sent"), (7, "sent", "sent"), (14, "held", "held"), (30, "skipped", "paid")]
    rows = {r["stage"]: r for r in harness.reminders()}
    ledger = EffectLedger(harness.store, clock=harness.clock, source=current_source("cli"))
    for stage, s in stages.items():
        p = s["provenance"]
        assert p["reminder_id"] == rows[stage]["id"]
        assert p["occurrence_id"] == rows[stage]["occurrence_id"] == p["occurrence"]["id"]
        assert p["occurrence"]["schedule_key"] == "reminders" and p["occurrence"]["scan_job_id"] is not None
        assert s["business_date"] == rows[stage]["business_date"].isoformat()

    # Stage 1: in doubt, resolved done by the operator through the CLI; the bytes' SHA-256 is that of the frozen
    # message the ledger held while it was in doubt (it drops them once done).
    one = stages[1]
    assert one["in_doubt"]["resolution"]["outcome"] == "done"
    assert one["in_doubt"]["resolution"]["by"]["via"] == "cli"
    assert "UNKNOWN" in one["in_doubt"]["detail"] or "outcome unknown" in one["in_doubt"]["detail"]
    assert one["message"]["sha256"] == story["doubt_sha"] and one["message"]["bytes_kept"] is False
    assert one["message_id"] == rows[1]["message_id"]
    assert [e["kind"] for e in one["provenance"]["effect_events"]] == ["effect.in_doubt", "effect.reconciled"]

    # Stage 7: sent; the SHA-256 is that of the bytes the SMTP server received, its reply kept.
    seven = stages[7]
    received = story["received"]
    assert isinstance(received, bytes)
    assert seven["message"]["sha256"] == hashlib.sha256(received).hexdigest()
    assert seven["message"]["size"] == len(received)
    assert ["Message-ID", seven["message_id"]] in seven["message"]["headers"]
    assert seven["message_id"] == rows[7]["message_id"]
    assert seven["smtp_reply"].startswith("250")
    effect = ledger.get(f"reminder:{rows[7]['id']}")
    assert effect is not None
    assert seven["provenance"]["effect"]["key"] == effect["key"] and seven["provenance"]["effect"]["state"] == "done"
    assert seven["provenance"]["effect"]["job_id"] == effect["job_id"]
    assert effect["job_id"] in [j["id"] for j in seven["provenance"]["send_jobs"]]
    sent = seven["times"]["sent"]
    assert sent["utc"].endswith("Z") and sent["business"].endswith("-05:00")  # CDT after March 8
    assert sent["customer"].endswith("-03:00")  # America/Sao_Paulo
    assert datetime.fromisoformat(sent["business"]) == datetime.fromisoformat(sent["utc"].replace("Z", "+00:00"))

    # Stage 14: held by the manual hold, who placed it and why.
    fourteen = stages[14]
    assert fourteen["hold"]["id"] == story["hold_id"] and fourteen["hold"]["reason"] == "manual"
    assert fourteen["hold"]["note"] == "customer on the phone with sales" and fourteen["hold"]["placed_by"]
    assert fourteen["hold"]["released_at"] is not None and fourteen["message"] is None

    # Stage 30: skipped as paid, never frozen, never sent.
    thirty = stages[30]
    assert thirty["reason"] == "invoice paid on 2026-03-31"
    assert thirty["message"] is None and thirty["message_id"] is None and thirty["provenance"]["effect"] is None
    jobs = thirty["provenance"]["send_jobs"]
    assert jobs and all(j["state"] == "completed" for j in jobs)


def _pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils (pdftotext) is not installed")
def test_the_pdf_prints_the_invoice_each_stage_and_the_sha256_of_the_json_it_embeds(
        harness: Harness, story: dict[str, object], tmp_path: Path) -> None:
    from oncebeat.reminders.notices.evidence_pdf import evidence_pdf

    record = build_evidence(harness.service, NUMBER, database="test database")
    pdf = evidence_pdf(record)
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    path = tmp_path / "evidence.pdf"
    path.write_bytes(pdf)
    text = _pdf_text(path)
    assert NUMBER in text and "Example Co" in text and "Ana Lima" in text and "$123.45" in text
    for stage, state in ((1, "SENT"), (7, "SENT"), (14, "HELD"), (30, "SKIPPED")):
        assert f"Stage {stage} · {state}" in text
    assert record.sha256 in text
    assert "invoice paid on 2026-03-31" in text and "resolved done" in text
    out = tmp_path / "embedded"
    out.mkdir()
    subprocess.run(["pdfdetach", "-saveall", "-o", str(out), str(path)], check=True, capture_output=True)
    (embedded,) = out.iterdir()
    assert embedded.name == f"evidence-{NUMBER}.json"
    assert embedded.read_bytes() == record.text.encode("utf-8")
    assert hashlib.sha256(embedded.read_bytes()).hexdigest() == record.sha256


def _oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, capture_output=True, timeout=300)


def test_the_cli_prints_the_record_and_writes_the_pdf_with_the_same_sha256(harness: Harness,
                                                                          story: dict[str, object],
                                                                          tmp_path: Path) -> None:
    db = harness.store.url
    done = _oncebeat("evidence", NUMBER, "--json", "--pdf", "ev.pdf", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    sha = hashlib.sha256(done.stdout).hexdigest()
    assert f"record SHA-256 {sha}" in done.stderr.decode()
    assert [s["state"] for s in data["stages"]] == ["sent", "sent", "held", "skipped"]
    assert (tmp_path / "ev.pdf").read_bytes().startswith(b"%PDF-")
    assert EvidenceRecord(data=data, text=done.stdout.decode(), sha256=sha).number == NUMBER
    # Every record built for a person is audited as a read of customer data.
    events = harness.store.read("events_of_subject", subject=f"invoice:{NUMBER}", limit=10)
    assert [e["kind"] for e in events] == ["reminders.evidence_read"]
    assert events[0]["detail"]["record_sha256"] == sha and events[0]["detail"]["form"] == "json+pdf"
    assert events[0]["detail"]["operator"]["via"] == "cli"

    text = _oncebeat("evidence", NUMBER, "--db", db, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.decode()
    assert "stage 14: held (held)" in lines and "stage 30: skipped (paid) - invoice paid on 2026-03-31" in lines
    assert "resolved done" in lines
    # each sent stage says who got it and what it said, as the JSON's headers do (the fresh-eyes test missed them)
    to = next(v for s in data["stages"] if s["message"] for k, v in s["message"]["headers"] if k == "To")
    assert f"  To: {to}" in lines and "  Subject: " in lines

    with_bytes = _oncebeat("evidence", NUMBER, "--json", "--include-message", "--db", db, cwd=tmp_path)
    assert with_bytes.returncode == 0
    # Delivered messages' bytes are not kept (their SHA-256 is): nothing to include for this invoice.
    assert all("base64" not in (s["message"] or {}) for s in json.loads(with_bytes.stdout)["stages"])

    missing = _oncebeat("evidence", "INV-NOPE", "--pdf", "nope.pdf", "--db", db, cwd=tmp_path)
    assert missing.returncode == 2 and b"no invoice 'INV-NOPE'" in missing.stderr
    assert b"Traceback" not in missing.stderr and not (tmp_path / "nope.pdf").exists()
