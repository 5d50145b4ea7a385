"""Checks of what the jobs did: ``retry-side-effect``, ``in-doubt``, ``duplicate-delivery``, ``lost``, ``discarded``,
``effect-conflict``."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ...effects import list_effects
from ...pauses import held_jobs
from .. import evidence as ev
from ..facts import Facts
from ..model import Evidence, Finding, duration_text
from .common import (
    LEASE_RESCUE_EXPECTED,
    MAX_FINDINGS_PER_CHECK,
    OVERDUE_AFTER,
    Skip,
    capped,
    parse_iso,
    plural,
    why_in_doubt,
)

# --- retry-side-effect -----------------------------------------------------------------------------------


def _mail_counts(facts: Facts) -> tuple[Counter[str], Counter[str]]:
    """Messages per effect key (as an app reads it from the message) and per Message-ID in the Maildir
    (empty without one)."""
    by_effect: Counter[str] = Counter()
    by_mid: Counter[str] = Counter()
    for m in facts.messages():
        key = facts.message_effect(m)
        if key:
            by_effect[key] += 1
        if m.message_id:
            by_mid[m.message_id] += 1
    return by_effect, by_mid


def check_retry_side_effect(facts: Facts) -> list[Finding]:
    """Jobs retried or rescued, and what happened to their effects (done once, in doubt, delivered twice)."""
    events = facts.events("job.retried", "job.rescued")
    reconciled = facts.events("effect.reconciled")
    by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_job[int(str(e["subject"]).partition(":")[2])].append(e)
    if not by_job:
        return []
    jobs = facts.load_jobs(by_job)
    effects = facts.effects_of_jobs(by_job)
    by_effect, _ = _mail_counts(facts)
    reconciled_keys = {str(e["subject"]).partition(":")[2]: e for e in reconciled}
    findings: list[Finding] = []
    for jid in sorted(by_job, key=lambda j: by_job[j][0]["id"]):
        rows = by_job[jid]
        job = jobs.get(jid)
        tz = facts.tz_of(facts.occurrence_key(int(job["occurrence_id"]))) if job and job["occurrence_id"] else None
        retried = sum(1 for e in rows if e["kind"] == "job.retried")
        rescued = sum(1 for e in rows if e["kind"] == "job.rescued")
        held = effects.get(jid, [])
        states = Counter(e["state"] for e in held)
        twice = [e for e in held if by_effect.get(e["key"], 0) > 1]
        again = [e for e in held if e["key"] in reconciled_keys
                 and (reconciled_keys[e["key"]].get("detail") or {}).get("outcome") == "not_done"]
        effect_text = _effect_states_text(states)
        if twice:
            verdict = f"; {plural(len(twice), 'effect')} reached the Maildir more than once"
            severity = "error"
        elif states.get("in_doubt"):
            verdict = "; no effect is known to have run twice, but the in-doubt one must be resolved"
            severity = "warning"
        else:
            verdict = "; no effect ran twice" if held else ""
            severity = "info"
        task = job["task"] if job else "?"
        what = " and ".join(x for x in (f"retried {plural(retried, 'time')}" if retried else "",
                                        f"rescued {plural(rescued, 'time')}" if rescued else "") if x)
        summary = f"job {jid} ({task}) was {what}{effect_text}{verdict}"
        items = _retry_evidence(facts, jid, job, rows, held, tz, copies=by_effect, again=again)
        if twice:
            fix = ("An effect reached the outside world twice: see duplicate-delivery for the copies and find the "
                   "resend path (a reconcile that said not_done, or a mail relay retry).")
        elif states.get("in_doubt"):
            fix = "Resolve the in-doubt effect (see in-doubt); retries will not run it blindly."
        else:
            fix = ("Nothing to do: the effect ledger returned the recorded result to the retry instead of running "
                   "the effect again. Look at the errors if retries are frequent.")
        findings.append(Finding(code="retry-side-effect", severity=severity, summary=summary, subject=f"job:{jid}",
                                evidence=capped(items), fix=fix))
        if len(findings) >= MAX_FINDINGS_PER_CHECK:
            break
    return findings


def _effect_states_text(states: Counter[str]) -> str:
    parts = []
    if states.get("done"):
        parts.append(f"{states['done']} done once (later attempts got the recorded result, nothing re-ran)")
    if states.get("in_doubt"):
        parts.append(f"{states['in_doubt']} in doubt")
    if states.get("failed"):
        parts.append(f"{states['failed']} failed (recorded as not having happened)")
    if states.get("started"):
        parts.append(f"{states['started']} started by a live attempt")
    return "; effects: " + ", ".join(parts) if parts else "; no effect was started by this job"


def _retry_evidence(facts: Facts, jid: int, job: dict[str, Any] | None, rows: list[dict[str, Any]],
                    held: list[dict[str, Any]], tz: str | None, *, copies: Counter[str],
                    again: list[dict[str, Any]]) -> list[Evidence]:
    """The job, each retry and rescue, and each effect it holds (with its copies in the Maildir)."""
    face = facts.face
    items: list[Evidence] = ([ev.job(job, face, tz)] if job else [ev.note(f"job {jid} is no longer in the jobs "
                                                                          "table (pruned)")])
    for e in rows:
        d = e.get("detail") or {}
        if e["kind"] == "job.rescued":
            dead = facts.proc(d.get("dead_worker"))
            who = f"{dead.name} pid {dead.pid} on {dead.host}" if dead else f"worker {d.get('dead_worker')}"
            text = (f"rescued after attempt {d.get('attempt')}: {who} stopped heartbeating; job now "
                    f"{d.get('new_state')}")
        else:
            text = f"attempt {d.get('attempt')} failed and will be retried: {str(d.get('error') or '')[:200]}"
        items.append(ev.event(e, face, tz, text=text))
    for e in held:
        in_maildir = facts.maildir is not None and facts.effect_sends_mail(e["key"])
        note = f"{copies.get(e['key'], 0)} copies in the Maildir" if in_maildir else ""
        if e in again:
            note = (note + "; " if note else "") + "re-run after it was reconciled as not done"
        items.append(ev.effect(e, face, facts.proc(e.get("process_id")), tz, note=note))
    return items


# --- in-doubt --------------------------------------------------------------------------------------------


def check_in_doubt(facts: Facts) -> list[Finding]:
    face = facts.face
    rows = [e for e in list_effects(facts.store, state="in_doubt") if facts.effect_ok(e)]
    rows.sort(key=lambda e: (e["started_at"], e["key"]))
    _, by_mid = _mail_counts(facts)
    context = facts.effect_context([e["key"] for e in rows[:MAX_FINDINGS_PER_CHECK]])
    jobs = facts.load_jobs(int(e["job_id"]) for e in rows if e["job_id"] is not None)
    findings: list[Finding] = []
    for e in rows[:MAX_FINDINGS_PER_CHECK]:
        key = e["key"]
        job = jobs.get(int(e["job_id"])) if e["job_id"] is not None else None
        tz = facts.tz_of(facts.occurrence_key(int(job["occurrence_id"]))) if job and job["occurrence_id"] else None
        holder = facts.proc(e.get("process_id"))
        who = f"{holder.name} pid {holder.pid} on {holder.host}" if holder else f"process {e.get('process_id')}"
        items = [ev.effect(e, face, holder, tz)]
        if job:
            items.append(ev.job(job, face, tz))
        if holder:
            items.append(ev.process(holder, face, tz))
        app = context.get(key)
        mid = app.message_id if app else None
        if app:
            items.extend(app.evidence)
        delivered = None
        if facts.maildir is not None and mid:
            delivered = by_mid.get(mid, 0)
            items.append(ev.note(f"the Maildir {facts.maildir} holds {plural(delivered, 'message')} with Message-ID "
                                 f"{mid}",
                                 maildir=str(facts.maildir), message_id=mid, copies=delivered))
        summary = (f"effect {key} is in doubt since {face.text(e['started_at'], tz)}: attempt {e['attempt']} of job "
                   f"{e['job_id']} ({who}) {why_in_doubt(e.get('detail'))}")
        if job and job["state"] == "in_doubt":
            summary += f"; job {job['id']} waits in_doubt (its other effects ran)"
        if delivered:
            fix = (f"The Maildir shows it was delivered: run `oncebeat effects resolve {key} done`.")
        elif delivered == 0:
            fix = (f"The Maildir has no copy, so it most likely did not happen: after checking the mail server log "
                   f"run `oncebeat effects resolve {key} not_done` to allow one re-run.")
        elif app and app.fix:
            fix = app.fix
        else:
            look = f" (for an email, look for Message-ID {mid} at the mail server)" if mid else ""
            fix = (f"Check whether it happened{look}, then run `oncebeat effects resolve {key} done` if it did or "
                   f"`oncebeat effects resolve {key} not_done` to allow one re-run.")
        findings.append(Finding(code="in-doubt", severity="error", summary=summary, subject=f"effect:{key}",
                                evidence=capped(items), fix=fix))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="in-doubt", severity="error", summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more effects are in "
                                                       "doubt",
            fix="List them with `oncebeat effects list --state in_doubt` and resolve each.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings


# --- duplicate-delivery ----------------------------------------------------------------------------------


def check_duplicate_delivery(facts: Facts) -> list[Finding]:
    """One message delivered more than once (Maildir): copies an app names as one message (whatever their
    Message-IDs), then copies sharing a Message-ID."""
    if facts.maildir is None:
        raise Skip("no Maildir given (--maildir DIR): mail evidence not examined")
    if not facts.maildir.is_dir():
        raise Skip(f"Maildir {facts.maildir} does not exist")
    findings: list[Finding] = []
    for label, ms in _duplicate_sets(facts)[:MAX_FINDINGS_PER_CHECK]:
        mids = {m.message_id for m in ms}
        app = facts.group_context(ms)
        items: list[Evidence] = [_message(facts, m) for m in ms] + list(app.evidence if app else ())
        if len(mids) == 1:
            cause = ("all copies carry one Message-ID, so one effect was delivered more than once: a resend of an "
                     "in-doubt effect judged not done, an SMTP retry after a lost reply, or the relay duplicated it")
        else:
            cause = (f"the copies carry {len(mids)} different Message-IDs, so they were separate sends: something "
                     "sent outside this effect ledger (another database, an old version, a manual script)")
        findings.append(Finding(
            code="duplicate-delivery", severity="error",
            summary=f"{label} was delivered {len(ms)} times to {ms[0].to}: {cause}",
            subject=app.subject if app else None, evidence=capped(items),
            fix=app.fix if app and app.fix else (
                "Tell the recipient if needed, then follow the evidence: with one Message-ID check the effect's "
                "history (`oncebeat doctor --explain job ID`); with several, find the other sender and stop it.")))
    return findings


def _duplicate_sets(facts: Facts) -> list[tuple[str, list[Any]]]:
    """(label, copies) of each message delivered more than once, app-named groups first."""
    groups: dict[str, list[Any]] = defaultdict(list)
    by_mid: dict[str, list[Any]] = defaultdict(list)
    for m in facts.messages():
        label = facts.message_group(m)
        if label:
            groups[label].append(m)
        if m.message_id:
            by_mid[m.message_id].append(m)
    dup_sets: list[tuple[str, list[Any]]] = []
    seen: set[str] = set()
    for label, ms in groups.items():
        if len(ms) > 1:
            dup_sets.append((label, ms))
            seen |= {m.key for m in ms}
    for mid, ms in by_mid.items():
        if len(ms) > 1 and not {m.key for m in ms} <= seen:
            dup_sets.append((f"Message-ID {mid}", ms))
            seen |= {m.key for m in ms}
    return dup_sets


def _message(facts: Facts, m: Any, tz: str | None = None) -> Evidence:
    text, data = facts.message_fields(m)
    return ev.message(m, facts.face, tz, app_text=text, app_data=data)


# --- lost ------------------------------------------------------------------------------------------------


def check_lost(facts: Facts) -> list[Finding]:
    """The engine's losses: occurrences without a job, jobs past their lease, due jobs nobody claims; jobs a pause
    holds are neither lost nor late (an ``info`` finding says what holds them and how to release them).

    (An app adds its own part of ``lost``: its work that nothing will do.)
    """
    return _occurrences_without_job(facts) + _expired_leases(facts) + _unclaimed_jobs(facts) + _held_by_pause(facts)


def _occurrences_without_job(facts: Facts) -> list[Finding]:
    """Occurrences that should have a job and have none: they never ran."""
    face = facts.face
    findings: list[Finding] = []
    occs = [o for o in facts.store.read("doctor_occurrences_without_job", since=facts.since) if facts.occurrence_ok(o)]
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in occs:
        by_key[str(o["schedule_key"])].append(o)
    for key, rows in sorted(by_key.items()):
        findings.append(Finding(
            code="lost", severity="error",
            summary=(f"{plural(len(rows), 'occurrence')} of {key} recorded as "
                     f"{'/'.join(sorted({r['outcome'] for r in rows}))} "
                     f"with no job (first at {face.text(rows[0]['fire_at'], str(rows[0]['tz']))}): they never ran"),
            subject=f"schedule:{key}", evidence=capped(ev.occurrence(o, face) for o in rows),
            fix=(f"Something wrote the ledger without enqueueing (an old version or a hand-made insert; see the "
                 f"source). Run `oncebeat trigger {key}` to run it now.")))
    return findings


def _expired_leases(facts: Facts) -> list[Finding]:
    """Running jobs whose lease expired: their worker died (an error once no worker rescues them)."""
    face = facts.face
    now = facts.now
    findings: list[Finding] = []
    expired = [j for j in facts.store.read("doctor_expired_leases", now=now) if facts.job_ok(j)]
    if expired:
        stuck = [j for j in expired if now - j["lease_expires_at"] > LEASE_RESCUE_EXPECTED]
        items = []
        for j in expired:
            items.append(ev.job(j, face, note=f"lease expired "
                                              f"{duration_text((now - j['lease_expires_at']).total_seconds())} ago"))
            p = facts.proc(j.get("worker_id"))
            if p:
                items.append(ev.process(p, face))
        findings.append(Finding(
            code="lost", severity="error" if stuck else "warning",
            summary=(f"{plural(len(expired), 'job')} still marked running past the lease (oldest expired "
                     f"{face.text(expired[0]['lease_expires_at'])}): their worker died"
                     + ("; no worker has rescued them" if stuck else "")),
            subject=f"job:{expired[0]['id']}", evidence=capped(items),
            fix=("Start a worker: workers rescue expired leases every 15 s and the jobs run again (effects already "
                 "done are not repeated)." if stuck else
                 "Nothing to do yet: the next rescue (every 15 s in any worker) puts them back in the queue.")))
    return findings


def _unclaimed_jobs(facts: Facts) -> list[Finding]:
    """Due jobs that nobody claims: no worker takes their queue."""
    face = facts.face
    now = facts.now
    findings: list[Finding] = []
    overdue = [j for j in facts.store.read("doctor_overdue_jobs", before=now - OVERDUE_AFTER, limit=1000)
               if facts.job_ok(j)]
    if overdue:
        queues = Counter(str(j["queue"]) for j in overdue)
        workers = [p for p in facts.processes() if p.role == "worker" and p.alive_at(now)]
        items = [ev.job(j, face) for j in overdue] + [ev.process(p, face) for p in workers]
        findings.append(Finding(
            code="lost", severity="warning",
            summary=(f"{plural(len(overdue), 'job')} due for more than {duration_text(OVERDUE_AFTER.total_seconds())} "
                     f"and not claimed (queues: {', '.join(f'{q} {n}' for q, n in sorted(queues.items()))}); "
                     f"{plural(len(workers), 'worker')} alive"),
            subject=f"job:{overdue[0]['id']}", evidence=capped(items, total=len(overdue) + len(workers)),
            fix="Start workers for those queues (`oncebeat worker --queue NAME`); jobs wait, they are not lost."))
    return findings


def _held_by_pause(facts: Facts) -> list[Finding]:
    """Jobs a pause holds (a paused queue, a paused schedule's queued runs): waiting for a resume, not lost."""
    findings: list[Finding] = []
    for h in held_jobs(facts.store):
        if h.kind == "schedule" and not facts.schedule_ok(h.name):
            continue
        resume = f"oncebeat {'queues' if h.kind == 'queue' else 'schedules'} resume {h.name}"
        findings.append(Finding(
            code="lost", severity="info",
            summary=(f"{plural(h.n, 'job')} of queue {h.queue} held: {h.describe()}; they are not lost and not "
                     "late: no worker takes them until the pause ends"),
            subject=f"{h.kind}:{h.name}",
            fix=f"`{resume}` releases them (each runs once); leave it paused to keep holding them."))
    return findings




# --- discarded -------------------------------------------------------------------------------------------


def check_discarded(facts: Facts) -> list[Finding]:
    face = facts.face
    rows = [j for j in facts.store.read("doctor_discarded_jobs", since=facts.since) if facts.job_ok(j)]
    findings: list[Finding] = []
    context = facts.job_context(rows[:MAX_FINDINGS_PER_CHECK])
    occs = facts.load_occurrences(int(j["occurrence_id"]) for j in rows if j["occurrence_id"] is not None)
    events = {str(e["subject"]): e for e in facts.events("job.discarded", "job.rescued")}
    for j in rows[:MAX_FINDINGS_PER_CHECK]:
        err = ev.last_error(j) or {}
        occ = occs.get(int(j["occurrence_id"])) if j["occurrence_id"] is not None else None
        tz = str(occ["tz"]) if occ else None
        items = [ev.job(j, face, tz)]
        for e in (j.get("errors") or [])[-5:]:
            when = parse_iso(e.get("at"))
            items.append(ev.note(f"attempt {e.get('attempt')} failed {face.text(when, tz) if when else e.get('at')} "
                                 f"({e.get('kind')}): {str(e.get('error') or '')[:300]}",
                                 **{k: e.get(k) for k in ("attempt", "at", "kind", "error")}))
        if occ:
            items.append(ev.occurrence(occ, face))
        app = context.get(int(j["id"]))
        if app:
            items.extend(app.evidence)
        if f"job:{j['id']}" in events:
            last = events[f"job:{j['id']}"]
            d = last.get("detail") or {}
            text = (f"gave up after attempt {d.get('attempt')}" + (" (permanent error)" if d.get("permanent") else "")
                    if last["kind"] == "job.discarded" else
                    f"rescued after attempt {d.get('attempt')} with no attempts left: now {d.get('new_state')}")
            items.append(ev.event(last, face, tz, text=text))
        kind = err.get("kind")
        if kind == "in_doubt":
            fix = ("Resolve the effect (see in-doubt); the job gave up rather than repeat an effect that may have "
                   "happened.")
        elif kind == "effect_conflict":
            fix = ("A programming error: one effect key was used for two different payloads (see effect-conflict). "
                   "Make the key name exactly one effect (include what differs in it); the job's other effects ran.")
        elif kind == "unknown_task":
            fix = f"Deploy workers that register task {j['task']}, then enqueue the work again."
        elif kind == "rescue":
            fix = ("Its workers kept dying while running it (killed, out of memory, past the grace period): find why "
                   "before enqueueing it again.")
        else:
            fix = ("Fix the cause named in the last error, then enqueue the work again"
                   + (f"; {app.fix}." if app and app.fix else "."))
        first = str(err.get("error") or "no error recorded").strip().splitlines()
        findings.append(Finding(
            code="discarded", severity="error",
            summary=(f"job {j['id']} ({j['task']}) gave up after {plural(int(j['attempt']), 'attempt')} at "
                     f"{face.text(j['finished_at'], tz)}: {(first[-1] if first else '')[:200]}"),
            subject=f"job:{j['id']}", evidence=capped(items), fix=fix))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="discarded", severity="error", summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more jobs were "
                                                        "discarded",
            fix="List them with `oncebeat jobs --state discarded`.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings


# --- effect-conflict -------------------------------------------------------------------------------------


def check_effect_conflict(facts: Facts) -> list[Finding]:
    """Effect keys reused with another payload (``effect.conflict`` events): a bug, recorded, never retried."""
    face = facts.face
    rows = facts.events("effect.conflict")
    effects = {str(e["key"]): e for e in facts.effects_by_keys([str(r["detail"].get("key")) for r in rows])}
    jobs = facts.load_jobs(int(r["detail"]["job_id"]) for r in rows if r["detail"].get("job_id") is not None)
    findings: list[Finding] = []
    for r in rows[:MAX_FINDINGS_PER_CHECK]:
        d = r.get("detail") or {}
        key = str(d.get("key"))
        items = [ev.event(r, face, text=(f"effect key {key} reused with payload hash {d.get('payload_hash')}; "
                                          f"first used with {d.get('first_payload_hash')}"))]
        if key in effects:
            items.append(ev.effect(effects[key], face, facts.proc(effects[key].get("process_id"))))
        job = jobs.get(int(d["job_id"])) if d.get("job_id") is not None else None
        if job:
            items.append(ev.job(job, face))
        findings.append(Finding(
            code="effect-conflict", severity="error",
            summary=(f"effect key {key} was reused with another payload at {face.text(r['at'])}"
                     + (f" by job {d.get('job_id')} attempt {d.get('attempt')}" if d.get("job_id") else "")
                     + f" (payload hash {d.get('payload_hash')}, first {d.get('first_payload_hash')}): "
                       "that effect was not run; the job's other effects were"),
            subject=f"effect:{key}", evidence=capped(items),
            fix=("A key must name exactly one effect: put what differs (e.g. the recipient or the amount) into "
                 "the key, or keep the payload the same. Then enqueue the work again if the second effect is "
                 "still wanted.")))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="effect-conflict", severity="error",
            summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more effect keys were reused with another payload",
            fix="List them with the audit events of kind effect.conflict.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings
