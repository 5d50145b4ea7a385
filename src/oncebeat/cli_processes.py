"""``oncebeat clock``, ``worker``, ``run``, ``web`` and ``tick``: the processes of a deployment.

Entry points only: parse, open the runtime, start :class:`~oncebeat.clock.ClockProcess`,
:class:`~oncebeat.worker.Worker`, both (:func:`oncebeat.deploy.run_together`), the dashboard (uvicorn), or fire
what is due once (``tick``), and print. ``--metrics-port`` serves a process's Prometheus metrics while it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .cli_common import (
    APP_OPTION,
    CONFIG_OPTION,
    DB_OPTION,
    SECONDS_NONNEGATIVE,
    SECONDS_POSITIVE,
    TIME_SOURCE_OPTION,
    _parse_instant,
    _printable,
    _runtime,
    _traces,
    _utc,
)


# --- processes -----------------------------------------------------------------------------------
def _metrics_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--metrics-host", default="127.0.0.1", show_default=True,
                      help="Address of the --metrics-port listener.")(fn)
    return click.option("--metrics-port", default=None, type=click.IntRange(1, 65535),
                        help="Serve this process's Prometheus metrics (/metrics) on this port; with "
                             "PROMETHEUS_MULTIPROC_DIR set, the processes of one host share their counts.")(fn)


@contextmanager
def _serving_metrics(port: int | None, host: str) -> Iterator[None]:
    """Serve process metrics while the block runs (no-op without a port)."""
    if port is None:
        yield
        return
    from .metrics import mark_process_dead, serve_metrics

    try:
        server = serve_metrics(port, host=host)
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint="--metrics-port") from exc
    try:
        yield
    finally:
        server.shutdown()
        mark_process_dead()


@click.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@TIME_SOURCE_OPTION
@click.option("--misfire-grace", default=60.0, show_default=True,
              help="Seconds the newest due instant may be late and still on time "
                   "(older ones follow the catch-up policy).")
@_metrics_options
def clock(database_url: str | None, config: Path | None, app: str | None, time_source: str,
          misfire_grace: float, metrics_port: int | None, metrics_host: str) -> None:
    """Run the clock process: turns schedules into occurrences and jobs, exactly once each."""
    from .clock import ClockProcess
    from .dbtime import time_source_clock

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        _traces("clock", rt.store)
        with _serving_metrics(metrics_port, metrics_host):
            ClockProcess(rt.app, rt.store, clock=time_source_clock(rt.store, time_source),
                         misfire_grace=misfire_grace, echo=click.echo).run()
    finally:
        rt.close()


def _worker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--concurrency", "-c", default=4, show_default=True, type=click.IntRange(1, 256)),
        click.option("--queue", "queues", multiple=True, default=["default"], show_default=True),
        click.option("--batch-size", default=None, type=click.IntRange(1, 10000),
                     help="Jobs claimed per statement (default 10 per slot; on SQLite up to twice that "
                          "while another process's writes queue with this worker's)."),
        click.option("--lease", default=30.0, show_default=True, type=SECONDS_POSITIVE,
                     help="Lease seconds, renewed by heartbeat."),
        click.option("--grace", default=25.0, show_default=True, type=SECONDS_NONNEGATIVE,
                     help="Seconds running jobs get after SIGTERM."),
        click.option("--rescue-interval", default=15.0, show_default=True, type=SECONDS_POSITIVE,
                     help="Seconds between looks for jobs whose worker died (lease expired)."),
    ]):
        fn = option(fn)
    return fn


@click.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@_worker_options
@_metrics_options
@TIME_SOURCE_OPTION
@click.option("--burst", is_flag=True,
              help="Process the jobs due now (one at a time), then exit 0 with a summary: for cron and CI.")
@click.option("--wait-for-leases", default=0.0, type=SECONDS_NONNEGATIVE, metavar="SECONDS",
              help="With --burst: wait up to SECONDS for jobs under another worker's lease to become claimable "
                   "(a killed worker's jobs are rescued when their lease ends) instead of leaving them.")
def worker(database_url: str | None, config: Path | None, app: str | None, concurrency: int, queues: tuple[str, ...],
           batch_size: int | None, lease: float, grace: float, rescue_interval: float, metrics_port: int | None,
           metrics_host: str, time_source: str, burst: bool, wait_for_leases: float) -> None:
    """Run a worker: claims jobs with a lease and runs them; SIGTERM drains gracefully."""
    from .dbtime import time_source_clock
    from .logconfig import attach_job_lines
    from .worker import Worker

    attach_job_lines()  # one INFO line per job start and finish
    if wait_for_leases and not burst:
        raise click.UsageError("--wait-for-leases goes with --burst (a running worker rescues and takes those jobs "
                               "by itself)")
    rt = _runtime(config=config, database_url=database_url, app=app, need_smtp=app is None,
                  smtp_connections=concurrency)  # one SMTP connection per handler slot
    try:
        _traces("worker", rt.store)
        clock = time_source_clock(rt.store, time_source)
        _warn_about_skew(rt.store, time_source)
        with _serving_metrics(metrics_port, metrics_host):
            wrk = Worker(rt.app, rt.store, clock=clock, queues=queues, concurrency=concurrency, batch_size=batch_size,
                         lease_seconds=lease, grace_seconds=grace, rescue_interval=rescue_interval)
            if burst:
                done = wrk.burst(wait_for_leases=wait_for_leases)
                click.echo("burst done: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in done.items()
                                                      if n or k not in ("other", "snoozed"))
                           + _left_text(wrk.left), err=True)
                return
            counts = wrk.run()
    finally:
        rt.close()
    click.echo(f"worker stopped: {counts['processed']} jobs processed, {counts['returned']} returned to the queue",
               err=True)


def _warn_about_skew(store: Any, time_source: str) -> None:
    """On PostgreSQL with host time: warn when this host's clock is more than a second from the database's.

    Leases are judged by the clock of whoever looks at them: a worker whose clock runs ahead rescues live jobs
    early (their bodies then run twice), one that runs behind renews leases past their end.
    """
    from .dbtime import SKEW_WARNING_SECONDS, host_skew

    if time_source != "host":
        return
    skew = host_skew(store)
    if skew is not None and abs(skew) > SKEW_WARNING_SECONDS:
        click.echo(f"warning: this host's clock is {abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} the "
                   "database's; leases (expiry, heartbeat, rescue) are judged by this host's clock, so a skew "
                   "rescues live jobs or keeps dead ones: fix the host's time (NTP) or run with "
                   "--time-source database (ONCEBEAT_TIME_SOURCE=database)", err=True)


def _left_text(left: Any) -> str:
    """``; left: …`` for a burst's summary: jobs it could not take, with when they can run (UTC)."""
    parts = []
    if left.leased:
        parts.append(f"{left.leased} running under another worker's lease (until {_utc(left.leased_until)} at the "
                     "latest; --wait-for-leases SECONDS waits for them)")
    if left.later:
        parts.append(f"{left.later} due later (the first at {_utc(left.later_from)})")
    for h in left.held:
        resume = f"oncebeat {'queues' if h.kind == 'queue' else 'schedules'} resume {h.name}"
        parts.append(f"{h.n} held: {_printable(h.describe())}"
                     + (f" (queue {_printable(h.queue)})" if h.kind == "schedule" else "")
                     + f"; `{_printable(resume)}` releases them")
    return "; left: " + ", ".join(parts) if parts else "; nothing left that is due"


