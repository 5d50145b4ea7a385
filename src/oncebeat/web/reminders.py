"""Reminders: search by invoice number or customer email (a POST, so no address lands in a URL), each
invoice's stage timeline (sent, held, skipped with reason, failed with the server's reply, in doubt) with the
Message-ID and a rendered preview of each email, the files each sent email carried (name, size, SHA-256, a
download for a logged-in operator), its holds (an admin places and releases them: CSRF, operator
session, audited), and the aging report as a chart per currency."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import date, datetime, time
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..reminders.capfence import fence_status, waiting_by_source, waiting_reminders, waiting_words
from ..reminders.money import minor_digits
from ..reminders.outage import mail_outage
from ..reminders.runtime import Runtime
from .app import Banner, action_form, dashboard, redirect_with, register_banner, render, route
from .charts import stacked_bars
from .filters import ago, utc
from .schedules import operator_source
from .security import content_security_policy

__all__ = ["mail_outage_banner", "mask_email", "payment_freshness_banner", "routes"]

SENT_TODAY_LIMIT = 200  # rows of the "sent today" list
#: The counts per stage and state stop at this many and show "10,000+" (docs/benchmarks.md, round 3b).
COUNT_CAP = 10_000
BUCKETS = ("current", "1-30", "31-60", "61-90", "90+")


def mask_email(email: str) -> str:
    """``alice@example.test`` → ``a…e@example.test`` (lists show whose invoice it is without the full address)."""
    local, _, domain = email.partition("@")
    shown = local[0] + "…" + local[-1] if len(local) > 2 else local[:1] + "…"
    return f"{shown}@{domain}"


def mail_outage_banner(rt: Runtime) -> list[Banner]:
    """The banner every page shows while reminders wait out a mail outage: since when the server refuses, how
    many reminders wait, the next try and the server's last answer (:func:`oncebeat.reminders.outage.mail_outage`).
    """
    outage = mail_outage(rt.store)
    if outage is None:
        return []
    now = rt.clock.now()
    n = outage.waiting
    text = (f"since {utc(outage.since)} ({ago(outage.since, now)}): {n} reminder{'' if n == 1 else 's'} waiting "
            "(a delay, not a failure: no attempt is used up)")
    if outage.next_try_at is not None:
        text += f", next try {utc(outage.next_try_at)} ({ago(outage.next_try_at, now)})"
    if outage.last_reason:
        text += f". Last answer: {outage.last_reason[:200]}"
    return [Banner(title="Mail server refusing", text=text, link="/doctor")]


register_banner(mail_outage_banner)


def payment_freshness_banner(rt: Runtime) -> list[Banner]:
    """The banner every page shows while sends wait for fresher payment data (``[reminders]
    max_payment_staleness``, :func:`oncebeat.reminders.capfence.fence_status`): shown while reminders wait or the
    freshest data is stale: how old the data of each stale source reminders wait on is (the freshest source's when
    every source is stale), and how many reminders wait on each (issue 23 item 5)."""
    if rt.policy.max_payment_staleness is None:
        return []
    fresh = fence_status(rt.store, rt.policy, clock=rt.clock)
    waiting = waiting_reminders(rt.store)
    # the sources stale now that reminders wait on (a row whose source was refreshed since goes at its next check)
    waiting_on = {src: n for src, n in waiting_by_source(waiting).items() if fresh.of(src).stale}
    if not fresh.stale and not waiting_on:
        return []
    text = fresh.sentence() if fresh.stale else "; ".join(fresh.of(src).sentence() for src in waiting_on)
    per_source = {waiting_words(src): n for src, n in waiting_on.items()}
    if per_source:
        n = sum(per_source.values())
        on = (f" on {next(iter(per_source))}" if len(per_source) == 1
              else ": " + ", ".join(f"{k} on {name}" for name, k in per_source.items()))
        text += f" ({n} reminder{'' if n == 1 else 's'} waiting{on}; a delay, not a failure)"
    elif waiting:
        n = len(waiting)
        text += f" ({n} reminder{'' if n == 1 else 's'} waiting: a delay, not a failure)"
    return [Banner(title="Reminders waiting for fresh payment data:", text=text, link="/doctor")]


register_banner(payment_freshness_banner)


def _aging(rows: list[dict[str, Any]], wanted: str | None) -> dict[str, Any]:
    """One aging table (a row per currency: invoices and open amount per bucket, never summed across currencies)
    and the chart of one currency: ``wanted`` when it has open invoices, else the one with the most."""
    by_currency: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        by_currency[r["currency"]][r["bucket"]] = r
    table = [{"currency": c, "cells": [buckets.get(b) for b in BUCKETS],
              "invoices": sum(int(r["invoices"]) for r in buckets.values())}
             for c, buckets in sorted(by_currency.items())]
    if not table:
        return {"table": [], "selected": None, "chart": None}
    most = max(table, key=lambda t: (t["invoices"], t["currency"]))
    selected: str = wanted if wanted is not None and wanted in by_currency else str(most["currency"])
    buckets = by_currency[selected]
    scale = 10 ** minor_digits(selected)  # the chart's axis in major units (euros, not cents)
    series = f"open amount ({selected})"
    columns = [(b, {series: float(buckets[b]["amount"]) / scale if b in buckets else 0.0}) for b in BUCKETS]
    tips = {b: f"{b} days: {buckets[b]['invoices']} invoice(s)" for b in BUCKETS if b in buckets}
    return {"table": table, "selected": selected,
            "chart": stacked_bars(columns, [series], width=420, height=150, title=f"aging {selected}",
                                  value_text=tips)}


async def reminders_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    as_of = rt.clock.now().astimezone(rt.policy.zone).date()
    counts: dict[int, dict[str, str]] = defaultdict(dict)
    states: set[str] = set()
    # The two aggregates read different tables: run side by side (two pooled connections), the page waits for
    # the slower one instead of their sum (docs/benchmarks.md, dashboard pages).
    midnight = datetime.combine(as_of, time(0), tzinfo=rt.policy.zone)
    count_rows, aging_rows, sent = await asyncio.gather(
        run_in_threadpool(rt.service.reminder_count_rows_capped, COUNT_CAP), run_in_threadpool(rt.service.aging, as_of),
        run_in_threadpool(lambda: rt.service.sent_since(midnight, limit=SENT_TODAY_LIMIT + 1)))
    for r in sent:
        r["masked_email"] = mask_email(r["email"])
    for r in count_rows:
        # a count over the cap shows as "10,000+" (a lower bound): the page reads a bounded number of rows
        counts[int(r["stage"])][r["state"]] = f"{COUNT_CAP:,}+" if r["capped"] else str(r["n"])
        states.add(r["state"])
    return render(request, "reminders.html", {
        "title": "Reminders", "as_of": as_of, "tz": rt.policy.tz, "buckets": BUCKETS,
        "aging": _aging(aging_rows, request.query_params.get("currency")),
        "sent_today": sent[:SENT_TODAY_LIMIT], "sent_more": len(sent) > SENT_TODAY_LIMIT, "midnight": midnight,
        "counts": dict(sorted(counts.items())),
        "states": [s for s in ("pending", "deferred", "sent", "held", "skipped", "failed", "in_doubt") if s in states]})


async def search(request: Request) -> Response:
    form = await action_form(request, action=False)  # a read: CSRF only, no token needed
    query = form.get("q", "").strip()
    service = dashboard(request).runtime.service
    found = await run_in_threadpool(service.search_invoices, query) if query else []
    for inv in found:
        inv["masked_email"] = mask_email(inv["email"])
    return render(request, "reminders_search.html", {"title": "Reminders: search", "query": query, "found": found})


def invoice_page(request: Request) -> Response:
    from ..reminders.holds import HOLD_REASONS, holds_of_invoice  # here: a library app's dashboard never loads it
    from ..reminders.notices.sending import reminder_attachments
    from ..reminders.pinning import versions_by_id

    rt = dashboard(request).runtime
    number = request.path_params["number"]
    story = rt.service.invoice_story(number)
    if story is None:
        raise HTTPException(404, f"no invoice {number!r}")
    previews = {}
    for r in story["reminders"]:
        if r["superseded_by"] is not None:  # a stage superseded by a higher one: never rendered, never sent
            continue
        _, rendered, message_id = rt.service.render_reminder(r["id"])
        previews[r["id"]] = {"subject": rendered.subject, "text": rendered.text, "message_id": message_id}
    pin = story["invoice"].get("ladder_version_id")
    ladder = versions_by_id(rt.store, [pin]).get(int(pin)) if pin is not None else None
    return render(request, "invoice.html", {"title": f"Invoice {number}", **story, "previews": previews,
                                            "ladder": ladder,
                                            "tz": rt.policy.tz, "hold_reasons": HOLD_REASONS,
                                            "holds": holds_of_invoice(rt.store, story["invoice"]["id"]),
                                            "attachments": reminder_attachments(rt.store, story["invoice"]["id"])})


async def place_hold_action(request: Request) -> Response:
    """An admin places a hold on the invoice (or on its customer): CSRF and operator session checked, audited."""
    from ..reminders.holds import HoldError, place_hold

    form = await action_form(request)
    rt = dashboard(request).runtime
    number = request.path_params["number"]
    try:
        until = date.fromisoformat(form["until"].strip()) if form.get("until", "").strip() else None
    except ValueError:
        raise HoldError(f"until: {form['until']!r} is not a date YYYY-MM-DD") from None
    rows = await run_in_threadpool(rt.service.find_invoices, number)
    if not rows:
        raise HTTPException(404, f"no invoice {number!r}")
    on_customer = form.get("scope") == "customer"
    hold = await run_in_threadpool(lambda: place_hold(
        rt.store, clock=rt.clock, zone=rt.policy.zone, source=operator_source(), reason=form.get("reason", ""),
        invoice=None if on_customer else number, customer=rows[0]["email"] if on_customer else None, until=until,
        note=form.get("note", "").strip()[:500] or None, calendar=rt.policy.calendar))
    assert hold is not None
    return redirect_with(request, f"hold {hold.id} placed on {hold.target} ({hold.reason})", _invoice_path(number))


async def release_hold_action(request: Request) -> Response:
    """An admin releases hold ``id``: reminders resume the next business day. CSRF and session checked, audited."""
    from ..reminders.holds import release_holds

    form = await action_form(request)
    rt = dashboard(request).runtime
    released = await run_in_threadpool(lambda: release_holds(
        rt.store, clock=rt.clock, zone=rt.policy.zone, source=operator_source(), hold_id=int(request.path_params["id"]),
        note="released on the dashboard", calendar=rt.policy.calendar))
    message = (f"hold {released[0].id} released; reminders resume on {released[0].resumes_on}" if released
               else "that hold was already released")
    return redirect_with(request, message, form.get("next") or "/reminders")


def _invoice_path(number: str) -> str:
    return "/reminders/invoices/" + quote(number, safe="")


def email_html(request: Request) -> Response:
    rt = dashboard(request).runtime
    _, rendered, _ = rt.service.render_reminder(int(request.path_params["id"]))
    # Customer data in a sandbox of its own: no script, no form, no navigation; the email's inline styles apply.
    csp = content_security_policy(sandbox=True).replace("style-src 'self'", "style-src 'unsafe-inline'")
    return HTMLResponse(rendered.html, headers={"content-security-policy": csp})


def attachment_download(request: Request) -> Response:
    """The ``position``-th file of reminder ``id``'s email, exactly the bytes sent (login required, as every page)."""
    from ..reminders.notices.attachments import safe_filename
    from ..reminders.notices.sending import reminder_attachment

    rt = dashboard(request).runtime
    row = reminder_attachment(rt.store, int(request.path_params["id"]), int(request.path_params["position"]))
    if row is None:
        raise HTTPException(404, "no such attachment")
    name = safe_filename(row["filename"])  # quotes, CR and LF cannot reach the header
    ascii_name = name.encode("ascii", "replace").decode("ascii").replace("?", "_")
    media = "application/pdf" if row["content_type"] == "application/pdf" else "application/octet-stream"
    return Response(row["content"], media_type=media, headers={
        "content-disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}",
        "x-content-type-options": "nosniff", "cache-control": "no-store"})


routes = [
    route("/reminders", reminders_page),
    route("/reminders/search", search, methods=["POST"]),
    route("/reminders/invoices/{number:path}/hold", place_hold_action, methods=["POST"]),
    route("/reminders/holds/{id:id}/release", release_hold_action, methods=["POST"]),
    route("/reminders/invoices/{number:path}", invoice_page),
    route("/reminders/{id:id}/email.html", email_html),
    route("/reminders/{id:id}/attachments/{position:int}", attachment_download),
]
