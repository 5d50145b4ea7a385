"""Child processes of the benchmark: ``python -m bench.proc ROLE 'JSON-SPEC'``.

Protocol (see :class:`bench.common.Child`): print ``{"event": "ready"}`` once
imports are done and connections are open; wait for ``go`` on stdin; work; stop
on ``stop`` (burst workers stop by themselves when their queue is empty); print
``{"event": "done", …}`` with CPU seconds and peak RSS.

Roles:

- ``oncebeat-worker`` — :class:`oncebeat.worker.Worker` on a no-op task, either
  ``Worker.run(install_signals=False)`` (``mode: run``, what ``oncebeat worker``
  does) or a loop over ``run_batch()`` (``mode: loop``).
- ``reminders-worker`` — the reminder app's worker (render, effect, SMTP) as
  ``oncebeat worker`` builds it.
- ``raw-pg`` / ``raw-sqlite`` — hand-written claim loops (the baseline).
- ``procrastinate`` / ``rq`` — peer workers in burst mode.
- ``pgqueuer`` — ``PgQueuer(AsyncpgDriver(conn)).run(batch_size=…)`` until ``stop``.
- ``dbos`` — a launched DBOS executor (unique ``executor_id``) polling the
  benchmark's queue until ``stop``; it polls as soon as it is launched, so the
  benchmark holds it at a table lock until every worker is ready.
- ``clock`` — :class:`oncebeat.clock.ClockProcess` over many schedules.
- ``mailsink`` — :class:`oncebeat.mail.MailSink` in its own process.
- ``discardsink`` — an aiosmtpd server that accepts and discards (no Maildir).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from bench import probe


class Control:
    """Reads ``go`` / ``stop`` from stdin in a thread; prints ready/done lines."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.stop = threading.Event()
        self._on_stop: list[Callable[[], None]] = []
        threading.Thread(target=self._read, name="bench-control", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "go":
                self.go.set()
            elif word == "stop":
                self.stop.set()
                for fn in self._on_stop:
                    fn()
        self.go.set()  # parent gone: let the main thread finish
        self.stop.set()
        for fn in self._on_stop:
            fn()

    def on_stop(self, fn: Callable[[], None]) -> None:
        self._on_stop.append(fn)
        if self.stop.is_set():
            fn()

    @staticmethod
    def emit(event: str, **info: Any) -> None:
        print(json.dumps({"event": event, "pid": os.getpid(), **info}, default=str), flush=True)

    def ready(self, **info: Any) -> None:
        self.emit("ready", rss_kb=rss_kb(), **info)
        self.go.wait()
        self.cpu_go = cpu_now()
        self.t_go = time.monotonic()

    def done(self, **info: Any) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        work = {"work_cpu": cpu_now() - self.cpu_go, "work_wall": time.monotonic() - self.t_go} \
            if hasattr(self, "cpu_go") else {}
        self.emit("done", cpu_user=ru.ru_utime, cpu_sys=ru.ru_stime, maxrss_kb=hwm_kb(), rss_kb=rss_kb(),
                  **work, **info)


def hwm_kb() -> int:
    """Peak RSS of this process image (``VmHWM``). Not ``ru_maxrss``: Linux carries that over ``execve``
    from the forking parent, so a child would report the benchmark's own peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def cpu_now() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------- oncebeat


def oncebeat_worker(spec: dict[str, Any], ctl: Control) -> None:
    from oncebeat import App
    from oncebeat.store import open_store
    from oncebeat.worker import Worker

    store = open_store(spec["url"])
    app = App()

    @app.task()
    def noop(ctx: Any) -> None:
        probe.hit()

    w = Worker(app, store, concurrency=spec.get("concurrency", 1), batch_size=spec.get("batch_size", 100),
               lease_seconds=spec.get("lease_seconds", 30.0), poll_interval=spec.get("poll_interval", 1.0))
    w.register()
    ctl.ready()
    ctl.on_stop(w.request_stop)
    if spec.get("mode", "run") == "run":
        w.run(install_signals=False)
    else:
        while not ctl.stop.is_set():
            if not w.run_batch():
                ctl.stop.wait(0.01)
        w.stop_process()
    ctl.done(processed=w.processed)
    store.close()


def reminders_worker(spec: dict[str, Any], ctl: Control) -> None:
    from oncebeat.mail import Mailer
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.reminders.tasks import build_app
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock
    from oncebeat.worker import Worker

    store = open_store(spec["url"])
    try:  # one SMTP connection per handler slot (an engine before Mailer(connections=) has one)
        mailer = Mailer(spec["smtp_url"], connections=spec.get("concurrency", 1))
    except TypeError:
        mailer = Mailer(spec["smtp_url"])
    service = ReminderService(store, Policy(), clock=SystemClock(), mailer=mailer)
    app = build_app(service)
    w = Worker(app, store, concurrency=spec.get("concurrency", 1), batch_size=spec.get("batch_size", 100),
               lease_seconds=30.0)
    w.register()
    from oncebeat import telemetry
    writes: list[int] = []  # records per write of the group commit of done records (engines that have it)
    if "effect.batch" in telemetry.EVENTS:
        telemetry.attach("effect.batch", lambda _, data: writes.append(len(data["keys"])))
    ctl.ready()
    ctl.on_stop(w.request_stop)
    w.run(install_signals=False)
    ctl.done(processed=w.processed, done_writes=len(writes), done_records=sum(writes),
             done_largest_write=max(writes, default=0))
    mailer.close()
    store.close()


def clock(spec: dict[str, Any], ctl: Control) -> None:
    from bench.common import pg_backend_cpu, pg_backend_pids
    from oncebeat.app import ScheduleDef
    from oncebeat.clock import ClockProcess
    from oncebeat.store import open_store

    store = open_store(spec["url"])
    zones: list[str] = spec["zones"]
    n = spec["schedules"]
    defs = []
    for i in range(n):
        expr = "*/1 * * * *" if spec["mode"] == "burst" else f"{i % 60} * * * *"
        defs.append(ScheduleDef(key=f"s{i:05d}", expression=expr, tz=zones[i % len(zones)], task="noop"))
    timing: dict[str, Any] = {}
    bursts: list[dict[str, Any]] = []  # per tick with >= 100 schedules due: its wall and CPU time (clock, server)
    pids: list[int] = []

    class TimedClock(ClockProcess):
        """The real clock; start() is timed (run() calls it once, then ticks), and each burst's fire."""

        def start(self) -> Any:
            cpu0, t0 = cpu_now(), time.monotonic()
            fires = super().start()
            timing.update(startup_seconds=time.monotonic() - t0, startup_cpu=cpu_now() - cpu0, cpu1=cpu_now(),
                          t1=time.monotonic(), rss_after_start_kb=rss_kb())
            if store.backend == "postgres":
                pids[:] = pg_backend_pids(store)
            ctl.emit("started", startup_seconds=timing["startup_seconds"])
            return fires

        def _fire_due(self, due: list[str], now: Any, horizon: Any, *, startup: bool) -> Any:
            if len(due) < 100 or not pids:
                return super()._fire_due(due, now, horizon, startup=startup)
            pg0, cpu0, t0 = pg_backend_cpu(pids), cpu_now(), time.monotonic()
            try:
                return super()._fire_due(due, now, horizon, startup=startup)
            finally:  # read /proc only: no round trip inside what W4's poller times
                bursts.append({"due": len(due), "wall": time.monotonic() - t0, "cpu": cpu_now() - cpu0,
                               "pg_cpu": pg_backend_cpu(pids) - pg0, "load": os.getloadavg()[0]})
                pids[:] = pg_backend_pids(store)

    clk = TimedClock(defs, store, tick_interval=1.0)
    ctl.ready()
    ctl.on_stop(clk.request_stop)
    clk.run(install_signals=False, stop_after=spec["seconds"])
    ctl.done(startup_seconds=timing.get("startup_seconds"), startup_cpu=timing.get("startup_cpu"),
             window_cpu=cpu_now() - timing.get("cpu1", 0.0), window_wall=time.monotonic() - timing.get("t1", 0.0),
             fires=clk.fires, rss_after_start_kb=timing.get("rss_after_start_kb"), bursts=bursts)
    store.close()


def mailsink(spec: dict[str, Any], ctl: Control) -> None:
    from oncebeat.mail import MailSink

    sink = MailSink(spec["maildir"]).start()
    ctl.emit("ready", url=sink.url)
    ctl.go.wait()
    ctl.stop.wait()
    c = sink.counters()
    sink.stop()
    ctl.done(accepted=c.accepted, rejected=c.rejected, connections=c.connections)


def discardsink(spec: dict[str, Any], ctl: Control) -> None:
    """An aiosmtpd server that accepts every message and keeps nothing (W3's sink need not be the ceiling).

    Same SMTP dialogue as :class:`oncebeat.mail.MailSink` (EHLO, SMTPUTF8, 8BITMIME, PIPELINING) without
    writing a Maildir; counts messages and connections.
    """
    import socket

    from aiosmtpd.controller import Controller

    class Discard:
        accepted = 0
        connections = 0

        async def handle_EHLO(self, server: Any, session: Any, envelope: Any, hostname: str,
                              responses: list[str]) -> list[str]:
            Discard.connections += 1
            session.host_name = hostname
            responses.insert(len(responses) - 1, "250-PIPELINING")  # as Postfix does (RFC 2920)
            return responses

        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            Discard.accepted += 1
            return "250 OK discarded"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    controller = Controller(Discard(), hostname="127.0.0.1", port=port, enable_SMTPUTF8=True)
    controller.start()
    ctl.emit("ready", url=f"smtp://127.0.0.1:{port}")
    ctl.go.wait()
    cpu0 = cpu_now()
    ctl.stop.wait()
    controller.stop()
    ctl.done(accepted=Discard.accepted, rejected=0, connections=Discard.connections, sink_cpu=cpu_now() - cpu0)


# --------------------------------------------------------------------------- raw loops


def raw_pg(spec: dict[str, Any], ctl: Control) -> None:
    import psycopg

    conn = psycopg.connect(spec["conninfo"], options=f"-c search_path={spec['schema']}")
    batch = spec["batch"]
    claim = ("SELECT id, args FROM rawjobs WHERE state = 'available' AND queue = 'default' "
             "ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED")
    done_one = "UPDATE rawjobs SET state = 'done', finished_at = now() WHERE id = %s"
    done_many = "UPDATE rawjobs SET state = 'done', finished_at = now() WHERE id = ANY(%s)"
    conn.execute("SELECT 1")
    conn.commit()
    ctl.ready()
    first: float | None = None
    last: float | None = None
    n = 0
    while not ctl.stop.is_set():
        t = time.monotonic()
        rows = conn.execute(claim, (batch,)).fetchall()
        if not rows:
            conn.commit()
            ctl.stop.wait(0.005)
            continue
        for _id, _args in rows:
            probe.hit()
        if batch == 1:
            conn.execute(done_one, (rows[0][0],))
        else:
            conn.execute(done_many, ([r[0] for r in rows],))
        conn.commit()
        last = time.monotonic()
        if first is None:
            first = t
        n += len(rows)
    ctl.done(processed=n, first=first, last=last)
    conn.close()


def raw_sqlite(spec: dict[str, Any], ctl: Control) -> None:
    import sqlite3

    conn = sqlite3.connect(spec["path"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    batch = spec["batch"]
    claim = ("SELECT id, args FROM rawjobs WHERE state = 'available' AND queue = 'default' "
             "ORDER BY run_at, id LIMIT ?")
    ctl.ready()
    first: float | None = None
    last: float | None = None
    n = 0
    while not ctl.stop.is_set():
        t = time.monotonic()
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(claim, (batch,)).fetchall()
        if not rows:
            conn.execute("COMMIT")
            ctl.stop.wait(0.005)
            continue
        for _id, _args in rows:
            probe.hit()
        conn.executemany("UPDATE rawjobs SET state = 'done', finished_at = strftime('%Y-%m-%dT%H:%M:%f','now') "
                         "WHERE id = ?", [(r[0],) for r in rows])
        conn.execute("COMMIT")
        last = time.monotonic()
        if first is None:
            first = t
        n += len(rows)
    ctl.done(processed=n, first=first, last=last)
    conn.close()


# --------------------------------------------------------------------------- peers


def procrastinate_worker(spec: dict[str, Any], ctl: Control) -> None:
    from bench.peers import PROCRASTINATE_QUEUE, procrastinate_app

    app = procrastinate_app(spec["conninfo"], spec["schema"])
    ctl.ready()
    app.run_worker(queues=[PROCRASTINATE_QUEUE], wait=False, concurrency=spec.get("concurrency", 1),
                   install_signal_handlers=False, delete_jobs="never")
    ctl.done()


def rq_worker(spec: dict[str, Any], ctl: Control) -> None:
    import redis
    from rq import Queue, SimpleWorker

    from bench.peers import RQ_QUEUE

    r = redis.Redis.from_url(spec["redis_url"])
    r.ping()
    w = SimpleWorker([Queue(RQ_QUEUE, connection=r)], connection=r)
    ctl.ready()
    w.work(burst=True, logging_level="WARNING")
    ctl.done()


def pgqueuer_worker(spec: dict[str, Any], ctl: Control) -> None:
    import asyncio
    from datetime import timedelta

    import asyncpg

    from bench.peers import pgqueuer_app

    async def main() -> None:
        conn = await asyncpg.connect(spec["conninfo"])
        pgq = pgqueuer_app(conn)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, ctl.ready)  # the go gate; nothing polls before run()
        ctl.on_stop(lambda: loop.call_soon_threadsafe(pgq.shutdown.set))
        kwargs = {"batch_size": spec["batch_size"]} if spec.get("batch_size") else {}
        await pgq.run(dequeue_timeout=timedelta(seconds=spec.get("dequeue_timeout", 30)), **kwargs)
        if not conn.is_closed():
            await conn.close()

    asyncio.run(main())
    ctl.done()


def dbos_worker(spec: dict[str, Any], ctl: Control) -> None:
    from dbos import DBOS

    from bench.peers import DBOS_APP, DBOS_VERSION, dbos_define

    dbos_define()
    DBOS(config={"name": DBOS_APP, "system_database_url": spec["url"], "executor_id": f"bench-{os.getpid()}",
                 "application_version": DBOS_VERSION, "run_migrations": False, "log_level": "WARNING"})
    DBOS.launch()
    ctl.ready()
    ctl.stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    ctl.done()


ROLES: dict[str, Callable[[dict[str, Any], Control], None]] = {
    "oncebeat-worker": oncebeat_worker,
    "reminders-worker": reminders_worker,
    "clock": clock,
    "mailsink": mailsink,
    "discardsink": discardsink,
    "raw-pg": raw_pg,
    "raw-sqlite": raw_sqlite,
    "procrastinate": procrastinate_worker,
    "rq": rq_worker,
    "pgqueuer": pgqueuer_worker,
    "dbos": dbos_worker,
}


def main() -> None:
    role, spec = sys.argv[1], json.loads(sys.argv[2])
    ctl = Control()
    ROLES[role](spec, ctl)


if __name__ == "__main__":
    main()
