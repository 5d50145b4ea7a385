"""The invariant checker: proves "never twice, never lost" from evidence.

Inputs are the database (invoices, the occurrence ledger, jobs, reminders,
effects), the Maildir the SMTP server wrote (evidence from outside the
database), the stage ladder, the schedule definitions, and the instants at
which invoices were paid. The set of reminders that were **due** is computed
from first principles — for each scan that ran (a completed ``reminders.scan``
job, at the instant it ran, for its occurrence's business date), every invoice
open at that instant whose ``due_on + stage`` is on or before that date — and
never read back from the ``reminders`` table, which is only compared with it.

Invariants (name → meaning):

- ``due-reminders-terminal``: every due (invoice, stage) ended sent, skipped, failed or in_doubt;
- ``stage-recorded-once``: no (invoice, stage) is recorded twice — as two rows, or as a row and a stage
  another row records superseded (``superseded_stages``), which the unique key alone cannot see;
- ``no-unexpected-reminders``: no reminder exists that was not due (wrong date, paid invoice);
- ``skip-reasons-true``: "superseded: stage N" names a higher stage of the same scan; "invoice paid"
  follows a real payment; "invoice void" a void invoice;
- ``failed-has-server-reply``: failed reminders carry the SMTP reply (a 5xx code) or the last error;
- ``in-doubt-bounded``: in-doubt reminders ≤ injected faults that make delivery unknowable
  (a worker killed after the server accepted, a connection lost before the final reply);
- ``no-duplicate-delivery``: no (invoice, stage) and no Message-ID delivered twice (Maildir);
- ``sent-matches-maildir``: every sent reminder's message is in the Maildir, and every delivered
  message belongs to a sent or in-doubt reminder;
- ``one-job-per-occurrence``: occurrences that enqueue have exactly one job of the schedule's task,
  the others none;
- ``no-fire-on-start``: every scheduled occurrence is an instant of its schedule, never the
  moment a clock started;
- ``business-date-local``: each occurrence's business date is its local date in its zone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .. import ledger
from ..app import ScheduleDef
from ..effects import list_effects
from ..mail import StoredMessage, read_maildir
from ..queue import all_jobs
from ..reminders.model import reminder_key, with_superseded
from ..reminders.policy import stages_due
from ..reminders.rows import all_invoices, all_reminders
from ..store import Store

__all__ = ["Invariant", "CheckReport", "check", "PaymentWindow", "payments_from_db", "INVARIANTS"]

INVARIANTS = ("due-reminders-terminal", "stage-recorded-once", "no-unexpected-reminders", "skip-reasons-true",
              "failed-has-server-reply", "in-doubt-bounded", "no-duplicate-delivery", "sent-matches-maildir",
              "one-job-per-occurrence", "no-fire-on-start", "business-date-local")
SCAN_TASK = "reminders.scan"
TERMINAL = ("sent", "skipped", "failed", "in_doubt")
ENQUEUING = ("enqueued", "manual", "backfilled")

PaymentWindow = tuple[datetime, datetime]  # the payment happened at some instant in [lo, hi]
BusinessDate = Callable[[datetime, "str | None", date], date]


@dataclass(kw_only=True, slots=True)
class Invariant:
    name: str
    checked: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.violations == 0

    def fail(self, example: str) -> None:
        self.violations += 1
        if len(self.examples) < 5:
            self.examples.append(example)

    def as_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "checked": self.checked, "violations": self.violations,
                "examples": self.examples}


@dataclass(kw_only=True, slots=True)
class CheckReport:
    """The invariants, a summary, and ``attention``: lines about what holds but needs a person (``check`` on a
    deployment: failed reminders, i.e. not delivered)."""

    invariants: dict[str, Invariant]
    summary: dict[str, Any]
    attention: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(i.passed for i in self.invariants.values())

    @property
    def exit_code(self) -> int:
        """0 all holds, 1 an invariant is violated, 3 none is but something needs a person (``attention``)."""
        return 1 if not self.passed else 3 if self.attention else 0

    def as_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "invariants": {k: v.as_dict() for k, v in self.invariants.items()},
                "summary": self.summary, "attention": self.attention}

    def to_text(self) -> str:
        lines = []
        for inv in self.invariants.values():
            mark = "ok  " if inv.passed else "FAIL"
            lines.append(f"  {mark} {inv.name:<26} {inv.checked:>7} checked, {inv.violations} violation(s)")
            lines.extend(f"         e.g. {e}" for e in inv.examples)
        lines.append("all invariants hold" if self.passed else "INVARIANT VIOLATIONS FOUND")
        lines.extend(f"attention: {a}" for a in self.attention)
        return "\n".join(lines)


def payments_from_db(store: Store, tz: str) -> dict[str, PaymentWindow]:
    """Payment windows when only the database is known.

    An invoice marked paid records the instant it stopped being open (``paid_at``, UTC): the window is that
    instant, exactly what the scans saw, so ``check`` and ``simulate`` count the same due reminders on one
    database. Rows without it (paid before migration 0008) get the whole local day of ``paid_on`` in ``tz``.
    """
    zone = ZoneInfo(tz)
    out: dict[str, PaymentWindow] = {}
    for inv in all_invoices(store):
        if inv.get("paid_at") is not None and inv["status"] == "paid":
            out[inv["number"]] = (inv["paid_at"], inv["paid_at"])
        elif inv["paid_on"] is not None:
            lo = datetime.combine(inv["paid_on"], time(0), tzinfo=zone)
            out[inv["number"]] = (lo, lo + timedelta(days=1))
    return out


def _is_instant_of(definition: ScheduleDef, instant: datetime) -> bool:
    sched = definition.schedule()
    return sched.next_after(instant - timedelta(microseconds=1)) == instant


def check(store: Store, *, maildir: Path | None, stages: Iterable[int], definitions: Mapping[str, list[ScheduleDef]],
          payments: Mapping[str, PaymentWindow], in_doubt_budget: int | None = None,
          collapse: str = "next", business_date: BusinessDate | None = None) -> CheckReport:
    """Check every invariant; see the module docstring.

    Args:
        collapse: the policy's ``collapse`` mode (``next`` or ``highest``), which decides the due stages.
        business_date: ``(fire_at, customer_tz, schedule_date) -> date``, the policy's rule for a customer's
            business date (``Policy.business_date``); None: the occurrence's date for every customer.
        definitions: every definition each schedule key had during the run (key → list).
        payments: invoice number → window of the instant it was paid.
        in_doubt_budget: injected faults that can make a delivery unknowable (None: not checked).
    """
    inv = {name: Invariant(name=name) for name in INVARIANTS}
    stages = sorted(stages)
    invoices = {r["number"]: r for r in all_invoices(store)}
    # A stage recorded superseded inside a higher stage's row (reminders migration 0007) counts as a skipped
    # reminder of its own, exactly as the one-row-per-stage form that databases from before it may still hold.
    reminders = with_superseded(all_reminders(store))
    occurrences = ledger.list_occurrences(store)
    jobs = all_jobs(store)
    effects = {e["key"]: e for e in list_effects(store)}
    messages = read_maildir(maildir) if maildir is not None else []
    by_pair = _by_pair(inv["stage-recorded-once"], reminders)
    ev = _Evidence(invoices=invoices, reminders=reminders, by_pair=by_pair, occurrences=occurrences, jobs=jobs,
                   effects=effects, messages=messages)

    required, allowed = _due_pairs(ev, stages=stages, payments=payments, collapse=collapse,
                                   business_date=business_date)
    _check_due(inv, ev, required, allowed)
    _check_skip_reasons(inv["skip-reasons-true"], ev, payments)
    _check_failed(inv["failed-has-server-reply"], ev)
    in_doubt = _check_in_doubt(inv["in-doubt-bounded"], ev, in_doubt_budget)
    pair_count = _check_deliveries(inv, ev, maildir_read=maildir is not None)
    _check_occurrences(inv, ev, definitions)

    states = Counter(r["state"] for r in reminders)
    summary = {"invoices": len(invoices), "reminders": dict(sorted(states.items())), "due": len(required),
               "messages_delivered": len(messages),
               "duplicates": sum(n - 1 for n in pair_count.values() if n > 1),
               "lost": inv["due-reminders-terminal"].violations, "in_doubt": len(in_doubt),
               "occurrences": dict(sorted(Counter(o["outcome"] for o in occurrences).items()))}
    return CheckReport(invariants=inv, summary=summary)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Evidence:
    """What ``check`` judges, read once: the database's rows and the Maildir's messages."""

    invoices: dict[str, dict[str, Any]]  # number -> invoice row
    reminders: list[dict[str, Any]]
    by_pair: dict[tuple[str, int], dict[str, Any]]  # (invoice number, stage) -> reminder row
    occurrences: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    effects: dict[str, dict[str, Any]]  # effect key -> effect row
    messages: list[StoredMessage]


def _by_pair(once: Invariant, reminders: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(invoice number, stage) -> its reminder; ``stage-recorded-once`` fails for each pair recorded twice."""
    by_pair: dict[tuple[str, int], dict[str, Any]] = {}
    once.checked = len(reminders)
    for r in reminders:
        pair = (r["number"], int(r["stage"]))
        if pair in by_pair:  # the unique key refuses a second row; a superseded stage must not have one either
            once.fail(f"{pair[0]} stage {pair[1]} is recorded twice ({_recorded_as(by_pair[pair])} and "
                      f"{_recorded_as(r)})")
        by_pair[pair] = r
    return by_pair


