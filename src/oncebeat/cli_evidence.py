"""``oncebeat evidence INVOICE``: the proof of notice of one invoice (docs/evidence.md).

Entry point only: parse, call :mod:`oncebeat.reminders.notices.evidence` (and ``evidence_pdf`` for ``--pdf``),
print or write. Each record built is audited as a read of customer data (``reminders.evidence_read``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click

Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def register(group: click.Group, cli_module: ModuleType) -> None:
    """Add ``evidence`` to the ``oncebeat`` command group; ``cli_module`` gives the shared options and helpers
    (``DB_OPTION``, ``CONFIG_OPTION``, ``_runtime``, ``_operator``, ``_printable``), from
    :mod:`oncebeat.cli_common`, passed in by :mod:`oncebeat.cli`."""
    db_option: Decorator = cli_module.DB_OPTION
    config_option: Decorator = cli_module.CONFIG_OPTION
    h: Any = cli_module

    @click.command(name="evidence")
    @click.argument("invoice")
    @click.option("--json", "as_json", is_flag=True,
                  help="Print the record as JSON (schema oncebeat.evidence/1; its SHA-256 is the one the PDF prints).")
    @click.option("--pdf", "pdf_path", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
                  metavar="FILE", help="Write the record as a PDF to FILE (the JSON embedded in it).")
    @click.option("--include-message", is_flag=True,
                  help="With --json: add each stage's message bytes (base64) where oncebeat still keeps them (until "
                  "delivery; after it, their SHA-256 and headers).")
    @db_option
    @config_option
    def evidence_command(invoice: str, as_json: bool, pdf_path: Path | None, include_message: bool,
                         database_url: str | None, config: Path | None) -> None:
        """Proof of notice for INVOICE: each stage's final state and why (sent, held by whom, skipped as paid or
        superseded, failed with the server's reply, in doubt and how it was resolved, pending), the frozen
        message's headers and SHA-256, Message-ID, times (business zone, customer's zone, UTC), and the
        occurrence, job and effect ids behind it. Text by default; --json and/or --pdf FILE for a legal file."""
        from .reminders.notices.evidence import build_evidence, record_read, summary_lines
        from .store import redact_url

        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            record = build_evidence(rt.service, invoice, database=redact_url(rt.store.url),
                                    include_message=include_message)
            pdf = None
            if pdf_path is not None:
                from .reminders.notices.evidence_pdf import evidence_pdf

                pdf = evidence_pdf(record)  # before anything is written: a missing Pango leaves no half file
            forms = [f for f, on in (("json", as_json), ("pdf", pdf is not None)) if on] or ["text"]
            record_read(rt.store, clock=rt.clock, source=h._operator(), record=record, form="+".join(forms))
        finally:
            rt.close()
        if pdf is not None and pdf_path is not None:
            try:
                pdf_path.write_bytes(pdf)
            except OSError as exc:
                raise click.BadParameter(f"cannot write {str(pdf_path)!r}: {exc.strerror}; choose a writable "
                                         "file", param_hint="--pdf") from exc
            click.echo(f"wrote {pdf_path} ({len(pdf)} bytes); record SHA-256 {record.sha256}",
                       err=as_json)  # stdout stays the JSON alone when both are asked for
        if as_json:
            out = sys.stdout.buffer
            out.write(record.text.encode("utf-8"))  # the exact bytes whose SHA-256 the PDF prints
            out.flush()
        elif pdf is None:
            for line in summary_lines(record):
                click.echo(h._printable(line))

    group.add_command(evidence_command)
