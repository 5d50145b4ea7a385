"""W3 end to end: reminders delivered per second through the local SMTP sink.

Per run: a fresh database gets ``n`` open invoices all 10 days overdue (real
customers and amounts from :mod:`bench.invoices`, several locales); one scan
creates ``n`` pending reminders (plus ``n`` superseded stage-1 rows) and ``n``
send jobs; the SMTP sink (:class:`oncebeat.mail.MailSink`, aiosmtpd, writing a
Maildir) runs in its own process; then 1 or 2 worker processes run the
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


def one(settings: Settings, backend: str, n: int, workers: int, *, spy_name: str | None = None) -> dict[str, Any]:
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
        maildir = db.path.parent / "maildir" if db.path else settings.tmp / f"maildir-{db.schema}"
        logs = settings.tmp / "logs"
        sink = start_children("mailsink", [{"maildir": str(maildir)}], logdir=logs)[0]
        try:
            sink.go()
            url = sink.ready_info["url"]
            spec = {"url": db.url, "smtp_url": url, "batch_size": 100, "concurrency": 1}
            kids = start_children("reminders-worker", [spec] * workers, logdir=logs)
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
            sink.stop()
            sink_info = sink.finish()
        done, secs = db.job_span()
        sent = int(db.query("SELECT count(*) FROM reminders WHERE state = 'sent'")[0][0])
        if sent != n or sink_info["accepted"] != n or done != n:
            raise RuntimeError(f"W3: {sent} sent, {sink_info['accepted']} accepted by the sink, {done} jobs done; "
                               f"expected {n}")
    return {"reminders": n, "workers": workers, "seconds": secs, "rate": n / secs, "wall": wall,
            "worker_cpu_ms_per_reminder": sum(i["work_cpu"] for i in infos) / n * 1000,
            "maxrss_kb": max(i["maxrss_kb"] for i in infos), "smtp_connections": sink_info["connections"]}


def run(settings: Settings) -> dict[str, Any]:
    res: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for rep in range(settings.reps):
        for backend in settings.backends:
            for workers in (1, 2):
                spy_name = f"w3-{backend}-{workers}w" if rep == 0 and workers == 2 else None
                r = one(settings, backend, settings.e2e_reminders, workers, spy_name=spy_name)
                log(f"W3 rep {rep + 1}: {backend}, {workers} worker(s): {r['rate']:,.0f} reminders/s "
                    f"({r['worker_cpu_ms_per_reminder']:.2f} ms worker CPU each, {r['smtp_connections']} SMTP "
                    f"connections)")
                res.setdefault(backend, {}).setdefault(workers, []).append(r)
    comp = components()
    ceiling = {c: sink_ceiling(settings, connections=c) for c in (1, 2)}
    log(f"W3 components (µs): {', '.join(f'{k} {v:,.0f}' for k, v in comp.items())}; sink ceiling "
        f"{ceiling[1]:,.0f}/s (1 connection), {ceiling[2]:,.0f}/s (2)")
    return {"reminders": settings.e2e_reminders, "results": res, "components_us": comp, "sink_ceiling": ceiling,
            "tables": {**tables(res), **component_table(comp, ceiling)}}


def component_table(comp: dict[str, float], ceiling: dict[int, float]) -> dict[str, str]:
    rows = [[k, f"{v:,.0f}"] for k, v in comp.items()]
    rows += [[f"SMTP sink ceiling, raw smtplib, {c} connection(s) (messages/s)", f"{v:,.0f}"]
             for c, v in ceiling.items()]
    return {"components": md_table(["step of one send (µs per call, warm, one process)", "value"], rows)}


def tables(res: dict[str, dict[int, list[dict[str, Any]]]]) -> dict[str, str]:
    rows = []
    for backend, by_w in res.items():
        for workers, reps in sorted(by_w.items()):
            rows.append([backend, workers, fmt_stat([r["rate"] for r in reps]),
                         fmt_stat([r["worker_cpu_ms_per_reminder"] for r in reps], 2),
                         fmt_stat([r["maxrss_kb"] / 1024 for r in reps], 0),
                         reps[0]["smtp_connections"]])
    return {"e2e": md_table(["backend", "workers", "reminders delivered/s", "worker CPU ms per reminder",
                             "peak RSS MB per worker", "SMTP connections"], rows)}


def components(n: int = 300) -> dict[str, float]:
    """Microseconds per call of the CPU-bound steps of one send (in this process, warm)."""
    import timeit
    from datetime import date

    from oncebeat.mail import build_message, make_message_id
    from oncebeat.mail.smtp import _dot_stuff, _serialize
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.render import Renderer

    policy = Policy()
    renderer = Renderer(policy.templates, company=policy.company)
    from email.headerregistry import Address

    def render() -> Any:
        return renderer.render(invoice_number="536365-3", customer_name="Customer 17850", customer_locale="de_DE",
                               currency="GBP", amount_due=13912, due_on=date(2026, 2, 20),
                               issued_on=date(2026, 1, 21), stage=7, days_past_due=10)

    rendered = render()

    def build() -> Any:
        return build_message(sender=policy.sender, to=Address("Customer 17850", "c17850", "example.com"),
                             subject=rendered.subject, text=rendered.text, html=rendered.html,
                             message_id=make_message_id("reminder:536365-3:7", "example.com"),
                             reply_to=policy.reply_to, headers={"X-Oncebeat-Invoice": "536365-3",
                                                                "X-Oncebeat-Stage": "7", "X-Oncebeat-Reminder": "1"})

    msg = build()

    def serialize() -> Any:
        return _dot_stuff(_serialize(msg, utf8=False))

    out = {}
    for name, fn in (("render (Jinja2 + Babel)", render), ("build_message (email.message)", build),
                     ("serialize for SMTP (email.generator)", serialize)):
        fn()
        out[name] = min(timeit.repeat(fn, number=n // 3, repeat=3)) / (n // 3) * 1e6
    out["message size (bytes)"] = float(len(serialize()))
    return out


def sink_ceiling(settings: Settings, n: int = 1000, connections: int = 1) -> float:
    """Messages/s the sink accepts from raw smtplib clients sending one prebuilt reminder-sized message."""
    import smtplib
    import threading

    payload = (b"From: Billing <billing@example.com>\r\nTo: x@example.com\r\nSubject: reminder\r\n"
               b"Message-ID: <ceiling@example.com>\r\n\r\n" + (b"x" * 70 + b"\r\n") * 40 + b".\r\n")
    maildir = settings.tmp / f"maildir-ceiling-{connections}"
    sink = start_children("mailsink", [{"maildir": str(maildir)}], logdir=settings.tmp / "logs")[0]
    sink.go()
    host, port = sink.ready_info["url"].split("//")[1].rsplit(":", 1)

    def client(k: int) -> None:
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

    threads = [threading.Thread(target=client, args=(n // connections,)) for _ in range(connections)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rate = (n // connections) * connections / (time.perf_counter() - t)
    sink.stop()
    sink.finish()
    return rate
