"""The invariant checker: proves "never twice, never lost" from evidence.

Inputs are the database (invoices, the occurrence ledger, jobs, reminders,
effects), the Maildir the SMTP server wrote (evidence from outside the
database), the stage ladder, the schedule definitions, and the instants at
which invoices were paid. The set of reminders that were **due** is computed
from first principles — for each scan that ran (a completed ``reminders.scan``
job, at the instant it ran, for its occurrence's business date), every invoice
in the database and open at that instant whose ``due_on + stage`` is on or before that date — and
never read back from the ``reminders`` table, which is only compared with it. A scan is held accountable for
an invoice only if the invoice had entered oncebeat (``invoices.entered_at``: its first import or webhook)
when the scan's last attempt started, and was not yet paid when it finished: an invoice imported and paid
between two scans was never due at either.

Invariants (name → meaning):

- ``due-reminders-terminal``: every due (invoice, stage) ended sent, held, skipped, failed or in_doubt, or is
  **delayed**: pending with an unfinished send job (waiting out a mail outage, queued or retrying), which is
  reported (``CheckReport.delayed``, exit status 4) and is not a violation. It is **lost** (a violation) when
  it has no reminder, or its reminder is pending with nothing that will send it: the rule of
  :mod:`oncebeat.reminders.accounting`, which the doctor's ``lost`` applies too;
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
- ``business-date-local``: each occurrence's business date is its local date in its zone;
- ``no-send-on-non-business-day``: with a business calendar (``[calendar]``), no reminder is created for (and so
  none sent on) a business date of its customer that is a weekend day or a holiday; the due set above already
  moves such a stage to the next business day (:func:`~oncebeat.reminders.policy.stages_due` with the calendar);
- ``held-by-a-hold``, ``no-send-while-held``, ``stage-order``, ``resume-marked``: holds and stage order
  (G9), judged from the holds table, the invoices and the effect ledger (:mod:`.checkholds`);
- ``attachments-as-frozen``: with an ``[attachments]`` policy, every delivered reminder carries the files its
  stage promises, byte for byte those frozen at its first attempt (:mod:`.checkattach`).
- ``one-notice-per-customer-day``, ``notice-delivered-once``, ``notice-never-lists-paid``: grouped notices
  (``group = "customer"``; :mod:`.checknotices`).
- ``fee-once-per-stage``, ``fee-not-lost``: late fees at most one per (invoice, stage), only for a sent stage whose
  pinned rule has one, of the rule's amount; every notice that showed a fee and was sent has it recorded;
  ``final-notice-once``: an internal notice of a final stage at most once per invoice, only after that stage went
  out (:mod:`.checkfees`).

A stage recorded ``held`` is final (G9): holds change whether a due stage is sent, never whether it is due, so
the due set above is computed without them and ``held`` counts as an end.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .. import ledger
from ..app import ScheduleDef
from ..effects import list_effects
from ..mail import StoredMessage, read_maildir
from ..queue import all_jobs
from ..reminders.accounting import PendingFates, duplicate_copies, pending_fates
from ..reminders.calendar import BusinessCalendar
from ..reminders.holds import list_holds
from ..reminders.ladder_calendars import calendar_or, cap_or
from ..reminders.model import with_superseded
from ..reminders.notices.attachments import AttachmentPolicy
from ..reminders.notices.fees import all_fees
from ..reminders.notices.grouping import email_key, notice_key
from ..reminders.notices.sending import attachment_digests
from ..reminders.policy import stages_due
from ..reminders.rows import all_invoices, all_notices, all_reminders
from ..store import Store
from .checkattach import ATTACHMENT_INVARIANTS, check_attachments
from .checkcap import CAP_INVARIANTS, check_cap
from .checkfees import FEE_INVARIANTS, FINAL_STAGE_HEADER, check_fees
from .checkholds import HOLD_INVARIANTS, check_holds
from .checkladders import LADDER_INVARIANTS, LadderTimeline, check_ladders
from .checknotices import NOTICE_INVARIANTS, check_notices

__all__ = ["Invariant", "CheckReport", "check", "PaymentWindow", "payments_from_db", "INVARIANTS"]

INVARIANTS = ("due-reminders-terminal", "stage-recorded-once", "no-unexpected-reminders", "skip-reasons-true",
              "failed-has-server-reply", "in-doubt-bounded", "no-duplicate-delivery", "sent-matches-maildir",
              "one-job-per-occurrence", "no-fire-on-start", "business-date-local", "no-send-on-non-business-day",
              *HOLD_INVARIANTS, *CAP_INVARIANTS, *LADDER_INVARIANTS, *ATTACHMENT_INVARIANTS, *NOTICE_INVARIANTS,
              *FEE_INVARIANTS)
SCAN_TASK = "reminders.scan"
TERMINAL = ("sent", "skipped", "failed", "in_doubt", "held")
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
    """The invariants, a summary, ``attention``: lines about what holds but needs a person (``check`` on a
    deployment: failed reminders, i.e. not delivered), and ``delayed``: due reminders not sent yet that will go
    out by themselves (waiting out a mail outage, or their send job not run yet), up to 5 examples."""

    invariants: dict[str, Invariant]
    summary: dict[str, Any]
    attention: list[str] = field(default_factory=list)
    delayed: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(i.passed for i in self.invariants.values())

    @property
    def exit_code(self) -> int:
        """0 all holds and nothing waits, 1 an invariant is violated, 3 none is but something needs a person
        (``attention``), 4 none of those but due reminders are delayed (they go out by themselves)."""
        return 1 if not self.passed else 3 if self.attention else 4 if self.summary.get("delayed") else 0

    def as_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "invariants": {k: v.as_dict() for k, v in self.invariants.items()},
                "summary": self.summary, "attention": self.attention, "delayed": self.delayed}

    def to_text(self) -> str:
        lines = []
        for inv in self.invariants.values():
            mark = "ok  " if inv.passed else "FAIL"
            lines.append(f"  {mark} {inv.name:<26} {inv.checked:>7} checked, {inv.violations} violation(s)")
            lines.extend(f"         e.g. {e}" for e in inv.examples)
        lines.append("all invariants hold" if self.passed else "INVARIANT VIOLATIONS FOUND")
        lines.extend(f"attention: {a}" for a in self.attention)
        n, outage = self.summary.get("delayed", 0), self.summary.get("delayed_outage", 0)
        if n:
            lines.append(f"delayed: {n} due reminder(s) not sent yet ({outage} waiting out a mail outage, "
                         f"{n - outage} with a send job queued or retrying): they go out by themselves, "
                         "not lost; `oncebeat doctor` says how long they have waited")
            lines.extend(f"         e.g. {d}" for d in self.delayed)
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
          collapse: str = "next", business_date: BusinessDate | None = None, cap: int | None = None,
          cap_zone: Callable[[str | None], ZoneInfo] | None = None,
          calendar: BusinessCalendar | None = None, ladders: LadderTimeline | None = None,
          attachments: AttachmentPolicy | None = None) -> CheckReport:
    """Check every invariant; see the module docstring.

    Args:
        collapse: the policy's ``collapse`` mode (``next`` or ``highest``), which decides the due stages.
        business_date: ``(fire_at, customer_tz, schedule_date) -> date``, the policy's rule for a customer's
            business date (``Policy.business_date``); None: the occurrence's date for every customer.
        calendar: the policy's business calendar (``Policy.calendar``), None: every day is a business day; with
            ``ladders``, a ladder's own calendar replaces it for the invoices pinned to that ladder.
        definitions: every definition each schedule key had during the run (key → list).
        payments: invoice number → window of the instant it was paid.
        in_doubt_budget: injected faults that can make a delivery unknowable (None: not checked).
        cap: the policy's ``max_notices_per_week`` (None: no cap, only counted; with ``ladders``, a ladder's own
            cap replaces it for the notices of invoices pinned to it); ``cap_zone(customer_tz)`` the zone
            whose dates it counts (None: UTC).
        ladders: each invoice's pinned ladder versions (:func:`.checkladders.ladder_timeline`); the due stages
            are then its ladder's (stages, collapse, spacing), and ``stages``/``collapse`` are not used.
        attachments: the policy's ``[attachments]`` (None: ``attachments-as-frozen`` checks nothing).
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
    # The internal notices of final stages ([reminders] notify_final) are no reminders: judged apart (checkfees).
    # (A grouped notice carries X-Oncebeat-Notice too, with its notice id: the final stage's header tells them apart.)
    internal = [m for m in messages if FINAL_STAGE_HEADER in m.headers]
    messages = [m for m in messages if FINAL_STAGE_HEADER not in m.headers]
    by_pair = _by_pair(inv["stage-recorded-once"], reminders)
    ev = _Evidence(invoices=invoices, reminders=reminders, by_pair=by_pair, occurrences=occurrences, jobs=jobs,
                   effects=effects, messages=messages, fates=pending_fates(store))

    required, allowed = _due_pairs(ev, stages=stages, payments=payments, collapse=collapse,
                                   business_date=business_date, calendar=calendar,
                                   ladders=ladders)
    _check_business_days(inv["no-send-on-non-business-day"], ev, calendar, ladders)
    delayed = _check_due(inv, ev, required, allowed)
    _check_skip_reasons(inv["skip-reasons-true"], ev, payments)
    _check_failed(inv["failed-has-server-reply"], ev)
    in_doubt = _check_in_doubt(inv["in-doubt-bounded"], ev, in_doubt_budget)
    copies = _check_deliveries(inv, ev, maildir_read=maildir is not None)
    _check_occurrences(inv, ev, definitions)
    holds = list_holds(store)
    check_holds(inv, holds=holds, invoices=invoices, reminders=reminders, effects=effects)
    capped = check_cap(inv, cap=cap, zone_of=cap_zone or (lambda _tz: ZoneInfo("UTC")), invoices=invoices,
                       reminders=reminders, cap_of=_cap_of(ladders, cap) if ladders is not None else None)
    if ladders is not None:
        check_ladders(inv["reminder-on-pinned-ladder"], ladders, reminders)
    notices = all_notices(store)
    listing: dict[int, list[tuple[int, str, int]]] = defaultdict(list)  # a sent notice's rows, for its files
    for n in notices:
        if n["reminder_id"] is not None and n["state"] in ("sent", "in_doubt"):
            listing[int(n["notice_id"])].append((int(n["reminder_id"]), str(n["number"]), int(n["stage"])))
    version_of = {int(r["id"]): r.get("ladder_version_id") for r in reminders}

    def stages_of(reminder_id: int) -> Sequence[int]:  # "final" is the last stage of the row's own ladder version
        v = version_of.get(reminder_id)
        return ladders.versions[int(v)].stages if ladders is not None and v is not None and \
            int(v) in ladders.versions else stages

    check_attachments(inv["attachments-as-frozen"], maildir=maildir, policy=attachments, stages=stages,
                      recorded=attachment_digests(store) if attachments is not None else {}, notice_rows=listing,
                      stages_of=stages_of)
    fees = check_fees(inv, fees=all_fees(store), invoices=invoices, ladders=ladders, messages=messages,
                      effects=effects, internal=internal,
                      listed_by={int(n["reminder_id"]): notice_key(int(n["notice_id"])) for n in notices
                                 if n["reminder_id"] is not None})

    grouped = check_notices(inv, notices=notices, messages=messages if maildir is not None else None,
                            payments=payments)
    states = Counter(r["state"] for r in reminders)
    summary = {"invoices": len(invoices), "reminders": dict(sorted(states.items())), "due": len(required),
               "messages_delivered": len(messages), "duplicates": sum(copies.values()),
               "lost": inv["due-reminders-terminal"].violations, "in_doubt": len(in_doubt),
               "holds": len(holds), "delayed": len(delayed), "fees": fees, "cap_deferred": capped["deferred"],
               "max_notices_in_7_days": capped["max_in_7_days"], "grouped_notices": grouped["notices"],
               "delayed_outage": sum(1 for fate, _ in delayed if fate == "outage"),
               "occurrences": dict(sorted(Counter(o["outcome"] for o in occurrences).items()))}
    return CheckReport(invariants=inv, summary=summary, delayed=[text for _, text in delayed[:5]])


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
    fates: PendingFates  # the pending reminders: lost, or delayed (outage, queued)


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
               business_date: BusinessDate | None, calendar: BusinessCalendar | None = None,
               ladders: LadderTimeline | None = None
               ) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(required, allowed): the (invoice, stage) pairs certainly due at some scan, and those possibly due.

    The due set comes from first principles. Under collapse = next a stage's due date depends on when the
    previous stage was recorded: that fact is read from the reminders table (earlier business dates only)
    and the rule is applied to it here.
    """
    occ_by_id = {o["id"]: o for o in ev.occurrences}
    recorded: dict[str, list[tuple[int, date]]] = defaultdict(list)
    # A stage deferred by the per-customer cap holds back the invoice's later stages (issue 23 item 4): while one
    # was deferred (from capped_at until it ended) no scan was bound to create another stage of that invoice.
    capped: dict[str, list[tuple[datetime, datetime | None]]] = defaultdict(list)
    for r in ev.reminders:
        recorded[r["number"]].append((int(r["stage"]), r["business_date"]))
        if r.get("capped_at") is not None:
            ended = (r.get("sent_at") or r["updated_at"]) if r["state"] in TERMINAL else None
            capped[r["number"]].append((r["capped_at"], ended))
    required: set[tuple[str, int]] = set()
    allowed: set[tuple[str, int]] = set()
    for job in ev.jobs:
        # A scan ran at some instant between its occurrence's creation and its job's completion
        # (retries and rescues move it later); a job that never completed may still have run. The attempt
        # that completed it read the invoices after it started (started_at: set at each claim).
        if job["task"] != SCAN_TASK or job["attempt"] < 1 or job["occurrence_id"] not in occ_by_id:
            continue
        occurrence = occ_by_id[job["occurrence_id"]]
        earliest = occurrence["created_at"]
        completed_at = job["finished_at"] if job["state"] == "completed" else None
        read_from = job["started_at"] if completed_at is not None else None
        for number, i in ev.invoices.items():
            # Accountable only for invoices already in the database when it read them (entered_at; NULL: a row
            # inserted outside oncebeat, present since before every scan).
            entered = i.get("entered_at")
            if entered is not None and completed_at is not None and entered > completed_at:
                continue  # entered after this scan had finished: it cannot have seen the invoice
            seen_for_sure = entered is None or (read_from is not None and entered <= read_from)
            business = (occurrence["business_date"] if business_date is None
                        else business_date(occurrence["fire_at"], i["customer_tz"], occurrence["business_date"]))
            if i["status"] in ("void", "uncollectible"):
                continue
            window = payments.get(number)
            if i["status"] == "paid" and window is None:
                continue  # paid before the run began
            certainly_open = (completed_at is not None and seen_for_sure
                              and (window is None or window[0] > completed_at)
                              and not any(c <= completed_at and (e is None or e >= earliest)
                                          for c, e in capped[number]))
            maybe_open = window is None or window[1] >= earliest  # a tie: paid in the same instant
            earlier = [(st, bd) for st, bd in recorded[number] if bd < business]
            if ladders is None:
                due_sets = [set(stages_due(stages, i["due_on"], business, collapse, earlier, calendar))]
            else:  # the invoice's pinned version(s) while this scan ran: two when an operator moved it meanwhile
                due_sets = [set(stages_due(ld.stages, i["due_on"], business, ld.collapse, earlier,
                                           calendar_or(ld, calendar), spacing=ld.spacing))
                            for ld in ladders.candidates(i, earliest, completed_at)]
            for s in set.union(*due_sets):
                if certainly_open and all(s in d for d in due_sets):
                    required.add((number, s))
                if maybe_open:
                    allowed.add((number, s))
    return required, allowed


#: Before every pin: "any time" for :meth:`LadderTimeline.candidates`.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _cap_of(ladders: LadderTimeline, cap: int | None) -> Callable[[dict[str, Any], datetime], int | None]:
    """The cap a notice of invoice row ``i`` that went out at ``at`` was placed under: its pinned ladder's (the
    larger when an operator moved it that instant; None, no cap, wins), else the policy's ``cap``."""
    def of(i: dict[str, Any], at: datetime) -> int | None:
        limits = [cap_or(ld, cap) for ld in ladders.candidates(i, at, at)] or [cap]
        return None if None in limits else max(c for c in limits if c is not None)
    return of