@click.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@_worker_options
@TIME_SOURCE_OPTION
@_metrics_options
def run(database_url: str | None, config: Path | None, app: str | None, concurrency: int, queues: tuple[str, ...],
        batch_size: int | None, lease: float, grace: float, rescue_interval: float, time_source: str,
        metrics_port: int | None, metrics_host: str) -> None:
    """Run the clock and a worker in one process (small deployments)."""
    from .dbtime import time_source_clock
    from .deploy import run_together
    from .logconfig import attach_job_lines

    attach_job_lines()  # one INFO line per job start and finish

    rt = _runtime(config=config, database_url=database_url, app=app, need_smtp=app is None,
                  smtp_connections=concurrency)  # one SMTP connection per handler slot
    try:
        _traces("run", rt.store)
        _warn_about_skew(rt.store, time_source)
        with _serving_metrics(metrics_port, metrics_host):
            run_together(rt.app, rt.store, clock=time_source_clock(rt.store, time_source), concurrency=concurrency,
                         queues=queues, echo=click.echo,
                         worker_options={"batch_size": batch_size, "lease_seconds": lease, "grace_seconds": grace,
                                         "rescue_interval": rescue_interval})
    finally:
        rt.close()


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but a loopback address exposes the dashboard to the network and "
                   "needs ONCEBEAT_WEB_TOKEN.")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default $PORT, else 8000).")
@click.option("--allowed-host", "allowed_host", multiple=True, metavar="NAME",
              help="A Host name the dashboard answers besides 127.0.0.1, localhost and [::1] (repeat it; "
                   "*.example.com for subdomains); also ONCEBEAT_WEB_ALLOWED_HOSTS, comma-separated.")
