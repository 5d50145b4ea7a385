"""Worker CPU per reminder on the send path: ``python -m bench.send_cpu [--n 1000] [--backend postgres]``.

Two measurements, both in CPU time of this process (not wall time), so that a
busy shared machine changes them little:

1. **Steps**, warm, per call: rendering (Jinja2 + Babel), the stdlib build
   (:func:`oncebeat.mail.build_message`, an ``EmailMessage``) and its
   serialisation (:func:`oncebeat.mail.message_bytes`), the direct builder
   :func:`oncebeat.mail.message.build_message_bytes` (when the engine under test
   has it), and the envelope the :class:`~oncebeat.mail.Mailer` reads back from
   frozen bytes before it sends them.
2. **Drain**: ``n`` reminder send jobs run in this process by the reminder app as
   ``oncebeat worker`` builds it (``Worker.run_batch()`` loop, batch 100, a
   ``Mailer`` keeping its connection) against the SMTP sink in its own process;
   CPU of this process / ``n`` — everything a worker spends per reminder,
   database client work included — and, on PostgreSQL, the SQL statements
   and transactions per reminder (:class:`StatementCount`, counted at psycopg).

To measure the engine before a change, run it against that engine's sources:
``PYTHONPATH=/path/to/other/checkout/src python -m bench.send_cpu``. Prints one
JSON object (also written to ``bench/results/<timestamp>-send_cpu.json``).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, date, datetime
from typing import Any

from bench.common import FreshDb, Settings, engine_version, start_children, write_json


def _cpu_per_call(fn: Callable[[], Any], n: int) -> float:
    """Microseconds of CPU per call of ``fn`` (best of 3 rounds of ``n`` calls, after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n)
    return best * 1e6


def steps(n: int = 300) -> dict[str, float]:
    """CPU µs per call of each step of one send (a German-locale reminder with a non-ASCII name)."""
    from email import message_from_bytes
    from email import policy as email_policy

    import oncebeat.mail.message as message
    from oncebeat.mail import build_message, make_message_id, message_bytes
    from oncebeat.mail.smtp import _envelope
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.render import Renderer

    policy = Policy()
    renderer = Renderer(policy.templates, company=policy.company)

    def render() -> Any:
        return renderer.render(invoice_number="536365-3", customer_name="Zoë Müller", customer_locale="de_DE",
                               currency="GBP", amount_due=13912, due_on=date(2026, 2, 20),
                               issued_on=date(2026, 1, 21), stage=7, days_past_due=10)

    varied = [dict(invoice_number=f"5363{i:02d}-{i % 7}", customer_name=f"Kundin {i} & Söhne", customer_locale=
                   ("de_DE", "en_US", "fr_FR")[i % 3], currency=("GBP", "EUR")[i % 2], amount_due=13912 + 137 * i,
                   due_on=date(2026, 2, 20), issued_on=date(2026, 1, 21), stage=7, days_past_due=7 + i % 11,
                   late_fee=500 if i % 5 == 0 else 0) for i in range(97)]
    turn = iter(range(10**9))

    def render_varied() -> Any:  # 97 invoices in turn: 3 locales, 11 days past due, fees on one in five
        return renderer.render(**varied[next(turn) % len(varied)])  # type: ignore[arg-type]

    r = render()
    args = dict(sender=policy.sender, to="Zoë Müller <c17850@example.com>", subject=r.subject, text=r.text,
                html=r.html, message_id=make_message_id("reminder:536365-3:7", "example.com"),
                reply_to=policy.reply_to, date=datetime(2026, 3, 2, 8, tzinfo=UTC),
                headers={"X-Oncebeat-Invoice": "536365-3", "X-Oncebeat-Stage": "7", "X-Oncebeat-Reminder": "1"})
    msg = build_message(**args)  # type: ignore[arg-type]
    frozen = message_bytes(msg)
    out = {"render": _cpu_per_call(render, n),
           "render (97 invoices in turn)": _cpu_per_call(render_varied, n),
           "build_message (EmailMessage)": _cpu_per_call(lambda: build_message(**args), n),  # type: ignore[arg-type]
           "message_bytes (serialise it)": _cpu_per_call(lambda: message_bytes(msg), n),
           "envelope of frozen bytes (Mailer.send)": _cpu_per_call(
               lambda: _envelope(message_from_bytes(frozen, policy=email_policy.default)), n)}
    direct = getattr(message, "build_message_bytes", None)
    if direct is not None:
        out["build_message_bytes (direct)"] = _cpu_per_call(lambda: direct(**args), n)
        frozen = direct(**args)
    reader = getattr(__import__("oncebeat.mail.smtp", fromlist=["x"]), "envelope_of_bytes", None)
    if reader is not None:
        out["envelope of frozen bytes (Mailer.send)"] = _cpu_per_call(lambda: reader(frozen), n)
    digest = __import__("oncebeat.reminders.notices.digest", fromlist=["x"])
    out["message facts (read back from the bytes)"] = _cpu_per_call(lambda: digest.message_facts(frozen), n)
    try:  # the builder's own facts since round 3c
        from oncebeat.mail.compose import compose_message  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        compose_message = None
    if compose_message is not None:
        composed = compose_message(**args)
        out["message facts (from the builder)"] = _cpu_per_call(lambda: digest.composed_facts(composed), n)
    try:  # the address check has its own module since round 3c
        from oncebeat.mail import addresses as where  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        where = message  # type: ignore[assignment,unused-ignore]
    check = getattr(where._address_problem, "__wrapped__", where._address_problem)  # without its cache
    out["address check (uncached)"] = _cpu_per_call(lambda: check("c17850@example.com"), n)
    out["message size (bytes)"] = float(len(frozen))
    return out


class StatementCount:
    """SQL round trips of this process on PostgreSQL, counted at psycopg (``Connection.execute``,
    ``Cursor.execute``/``executemany``) while in a ``with`` block: every statement sent (``BEGIN``, ``COMMIT``
    and ``ROLLBACK`` included; an ``executemany`` is one), the transactions (``BEGIN …``) and the statements
    run alone in autocommit outside one (the store's single-statement reads). Works against any checkout's
    store (it wraps psycopg, not oncebeat); the engine's own statements only, the sink has no database."""

    def __init__(self) -> None:
        self.statements = 0
        self.transactions = 0
        self.autocommit = 0
        self._open: set[int] = set()
        self._saved: list[tuple[Any, str, Any]] = []

    def _seen(self, conn: Any, sql: Any) -> None:
        text = sql if isinstance(sql, str) else sql.decode() if isinstance(sql, bytes) else ""  # sql.Composed: other
        head = text.lstrip()[:8].upper()
        self.statements += 1
        if head.startswith("BEGIN"):
            self.transactions += 1
            self._open.add(id(conn))
        elif head.startswith(("COMMIT", "ROLLBACK")):
            self._open.discard(id(conn))
        elif id(conn) not in self._open:
            self.autocommit += 1

    def __enter__(self) -> StatementCount:
        import psycopg

        count = self

        def wrap(cls: Any, name: str, conn_of: Callable[[Any], Any]) -> None:
            original = getattr(cls, name)

            def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
                count._seen(conn_of(self), query)
                return original(self, query, *args, **kwargs)

            self._saved.append((cls, name, original))
            setattr(cls, name, counted)

        wrap(psycopg.Cursor, "execute", lambda cur: cur.connection)  # Connection.execute calls Cursor.execute
        wrap(psycopg.Cursor, "executemany", lambda cur: cur.connection)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()

    def per(self, n: int) -> dict[str, float]:
        """Per reminder: ``statements``, ``transactions``, ``autocommit_statements``."""
        return {"statements": round(self.statements / n, 2), "transactions": round(self.transactions / n, 2),
                "autocommit_statements": round(self.autocommit / n, 2)}