def _check_business_days(inv: Invariant, ev: _Evidence, calendar: BusinessCalendar | None,
                         ladders: LadderTimeline | None = None) -> None:
    """``no-send-on-non-business-day``: every reminder row's business date (its customer's, as the scan decided
    it) is a business day of the calendar of its invoice's ladder (the ladder's own, else ``calendar``; from the
    pins, never the reminders table: an invoice moved between ladders passes when one of its versions allows
    the date). A superseded stage shares its row's date, so rows are judged once."""
    for r in ev.reminders:
        if r.get("superseded_by") is not None:
            continue
        if ladders is None or r["number"] not in ev.invoices:
            calendars = [calendar]
        else:
            calendars = [calendar_or(ld, calendar) for ld in ladders.candidates(ev.invoices[r["number"]], _EPOCH,
                                                                                  None)] or [calendar]
        if all(c is None for c in calendars):
            continue
        inv.checked += 1
        reasons = [c.why_not(r["business_date"]) if c is not None else None for c in calendars]
        if all(why is not None for why in reasons):
            inv.fail(f"{r['number']} stage {r['stage']} ({r['state']}) was created for {r['business_date']}: "
                     f"{reasons[0]}")


def _check_due(inv: dict[str, Invariant], ev: _Evidence, required: set[tuple[str, int]],
               allowed: set[tuple[str, int]]) -> list[tuple[str, str]]:
    """``due-reminders-terminal`` and ``no-unexpected-reminders``; returns the delayed due reminders as
    (``outage`` or ``queued``, description)."""
    inv["due-reminders-terminal"].checked = len(required)
    fates = ev.fates.by_id()
    delayed: list[tuple[str, str]] = []
    for pair in sorted(required):
        due = ev.by_pair.get(pair)
        if due is not None and due["state"] in TERMINAL:
            continue
        pending = fates.get(int(due["id"])) if due is not None and due["state"] in ("pending", "deferred") else None
        fate = pending[0] if pending is not None else "lost"
        where = f"{pair[0]} stage {pair[1]}: "
        if fate == "outage" and pending is not None:
            since = pending[1]["deferred_since"]
            delayed.append((fate, where + f"waiting out a mail outage since {since.isoformat()}"))
        elif fate == "queued":
            delayed.append((fate, where + "pending, its send job queued or retrying"))
        elif fate == "capped" and pending is not None:
            delayed.append((fate, where + f"deferred by the per-customer cap: {pending[1]['reason']}"))
        else:
            inv["due-reminders-terminal"].fail(where + ("no reminder" if due is None else
                                                        f"still {due['state']} with no unfinished send job"))
    scans = {o["id"] for o in ev.occurrences}
    unjudged = 0
    for pair, r in ev.by_pair.items():
        if pair not in allowed and pair not in required:
            if r.get("occurrence_id") is not None and r["occurrence_id"] not in scans:
                unjudged += 1  # its scan's occurrence was pruned (oncebeat prune): nothing is left to judge it by
                continue
            inv["no-unexpected-reminders"].fail(f"{pair[0]} stage {pair[1]} ({r['state']}) was never due at a scan")
    inv["no-unexpected-reminders"].checked = len(ev.reminders) - unjudged
    return delayed


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
        e = ev.effects.get(email_key(r))  # a grouped notice's rows share its effect
        if e is None or e["state"] != "in_doubt":
            doubt.fail(f"{r['number']} stage {r['stage']} is in_doubt but its effect is "
                       f"{e['state'] if e else 'missing'}")
    emails = {email_key(r) for r in in_doubt}  # one fault puts one email in doubt, however many rows it lists
    if in_doubt_budget is not None and len(emails) > in_doubt_budget:
        doubt.fail(f"{len(emails)} emails in doubt but only {in_doubt_budget} faults could cause that")
    return in_doubt


def _check_deliveries(inv: dict[str, Invariant], ev: _Evidence, *, maildir_read: bool) -> dict[str, int]:
    """``no-duplicate-delivery`` and (with a Maildir) ``sent-matches-maildir``; returns the copies beyond the
    first per message (:func:`~oncebeat.reminders.accounting.duplicate_copies`, the doctor's grouping)."""
    messages = ev.messages
    dup = inv["no-duplicate-delivery"]
    dup.checked = len(messages)
    copies = duplicate_copies(messages)
    id_count = Counter(m.message_id for m in messages)
    for label, extra in copies.items():
        dup.fail(f"{label} delivered {extra + 1} times")
    for mid, n in id_count.items():
        if n > 1 and f"Message-ID {mid}" not in copies:
            dup.fail(f"Message-ID {mid} delivered {n} times")
    if not maildir_read:
        return copies
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
    return copies


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