def _recorded_as(r: dict[str, Any]) -> str:
    if r.get("superseded_by") is not None:
        return f"superseded in reminder {r['superseded_by']}"
    return f"reminder {r['id']} ({r['state']})"


def _due_pairs(ev: _Evidence, *, stages: list[int], payments: Mapping[str, PaymentWindow], collapse: str,
               business_date: BusinessDate | None) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(required, allowed): the (invoice, stage) pairs certainly due at some scan, and those possibly due.

    The due set comes from first principles. Under collapse = next a stage's due date depends on when the
    previous stage was recorded: that fact is read from the reminders table (earlier business dates only)
    and the rule is applied to it here.
    """
    occ_by_id = {o["id"]: o for o in ev.occurrences}
    recorded: dict[str, list[tuple[int, date]]] = defaultdict(list)
    for r in ev.reminders:
        recorded[r["number"]].append((int(r["stage"]), r["business_date"]))
    required: set[tuple[str, int]] = set()
    allowed: set[tuple[str, int]] = set()
    for job in ev.jobs:
        # A scan ran at some instant between its occurrence's creation and its job's completion
        # (retries and rescues move it later); a job that never completed may still have run.
        if job["task"] != SCAN_TASK or job["attempt"] < 1 or job["occurrence_id"] not in occ_by_id:
            continue
        occurrence = occ_by_id[job["occurrence_id"]]
        earliest = occurrence["created_at"]
        completed_at = job["finished_at"] if job["state"] == "completed" else None
        for number, i in ev.invoices.items():
            business = (occurrence["business_date"] if business_date is None
                        else business_date(occurrence["fire_at"], i["customer_tz"], occurrence["business_date"]))
            if i["status"] in ("void", "uncollectible"):
                continue
            window = payments.get(number)
            if i["status"] == "paid" and window is None:
                continue  # paid before the run began
            certainly_open = completed_at is not None and (window is None or window[0] > completed_at)
            maybe_open = window is None or window[1] >= earliest  # a tie: paid in the same instant
            earlier = [(st, bd) for st, bd in recorded[number] if bd < business]
            for s in stages_due(stages, i["due_on"], business, collapse, earlier):
                if certainly_open:
                    required.add((number, s))
                if maybe_open:
                    allowed.add((number, s))
    return required, allowed


def _check_due(inv: dict[str, Invariant], ev: _Evidence, required: set[tuple[str, int]],
               allowed: set[tuple[str, int]]) -> None:
    """``due-reminders-terminal`` and ``no-unexpected-reminders``."""
    inv["due-reminders-terminal"].checked = len(required)
    for pair in sorted(required):
        due = ev.by_pair.get(pair)
        if due is None or due["state"] not in TERMINAL:
            inv["due-reminders-terminal"].fail(f"{pair[0]} stage {pair[1]}: " + ("no reminder" if due is None
                                                                                else f"still {due['state']}"))
    inv["no-unexpected-reminders"].checked = len(ev.reminders)
    for pair, r in ev.by_pair.items():
        if pair not in allowed and pair not in required:
            inv["no-unexpected-reminders"].fail(f"{pair[0]} stage {pair[1]} ({r['state']}) was never due at a scan")


def _check_skip_reasons(skip: Invariant, ev: _Evidence, payments: Mapping[str, PaymentWindow]) -> None:
    """``skip-reasons-true``: each skipped reminder's reason is a fact of the evidence."""
    for r in ev.reminders:
        if r["state"] != "skipped":
            continue
        skip.checked += 1
        reason = r["reason"] or ""
        number = r["number"]
        if reason.startswith("superseded: stage "):
            higher = int(reason.split()[2])
            other = ev.by_pair.get((number, higher))
            if not (higher > r["stage"] and other is not None and other["occurrence_id"] == r["occurrence_id"]):
                skip.fail(f"{number} stage {r['stage']}: {reason!r} but no stage {higher} from the same scan")
        elif reason.startswith("invoice paid"):
            window = payments.get(number)
            if window is None or window[0] > r["updated_at"]:
                skip.fail(f"{number} stage {r['stage']}: {reason!r} but no payment before "
                          f"{r['updated_at'].isoformat()}")
        elif reason.startswith("invoice void") or reason.startswith("invoice uncollectible"):
            if ev.invoices[number]["status"] not in ("void", "uncollectible"):
                skip.fail(f"{number} stage {r['stage']}: {reason!r} but the invoice is "
                          f"{ev.invoices[number]['status']}")
        else:
            skip.fail(f"{number} stage {r['stage']}: unknown skip reason {reason!r}")


