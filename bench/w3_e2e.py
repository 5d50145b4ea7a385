"""W3 end to end: reminders delivered per second through the local SMTP sink.

Per run: a fresh database gets ``n`` open invoices all 10 days overdue (real
customers and amounts from :mod:`bench.invoices`, several locales); one scan
creates ``n`` pending reminders (plus ``n`` superseded stage-1 rows) and ``n``
send jobs; one SMTP sink process per worker (``--e2e-sink discard``, the
default: an aiosmtpd server that accepts and keeps nothing, so the sink is not
the ceiling; ``maildir``: :class:`oncebeat.mail.MailSink` writing a Maildir);
then 1 or 2 worker processes (each with its own sink) run the
reminder app exactly as ``oncebeat worker`` builds it (``build_app`` over a
``ReminderService`` with a ``Mailer`` that keeps its SMTP connection open —
connection reuse on), ``Worker(concurrency=1, batch_size=100).run()``. Each
send re-reads the invoice, renders the email (Jinja2 + Babel), claims the
effect key, delivers, records the effect and the reminder.

Rate: sent reminders / (first claim → last completion) from the job rows. The
run checks that the sink accepted exactly ``n`` messages and that ``n``
reminders are ``sent``.
"""

from __future__ import annotations

import time
from typing import Any

from bench import invoices
from bench.common import FreshDb, Settings, fmt_stat, log, md_table, start_children, wait_until
from bench.w2_scan import BUSINESS_DATE


def one(settings: Settings, backend: str, n: int, workers: int, *, concurrency: int = 1,
        spy_name: str | None = None) -> dict[str, Any]:
    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    with FreshDb(backend, "w3", settings) as db:
        invoices.load_overdue(db, n, BUSINESS_DATE)
        with open_store(db.url) as store:
            r = ReminderService(store, Policy(), clock=SystemClock()).scan(
                occurrence_id=1, business_date=BUSINESS_DATE, source=current_source("worker"))
        if r.pending != n:
            raise RuntimeError(f"scan made {r.pending} pending reminders, expected {n}")
        sinks = start_sinks(settings, settings.e2e_sink, workers, tag=db.schema or "sqlite")
        logs = settings.tmp / "logs"
        try:
            specs = [{"url": db.url, "smtp_url": sinks[i % len(sinks)].ready_info["url"], "batch_size": 100,
                      "concurrency": concurrency} for i in range(workers)]
            kids = start_children("reminders-worker", specs, logdir=logs)
            spies = []
            if spy_name and settings.profile:
                from bench.profiling import spy

                spies = [spy(k.pid, f"{spy_name}-{i}") for i, k in enumerate(kids)]
            try:
                t0 = time.monotonic()
                for k in kids:
                    k.go()
                wait_until(lambda: db.jobs_unfinished() == 0, timeout=max(300.0, n / 20), interval=0.05,
                           children=kids, what="sends")
                wall = time.monotonic() - t0
                for k in kids:
                    k.stop()
                infos = [k.finish() for k in kids]
            except BaseException:
                for k in kids:
                    k.kill()
                raise
            for p in spies:
                p.wait(timeout=60)
        finally:
            sink_infos = stop_sinks(sinks)
        sink_info = {"accepted": sum(i["accepted"] for i in sink_infos),
                     "connections": sum(i["connections"] for i in sink_infos),
                     "cpu": sum(i.get("sink_cpu") or 0.0 for i in sink_infos)}
        done, secs = db.job_span()
        sent = int(db.query("SELECT count(*) FROM reminders WHERE state = 'sent'")[0][0])
        if sent != n or sink_info["accepted"] != n or done != n:
            raise RuntimeError(f"W3: {sent} sent, {sink_info['accepted']} accepted by the sink, {done} jobs done; "
                               f"expected {n}")
    out = {"reminders": n, "workers": workers, "concurrency": concurrency, "seconds": secs, "rate": n / secs, "wall": wall,
            "worker_cpu_ms_per_reminder": sum(i["work_cpu"] for i in infos) / n * 1000,
            "maxrss_kb": max(i["maxrss_kb"] for i in infos), "smtp_connections": sink_info["connections"],
            "sinks": len(sink_infos), "sink_kind": settings.e2e_sink,
            "sink_cpu_ms_per_reminder": sink_info["cpu"] / n * 1000}
    writes = sum(i.get("done_writes") or 0 for i in infos)
    if writes:  # the group commit of done records (engines that have it): how many records each write carried
        out["done_records_per_write"] = round(sum(i.get("done_records") or 0 for i in infos) / writes, 2)
        out["done_largest_write"] = max(i.get("done_largest_write") or 0 for i in infos)
    return out


SINK_ROLES = {"maildir": "mailsink", "discard": "discardsink"}
SINK_LABELS = {"maildir": "oncebeat MailSink (aiosmtpd, Maildir)", "discard": "aiosmtpd, discarding"}