def drain(backend: str, n: int, settings: Settings, *, profile: bool = False, concurrency: int = 1) -> dict[str, Any]:
    """CPU ms per reminder of this process sending ``n`` reminders (sink in its own process).

    ``profile``: run the drain under cProfile with a CPU-time timer and return the top functions
    (``profile`` key: cumulative and own CPU ms per reminder). ``concurrency`` > 1: ``Worker.run`` with that many
    handler slots and SMTP connections (as ``oncebeat worker --concurrency N``), stopped once ``n`` jobs
    completed, instead of the serial ``run_batch()`` loop; with an engine that has the group commit of done
    records (``effect.batch``), the sizes of its writes are counted too."""
    from bench import invoices
    from bench.w2_scan import BUSINESS_DATE
    from oncebeat.mail import Mailer
    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.reminders.tasks import build_app
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock
    from oncebeat.worker import Worker

    with FreshDb(backend, "sendcpu", settings) as db:
        invoices.load_overdue(db, n, BUSINESS_DATE)
        maildir = settings.tmp / f"maildir-sendcpu-{db.schema or 'sqlite'}"
        sink = start_children("mailsink", [{"maildir": str(maildir)}], logdir=settings.tmp / "logs")[0]
        sink.go()
        try:
            with open_store(db.url) as store:
                ReminderService(store, Policy(), clock=SystemClock()).scan(
                    occurrence_id=1, business_date=BUSINESS_DATE, source=current_source("worker"))
                mailer = Mailer(sink.ready_info["url"], connections=concurrency) if concurrency > 1 \
                    else Mailer(sink.ready_info["url"])
                service = ReminderService(store, Policy(), clock=SystemClock(), mailer=mailer)
                w = Worker(build_app(service), store, concurrency=concurrency, batch_size=100, lease_seconds=30.0)
                w.register()
                prof = cProfile.Profile(time.process_time) if profile else None
                counted = StatementCount()
                writes: list[int] = []
                finished: list[int] = []

                def on_finished(_: str, data: Any) -> None:
                    finished.append(1)
                    if len(finished) >= n:
                        w.request_stop()

                def on_batch(_: str, data: Any) -> None:
                    writes.append(len(data["keys"]))

                from oncebeat import telemetry
                if concurrency > 1:
                    telemetry.attach("job.finished", on_finished)
                    if "effect.batch" in telemetry.EVENTS:
                        telemetry.attach("effect.batch", on_batch)
                with counted if backend == "postgres" else nullcontext():
                    cpu, wall = time.process_time(), time.perf_counter()
                    if prof is not None:
                        prof.enable()
                    if concurrency > 1:
                        w.run(install_signals=False)
                    else:
                        while w.run_batch():
                            pass
                    if prof is not None:
                        prof.disable()
                        prof.dump_stats(str(settings.tmp / "send_cpu.prof"))
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                if concurrency > 1:
                    telemetry.detach("job.finished", on_finished)
                    if "effect.batch" in telemetry.EVENTS:
                        telemetry.detach("effect.batch", on_batch)
                else:
                    w.stop_process()
                mailer.close()
        finally:
            sink.stop()
            accepted = sink.finish()["accepted"]
        sent = int(db.query("SELECT count(*) FROM reminders WHERE state = 'sent'")[0][0])
    if sent != n or accepted != n:
        raise RuntimeError(f"send_cpu: {sent} sent, {accepted} accepted by the sink; expected {n}")
    out: dict[str, Any] = {"reminders": n, "concurrency": concurrency, "cpu_ms_per_reminder": cpu / n * 1e3,
                           "reminders_per_s_wall": n / wall}
    counts = getattr(service.renderer, "skeleton_counts", None)  # template parts filled from skeletons (round 3f)
    if counts is not None:
        out["render_skeletons"] = counts()
    if writes:
        out["done_writes"] = {"count": len(writes), "records_per_write": round(sum(writes) / len(writes), 2),
                              "largest": max(writes)}
    if backend == "postgres":
        out["sql_per_reminder"] = counted.per(n)
    if prof is not None:
        out["profile"] = _top(prof, n)
    return out


def _top(prof: cProfile.Profile, n: int, count: int = 30) -> list[tuple[str, float, float]]:
    """(function, cumulative CPU ms per reminder, own CPU ms per reminder), by cumulative time."""
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = []
    for (path, line, fn), (_cc, _nc, tt, ct, _callers) in stats.items():
        where = "/".join(path.split("/")[-2:])
        rows.append((f"{fn} ({where}:{line})", ct / n * 1e3, tt / n * 1e3))
    rows.sort(key=lambda r: -r[1])
    return [(f, round(c, 3), round(t, 3)) for f, c, t in rows[:count]]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.send_cpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="reminders sent in the drain (default 1,000; 0 = steps only)")
    p.add_argument("--backend", default="postgres", choices=("postgres", "sqlite"))
    p.add_argument("--concurrency", type=int, default=1, help="handler slots (and SMTP connections) of the drain's "
                   "worker: 1 (default) = the serial run_batch() loop; N > 1 = Worker.run with N slots")
    p.add_argument("--reps", type=int, default=3, help="drains (default 3; median reported with all values)")
    p.add_argument("--profile", action="store_true", help="one more drain under cProfile (CPU timer): top functions "
                   "(the whole profile: send_cpu.prof in the run's temporary folder)")
    a = p.parse_args(argv)
    settings = Settings.make(reps=a.reps, quick=False)
    out: dict[str, Any] = {"engine": engine_version(), "steps_cpu_us": steps()}
    import oncebeat

    out["oncebeat_from"] = oncebeat.__file__
    if a.n:
        runs = [drain(a.backend, a.n, settings, concurrency=a.concurrency) for _ in range(a.reps)]
        vals = sorted(r["cpu_ms_per_reminder"] for r in runs)
        out["drain"] = {"backend": a.backend, "runs": runs, "cpu_ms_per_reminder_median": vals[len(vals) // 2]}
        if a.profile:
            out["profile"] = drain(a.backend, a.n, settings, profile=True)["profile"]
    write_json("send_cpu", out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