def _check_failed(failed: Invariant, ev: _Evidence) -> None:
    """``failed-has-server-reply``: a failed reminder's reason carries a 5xx reply or the give-up note."""
    for r in ev.reminders:
        if r["state"] == "failed":
            failed.checked += 1
            reason = r["reason"] or ""
            if not (any(f" {c}" in reason or reason.startswith(str(c)) for c in range(500, 600))
                    or reason.startswith("gave up after")):
                failed.fail(f"{r['number']} stage {r['stage']}: reason {reason!r} has no server reply")


def _check_in_doubt(doubt: Invariant, ev: _Evidence, in_doubt_budget: int | None) -> list[dict[str, Any]]:
    """``in-doubt-bounded``; returns the in-doubt reminders."""
    in_doubt = [r for r in ev.reminders if r["state"] == "in_doubt"]
    doubt.checked = len(in_doubt)
    for r in in_doubt:
        e = ev.effects.get(reminder_key(r["id"]))
        if e is None or e["state"] != "in_doubt":
            doubt.fail(f"{r['number']} stage {r['stage']} is in_doubt but its effect is "
                       f"{e['state'] if e else 'missing'}")
    if in_doubt_budget is not None and len(in_doubt) > in_doubt_budget:
        doubt.fail(f"{len(in_doubt)} reminders in doubt but only {in_doubt_budget} faults could cause that")
    return in_doubt


