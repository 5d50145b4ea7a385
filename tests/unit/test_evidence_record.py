"""The proof-of-notice record of one stage from its recorded rows (no database): states and reasons this version
does not know (``deferred`` by a cap, a calendar move) are shown as recorded, in the JSON and in the PDF, never
refused; a superseded stage names the row that records it; a hostile customer name stays text in the PDF."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from oncebeat.reminders.notices.digest import message_facts
from oncebeat.reminders.notices.evidence import SCHEMA, EvidenceRecord, Zones, canonical_json, stage_record

AT = datetime(2026, 3, 9, 13, 0, tzinfo=UTC)
ZONES = Zones("America/Chicago", "Asia/Tokyo")


def row(**fields: Any) -> dict[str, Any]:
    return {"id": 7, "stage": 7, "state": "pending", "reason": None, "business_date": date(2026, 3, 9),
            "occurrence_id": None, "message_id": None, "created_at": AT, "updated_at": AT, "sent_at": None,
            "deferred_since": None, "hold_id": None, "superseded_by": None} | fields


def record(stages: list[dict[str, Any]], name: str = "Ana") -> EvidenceRecord:
    data = {"schema": SCHEMA, "generated_at": ZONES.instant(AT), "generated_by": "oncebeat test", "database": "x",
            "company": "Example Co", "zones": {"business": "America/Chicago", "customer": "Asia/Tokyo", "note": None},
            "invoice": {"number": "INV-U", "status": "open", "currency": "JPY", "amount_due_minor": 5000,
                        "amount_due": "¥5,000", "issued_on": "2026-02-01", "due_on": "2026-03-01", "paid_on": None},
            "customer": {"name": name, "email": "ana@example.com", "locale": "ja_JP", "tz": "Asia/Tokyo"},
            "include_message": False, "stages": stages}
    text = canonical_json(data)
    return EvidenceRecord(data=data, text=text, sha256=hashlib.sha256(text.encode()).hexdigest())


@pytest.mark.parametrize(("state", "reason"), [
    ("deferred", "deferred: customer cap of 2 notices per 7 days reached (next 2026-03-12)"),
    ("deferred", "calendar: 2026-03-09 is a holiday in US (moved to 2026-03-10)"),
    ("escalated", None),
])
def test_a_state_this_version_does_not_know_is_shown_as_recorded(state: str, reason: str | None) -> None:
    s = stage_record(row(state=state, reason=reason), effect=None, hold=None, occurrence=None, send_jobs=[],
                     events=[], zones=ZONES)
    assert (s["state"], s["why"]) == (state, {"kind": state, "text": reason or state})
    assert s["times"]["created"] == {"utc": "2026-03-09T13:00:00Z", "business": "2026-03-09T08:00:00-05:00",
                                     "customer": "2026-03-09T22:00:00+09:00"}


def test_skip_reasons_are_classified_and_a_superseded_stage_names_its_row() -> None:
    kinds = [stage_record(row(state="skipped", reason=reason), effect=None, hold=None, occurrence=None, send_jobs=[],
                          events=[], zones=ZONES)["why"]["kind"]
             for reason in ("invoice paid on 2026-03-02", "invoice void", "superseded: stage 14 became due at the "
                            "same time", "customer asked us to stop")]
    assert kinds == ["paid", "void", "superseded", "skipped"]
    s = stage_record(row(stage=1, state="skipped", reason="superseded: stage 7 became due at the same time",
                         superseded_by=7), effect=None, hold=None, occurrence=None, send_jobs=[], events=[],
                     zones=ZONES)
    assert (s["provenance"]["reminder_id"], s["provenance"]["recorded_in_reminder"]) == (None, 7)


def test_a_failed_stage_keeps_the_server_reply_and_the_frozen_bytes_hash() -> None:
    data = (b"From: a@example.com\r\nTo: b@example.com\r\nMessage-ID: <m@x>\r\n"
            b"Subject: =?utf-8?q?R=C3=A9?=\r\n\r\nhi\r\n")
    effect = {"key": "reminder:7", "state": "failed", "job_id": 3, "attempt": 1, "frozen": data, "result": None,
              "detail": "PermanentMailError: 550 no such user", "started_at": AT, "finished_at": AT,
              "no_return_at": AT, "source_kind": "worker", "source_host": "h", "source_pid": 1, "source_name": "w",
              "source_version": "1"}
    s = stage_record(row(state="failed", reason="SMTP rejected: 550 no such user"), effect=effect, hold=None,
                     occurrence=None, send_jobs=[], events=[], zones=ZONES, include_message=True)
    assert s["smtp_reply"] == "SMTP rejected: 550 no such user" and s["why"]["kind"] == "failed"
    assert s["message"]["sha256"] == hashlib.sha256(data).hexdigest() and s["message"]["bytes_kept"] is True
    assert ["Subject", "Ré"] in s["message"]["headers"] and s["message_id"] == "<m@x>"
    assert s["message"]["base64"] and s["provenance"]["effect"]["source"]["kind"] == "worker"
    assert message_facts(data)["size"] == len(data)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils (pdftotext) is not installed")
def test_the_pdf_renders_unknown_states_and_keeps_markup_in_customer_data_as_text(tmp_path: Path) -> None:
    from oncebeat.reminders.notices.evidence_pdf import evidence_html, evidence_pdf

    stages = [stage_record(row(stage=n, state=state, reason=reason), effect=None, hold=None, occurrence=None,
                           send_jobs=[], events=[], zones=ZONES)
              for n, state, reason in ((1, "deferred", "calendar: moved to 2026-03-10 (holiday)"),
                                       (7, "mystery", None))]
    hostile = '<img src="http://127.0.0.1:9/x"><script>alert(1)</script>"}'
    rec = record(stages, name=hostile)
    assert "<script>" not in evidence_html(rec) and "&lt;script&gt;" in evidence_html(rec)
    path = tmp_path / "u.pdf"
    path.write_bytes(evidence_pdf(rec))
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout
    assert "Stage 1 · DEFERRED" in text and "calendar: moved to 2026-03-10 (holiday)" in text
    assert "Stage 7 · MYSTERY" in text and "<script>alert(1)</script>" in text  # shown as text, not run
    assert rec.sha256 in text


def test_oncebeat_runs_without_loading_weasyprint_and_a_missing_one_is_a_clear_error() -> None:
    import subprocess
    import sys

    loaded = subprocess.run([sys.executable, "-c", "import sys, oncebeat.cli, oncebeat.web.app, "
                             "oncebeat.reminders.notices.evidence; print('weasyprint' in sys.modules)"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"  # only a PDF loads it
    # An interpreter where WeasyPrint cannot be imported (sys.modules[name] = None makes the import fail).
    missing = subprocess.run([sys.executable, "-c", """
import sys
sys.modules["weasyprint"] = None
from oncebeat.errors import OncebeatError
from oncebeat.reminders.notices.evidence_pdf import evidence_pdf
try:
    evidence_pdf(None)
except OncebeatError as exc:
    print(exc)
"""], capture_output=True, text=True, check=True)
    assert "a PDF needs WeasyPrint" in missing.stdout and "--json" in missing.stdout