@click.option("--secure-cookies", is_flag=True, help="Mark cookies Secure (when served over HTTPS, e.g. behind TLS).")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def web(host: str, port: int | None, allowed_host: tuple[str, ...], secure_cookies: bool, database_url: str | None,
        config: Path | None, app: str | None) -> None:
    """Serve the operator dashboard and /metrics. Every page needs a login.

    ONCEBEAT_WEB_TOKEN logs in the admin (every action), ONCEBEAT_WEB_VIEWER_TOKEN a read-only viewer. /metrics
    needs ``Authorization: Bearer $ONCEBEAT_METRICS_TOKEN``, or without that variable answers loopback clients
    only. The HTTP API (/api/v1, JSON) takes the bearer tokens of ONCEBEAT_API_TOKENS
    (``NAME:read|write:TOKEN``, comma-separated). A non-loopback --host without a token is refused (exit 2).
    Stripe webhooks: POST /webhooks/stripe, verified with STRIPE_WEBHOOK_SECRET (400 when forged, 413 past 1 MiB,
    503 when unset).
    """
    import os

    import uvicorn

    from .web import WebSettings, create_app
    from .web.api_auth import ApiTokens
    from .web.security import allowed_hosts, is_loopback

    token = os.environ.get("ONCEBEAT_WEB_TOKEN") or None
    viewer = os.environ.get("ONCEBEAT_WEB_VIEWER_TOKEN") or None
    metrics_token = os.environ.get("ONCEBEAT_METRICS_TOKEN") or None
    api_tokens = os.environ.get("ONCEBEAT_API_TOKENS") or None
    extra = (*allowed_host, *(os.environ.get("ONCEBEAT_WEB_ALLOWED_HOSTS") or "").split(","))
    public = not is_loopback(host)
    if public and not (token or viewer or api_tokens):
        click.echo(f"error: --host {host} exposes the dashboard to the network, and no token is set: set "
                   "ONCEBEAT_WEB_TOKEN (and optionally ONCEBEAT_WEB_VIEWER_TOKEN for read-only logins) or "
                   "ONCEBEAT_API_TOKENS, or bind 127.0.0.1", err=True)
        sys.exit(2)
    if public and host not in ("0.0.0.0", "::", ""):
        extra = (*extra, host)  # the bound address itself is a name clients use (an IP: no DNS to rebind)
    hosts = allowed_hosts(extra)  # ConfigError (exit 2) names a malformed entry
    application = create_app(WebSettings(database_url=database_url, config=config, app=app, token=token,
                                         viewer_token=viewer, metrics_token=metrics_token, api_tokens=api_tokens,
                                         allowed_hosts=tuple(extra), secure_cookies=secure_cookies))
    port = port or int(os.environ.get("PORT") or 8000)
    logins = ", ".join(name for name, value in (("admin", token), ("viewer", viewer)) if value) or (
        "none: every page asks for ONCEBEAT_WEB_TOKEN")
    metrics = "bearer ONCEBEAT_METRICS_TOKEN" if metrics_token else "loopback clients only"
    api = ", ".join(ApiTokens(api_tokens).names()) or "off (set ONCEBEAT_API_TOKENS)"
    click.echo(f"oncebeat web on http://{host}:{port}/ - logins: {logins}; Host names: {', '.join(hosts)}; "
               f"/metrics: {metrics}; /api/v1 tokens: {api}", err=True)
    if public and hosts == allowed_hosts():
        click.echo("note: only loopback Host names are answered; add --allowed-host NAME (or "
                   "ONCEBEAT_WEB_ALLOWED_HOSTS) for the name browsers use", err=True)
    uvicorn.run(application, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False,
                access_log=False)


@click.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@TIME_SOURCE_OPTION
@click.option("--at", "at_text", default=None, metavar="ISO",
              help="The instant your external scheduler names (e.g. an EventBridge event's time), with offset: "
                   "occurrences are due up to it, so a duplicate or early delivery never runs anything twice.")
@click.option("--misfire-grace", default=3600.0, show_default=True,
              help="Seconds the newest due instant may be late and still on time; at least your scheduler's interval.")
def tick(database_url: str | None, config: Path | None, app: str | None, time_source: str, at_text: str | None,
         misfire_grace: float) -> None:
    """Fire every occurrence due now (ledger + catch-up policy), then exit 0; for cron, PaaS schedulers, CronJobs.

    Safe to run late, twice or concurrently: each occurrence still runs once.
    """
    from .clock import ClockProcess
    from .dbtime import time_source_clock

    at = _parse_instant(at_text, "--at") if at_text else None
    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        fires = ClockProcess(rt.app, rt.store, clock=time_source_clock(rt.store, time_source),
                             misfire_grace=misfire_grace, echo=click.echo).tick_once(at=at)
    finally:
        rt.close()
    counts: dict[str, int] = {}
    for f in fires:
        label = f.outcome if f.inserted else "already recorded by another process"
        counts[label] = counts.get(label, 0) + 1
    click.echo("tick: " + (", ".join(f"{n} {label}" for label, n in sorted(counts.items())) or "nothing was due"))