def _check_deliveries(inv: dict[str, Invariant], ev: _Evidence, *,
                      maildir_read: bool) -> Counter[tuple[str | None, str | None]]:
    """``no-duplicate-delivery`` and (with a Maildir) ``sent-matches-maildir``; returns deliveries per pair."""
    messages = ev.messages
    dup = inv["no-duplicate-delivery"]
    dup.checked = len(messages)
    pair_count = Counter((m.headers.get("X-Oncebeat-Invoice"), m.headers.get("X-Oncebeat-Stage")) for m in messages)
    id_count = Counter(m.message_id for m in messages)
    for (number, stage), n in pair_count.items():
        if n > 1:
            dup.fail(f"{number} stage {stage} delivered {n} times")
    for mid, n in id_count.items():
        if n > 1:
            dup.fail(f"Message-ID {mid} delivered {n} times")
    if not maildir_read:
        return pair_count
    match = inv["sent-matches-maildir"]
    delivered_ids = set(id_count)
    by_mid = {r["message_id"]: r for r in ev.reminders if r["message_id"]}
    for r in ev.reminders:
        if r["state"] == "sent":
            match.checked += 1
            if r["message_id"] not in delivered_ids:
                match.fail(f"{r['number']} stage {r['stage']} is sent but {r['message_id']} is not in the Maildir")
    for m in messages:
        match.checked += 1
        pair = (m.headers.get("X-Oncebeat-Invoice") or "", int(m.headers.get("X-Oncebeat-Stage") or -10**6))
        owner = by_mid.get(m.message_id) or ev.by_pair.get(pair)
        if owner is None or owner["state"] not in ("sent", "in_doubt"):
            match.fail(f"{m.message_id} ({pair[0]} stage {pair[1]}) was delivered but its reminder is "
                       f"{owner['state'] if owner else 'missing'}")
    return pair_count