def start_sinks(settings: Settings, kind: str, count: int, *, tag: str) -> list[Any]:
    """``count`` SMTP sink processes of ``kind`` (``maildir``: :class:`oncebeat.mail.MailSink` writing a
    Maildir; ``discard``: aiosmtpd accepting and keeping nothing), released at once."""
    specs = [{"maildir": str(settings.tmp / f"maildir-{tag}-{i}")} for i in range(count)]
    sinks = start_children(SINK_ROLES[kind], specs, logdir=settings.tmp / "logs")
    for sink in sinks:
        sink.go()
    return sinks


def stop_sinks(sinks: list[Any]) -> list[dict[str, Any]]:
    for sink in sinks:
        sink.stop()
    return [sink.finish() for sink in sinks]


def run(settings: Settings) -> dict[str, Any]:
    res: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for rep in range(settings.reps):
        for backend in settings.backends:
            for workers, slots in [(w, c) for w in settings.e2e_workers for c in settings.e2e_concurrency]:
                spy_name = f"w3-{backend}-{workers}w" if rep == 0 and workers == 2 else None
                r = one(settings, backend, settings.e2e_reminders, workers, concurrency=slots, spy_name=spy_name)
                log(f"W3 rep {rep + 1}: {backend}, {workers} worker(s) × {slots} slot(s): {r['rate']:,.0f} "
                    f"reminders/s ({r['worker_cpu_ms_per_reminder']:.2f} ms worker CPU each, "
                    f"sink {r['sink_cpu_ms_per_reminder']:.2f} ms, "
                    f"{r['smtp_connections']} SMTP connections)")
                res.setdefault(backend, {}).setdefault(f"{workers}x{slots}", []).append(r)
    comp = components()
    ceiling = {f"{SINK_LABELS[kind]}, {c} process(es), 1 connection each":
               sink_ceiling(settings, kind=kind, connections=c) for kind, c in
               (("maildir", 1), ("discard", 1), ("discard", 2))}
    log(f"W3 components (µs CPU): {', '.join(f'{k} {v:,.0f}' for k, v in comp.items())}; sink ceilings "
        + "; ".join(f"{k}: {v:,.0f}/s" for k, v in ceiling.items()))
    return {"reminders": settings.e2e_reminders, "results": res, "components_us": comp, "sink_ceiling": ceiling,
            "tables": {**tables(res), **component_table(comp, ceiling)}}


def component_table(comp: dict[str, float], ceiling: dict[str, float]) -> dict[str, str]:
    rows = [[k, f"{v:,.0f}"] for k, v in comp.items()]
    rows += [[f"SMTP sink ceiling, raw smtplib: {c} (messages/s)", f"{v:,.0f}"] for c, v in ceiling.items()]
    return {"components": md_table(["step of one send (µs of CPU per call, warm, one process)", "value"], rows)}


def tables(res: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, str]:
    rows = []
    for backend, by_w in res.items():
        for _, reps in sorted(by_w.items()):
            rows.append([backend, reps[0]["workers"], reps[0].get("concurrency", 1),
                         fmt_stat([r["rate"] for r in reps]),
                         fmt_stat([r["worker_cpu_ms_per_reminder"] for r in reps], 2),
                         fmt_stat([r["maxrss_kb"] / 1024 for r in reps], 0),
                         reps[0]["smtp_connections"], f"{reps[0].get('sinks', 1)} × "
                         f"{SINK_LABELS[reps[0].get('sink_kind', 'maildir')]}"])
    return {"e2e": md_table(["backend", "workers", "slots (SMTP connections) per worker", "reminders delivered/s", "worker CPU ms per reminder",
                             "peak RSS MB per worker", "SMTP connections", "sink processes"], rows)}


def components(n: int = 300) -> dict[str, float]:
    """CPU microseconds per call of the CPU-bound steps of one send (:func:`bench.send_cpu.steps`)."""
    from bench.send_cpu import steps

    return steps(n)


def sink_ceiling(settings: Settings, n: int = 2000, connections: int = 1, *, kind: str = "maildir") -> float:
    """Messages/s that ``connections`` sink processes of ``kind`` accept from as many raw smtplib clients (one
    connection to each sink) sending one prebuilt reminder-sized message."""
    import smtplib
    import threading

    payload = (b"From: Billing <billing@example.com>\r\nTo: x@example.com\r\nSubject: reminder\r\n"
               b"Message-ID: <ceiling@example.com>\r\n\r\n" + (b"x" * 70 + b"\r\n") * 40 + b".\r\n")
    sinks = start_sinks(settings, kind, connections, tag=f"ceiling-{kind}-{connections}")

    def client(k: int, i: int) -> None:
        host, port = sinks[i].ready_info["url"].split("//")[1].rsplit(":", 1)
        s = smtplib.SMTP(host, int(port))
        s.ehlo()
        for _ in range(k):
            s.docmd("MAIL", "FROM:<billing@example.com>")
            s.docmd("RCPT", "TO:<x@example.com>")
            s.docmd("DATA")
            s.send(payload)
            code, reply = s.getreply()
            if code != 250:
                raise RuntimeError(f"sink replied {code} {reply!r}")
        s.quit()

    threads = [threading.Thread(target=client, args=(n // connections, i)) for i in range(connections)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rate = (n // connections) * connections / (time.perf_counter() - t)
    stop_sinks(sinks)
    return rate
