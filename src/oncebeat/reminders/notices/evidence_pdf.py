"""The proof of notice as a PDF a collections team attaches to a legal file.

HTML from a Jinja2 template (``templates/evidence.html``, autoescaped: a customer's name or an SMTP reply is
text, never markup), converted by WeasyPrint (Debian's Pango underneath). The PDF has a header (company, invoice,
customer, amount, generated at UTC, the database redacted), one section per stage, and prints the SHA-256 of the
record's canonical JSON; that JSON is embedded in the PDF as the file ``evidence-<number>.json``, so the two can
never be told apart from each other.

WeasyPrint is imported only here, when a PDF is asked for: the rest of oncebeat runs without it (or without
Pango), and a missing one is a clear :class:`~oncebeat.errors.OncebeatError`.

Nothing is fetched while rendering (no URL is resolved: an address in customer data never makes a request).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from ...errors import OncebeatError
from .evidence import EvidenceRecord

__all__ = ["evidence_html", "evidence_pdf", "pdf_filename"]

TEMPLATES = Path(__file__).parent / "templates"


def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                       trim_blocks=True, lstrip_blocks=True)


def evidence_html(record: EvidenceRecord) -> str:
    """The record as one HTML page (what the PDF is made of)."""
    return _environment().get_template("evidence.html").render(r=record.data, sha256=record.sha256,
                                                               attachment=pdf_filename(record, "json"))


def pdf_filename(record: EvidenceRecord, suffix: str = "pdf") -> str:
    """``evidence-<number>.<suffix>`` with anything but letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``
    (a download's file name, safe in a Content-Disposition header and on every file system)."""
    return f"evidence-{re.sub(r'[^A-Za-z0-9._-]', '_', record.number)[:100]}.{suffix}"


def _refuse_fetch(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    raise ValueError(f"evidence PDFs load nothing: {url[:80]!r} not fetched")


def _weasyprint() -> Any:
    try:
        import weasyprint  # type: ignore[import-untyped]
    except ImportError as exc:
        raise OncebeatError(f"a PDF needs WeasyPrint ({exc}); install oncebeat with its dependencies "
                            "(pip install weasyprint) or ask for --json instead") from exc
    except OSError as exc:  # WeasyPrint found, its system libraries not: Pango, HarfBuzz, fontconfig
        raise OncebeatError(f"a PDF needs Pango ({exc}); on Debian or Ubuntu: apt-get install libpango-1.0-0 "
                            "libpangoft2-1.0-0 fonts-dejavu-core (what .ci/run installs), or ask for --json "
                            "instead") from exc
    return weasyprint


def evidence_pdf(record: EvidenceRecord) -> bytes:
    """The record as PDF bytes, with its canonical JSON embedded as ``evidence-<number>.json``.

    Raises:
        OncebeatError: WeasyPrint or Pango is not installed (the message names what to install).
    """
    weasyprint = _weasyprint()
    attachment = weasyprint.Attachment(file_obj=io.BytesIO(record.text.encode("utf-8")),
                                       name=pdf_filename(record, "json"),
                                       description=f"proof-of-notice record, SHA-256 {record.sha256}")
    html = weasyprint.HTML(string=evidence_html(record), url_fetcher=_refuse_fetch, base_url=str(TEMPLATES))
    pdf = html.write_pdf(attachments=[attachment])
    assert isinstance(pdf, bytes)
    return pdf
