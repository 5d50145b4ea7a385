"""The doctor's ``waiting`` check: reminders that wait on purpose (issue 23 items 4 and 5), and why.

- the payment-freshness fence: pending reminders whose send waits while the payment data of their invoice's
  source is older than ``[reminders] max_payment_staleness`` (their reason: ``waiting: payment data from csv
  import last refreshed 9h ago; reminders of its invoices wait until it is fresher than 6h``), counted per source,
  or a Stripe payment of the invoice is processing (a warning: nothing goes out until the data is refreshed);
- the per-customer cap: reminders ``deferred`` by ``max_notices_per_week``, each going out on its next allowed day
  by itself (info).

Both read only the reminders table (the doctor has no policy): what the send jobs recorded when they waited.
"""

from __future__ import annotations

from ..doctor.checks import capped, plural
from ..doctor.facts import Facts
from ..doctor.model import Finding
from ..doctor.registry import register_check
from .capfence import deferred_reminders, waiting_by_source, waiting_reminders, waiting_words
from .doctor import LINE, reminder_evidence

__all__ = ["check_waiting", "register"]


def check_waiting(facts: Facts) -> list[Finding]:
    """Reminders waiting for fresher payment data or a processing payment (warning), and reminders deferred by
    the per-customer cap (info); ``--invoice`` keeps that invoice's."""
    face = facts.face
    waiting = waiting_reminders(facts.store)
    deferred = deferred_reminders(facts.store)
    number = facts.scope_args.get("invoice")
    if number is not None:
        waiting = [r for r in waiting if r["number"] == number]
        deferred = [r for r in deferred if r["number"] == number]
    findings: list[Finding] = []
    if waiting:
        newest = waiting[0]
        per_source = waiting_by_source(waiting)
        by = ("; waiting for fresher payment data from " + ", ".join(f"{waiting_words(src)}: {n}"
                                                                   for src, n in per_source.items())
              if per_source else "")
        findings.append(Finding(
            code="waiting", severity="warning",
            summary=(f"{plural(len(waiting), 'reminder')} waiting (last checked {face.text(newest['updated_at'])}): "
                     f"{newest['reason']}{by}"),
            subject=f"invoice:{newest['number']}",
            evidence=capped([reminder_evidence(r | {"state": "pending", "stage": "?", "created_at": r["updated_at"]},
                                               face) for r in waiting]),
            fix=("Refresh the payment data of the source named (import the latest payments CSV, check the Stripe "
                 "webhook, `oncebeat sync`); the reminders go out at their next check once it is fresher than "
                 "[reminders] max_payment_staleness. A payment processing at Stripe ends with its success (the "
                 "invoice is paid: no reminder) or failure (the reminder goes out).")))
    if deferred:
        first = deferred[0]
        findings.append(Finding(
            code="waiting", severity="info",
            summary=(f"{plural(len(deferred), 'reminder')} deferred by the per-customer cap; the first "
                     f"(invoice {first['number']}, {first['email']}): {first['reason']}"),
            subject=f"invoice:{first['number']}",
            fix=("Nothing to do: each goes out on its next allowed day by itself ([reminders] "
                 "max_notices_per_week). Raise or remove the setting to send them sooner.")))
    return findings


def register() -> None:
    """Register the ``waiting`` check (idempotent)."""
    register_check("waiting", check_waiting, title="reminders waiting for fresh payment data or the per-customer cap",
                   order=119, part="reminders", sql_line=LINE)