def _check_occurrences(inv: dict[str, Invariant], ev: _Evidence,
                       definitions: Mapping[str, list[ScheduleDef]]) -> None:
    """``one-job-per-occurrence``, ``no-fire-on-start`` and ``business-date-local``."""
    jobs_by_occ: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for job in ev.jobs:
        if job["occurrence_id"] is not None:
            jobs_by_occ[job["occurrence_id"]].append(job)
    one = inv["one-job-per-occurrence"]
    fire = inv["no-fire-on-start"]
    local = inv["business-date-local"]
    for o in ev.occurrences:
        defs = definitions.get(o["schedule_key"], [])
        tasks = {d.task for d in defs}
        own = [j for j in jobs_by_occ.get(o["id"], []) if not tasks or j["task"] in tasks]
        one.checked += 1
        expected = 1 if o["outcome"] in ENQUEUING else 0
        if len(own) != expected:
            one.fail(f"occurrence {o['id']} ({o['schedule_key']} {o['fire_at'].isoformat()}, {o['outcome']}) has "
                     f"{len(own)} job(s)")
        if o["outcome"] != "manual":
            fire.checked += 1
            if defs and not any(_is_instant_of(d, o["fire_at"]) for d in defs):
                fire.fail(f"occurrence {o['id']} at {o['fire_at'].isoformat()} is not an instant of "
                          f"{o['schedule_key']}")
            if o["fire_at"] > o["created_at"]:
                fire.fail(f"occurrence {o['id']} recorded at {o['created_at'].isoformat()} before its instant")
        local.checked += 1
        expected_date = o["fire_at"].astimezone(ZoneInfo(o["tz"])).date()
        if o["business_date"] != expected_date or (defs and o["tz"] not in {d.tz for d in defs}):
            local.fail(f"occurrence {o['id']} at {o['fire_at'].isoformat()} in {o['tz']}: business date "
                       f"{o['business_date']} (expected {expected_date})")
