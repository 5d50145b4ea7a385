"""``oncebeat hold``, ``release`` and ``holds``: an operator's holds on reminders (README "Holds").

Entry points only: parse, call :mod:`oncebeat.reminders.holds`, print. Every hold placed or released is audited
with the operator (``reminders.hold_placed`` / ``reminders.hold_released``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click

Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def register(group: click.Group, cli_module: ModuleType) -> None:
    """Add ``hold``, ``release`` and ``holds`` to the ``oncebeat`` command group; ``h`` is :mod:`oncebeat.cli_common`
    (the shared options and helpers: ``DB_OPTION``, ``CONFIG_OPTION``, ``_runtime``, ``_operator``, ``_parse_date``,
    ``_print_json``), passed in by :mod:`oncebeat.cli`."""
    db_option: Decorator = cli_module.DB_OPTION
    config_option: Decorator = cli_module.CONFIG_OPTION
    h: Any = cli_module

    @click.command(name="hold")
    @click.option("--invoice", default=None, metavar="NUMBER", help="Hold the reminders of this invoice.")
    @click.option("--customer", default=None, metavar="EMAIL", help="Hold the reminders of every invoice of this "
                  "customer.")
    @click.option("--reason", required=True, metavar="dispute|promise|manual",
                  help="dispute, promise (to pay, needs --until) or manual.")
    @click.option("--until", default=None, metavar="YYYY-MM-DD",
                  help="promise: the last day of the promise; unpaid, reminders resume the next business day.")
    @click.option("--note", default=None, help="Why, in a few words (kept with the hold and in the audit trail).")
    @click.option("--json", "as_json", is_flag=True)
    @db_option
    @config_option
    def hold_command(invoice: str | None, customer: str | None, reason: str, until: str | None, note: str | None,
                     as_json: bool, database_url: str | None, config: Path | None) -> None:
        """Place a hold: no reminder goes out for the invoice (or the customer's invoices) while it holds; each stage
        that comes due meanwhile is recorded held. Prints the hold's id (for `oncebeat release ID`)."""
        from .reminders.holds import place_hold  # here: `oncebeat --app` never loads the reminder app

        day = h._parse_date(until, "--until")
        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            held = place_hold(rt.store, clock=rt.clock, zone=rt.policy.zone, source=h._operator(), reason=reason,
                              invoice=invoice, customer=customer, until=day, note=note,
                              calendar=rt.policy.calendar)
        finally:
            rt.close()
        assert held is not None  # no external_ref: never refused as a replay
        if as_json:
            h._print_json(held.as_dict())
            return
        ends = (f"until {held.promise_until.isoformat()} (resumes {held.resumes_on.isoformat()} if unpaid)"
                if held.promise_until and held.resumes_on else "until released")
        click.echo(f"hold {held.id} placed on {held.target}: {reason}, {ends}")


    @click.command(name="release")
    @click.argument("hold_id", required=False, type=click.IntRange(1, 10**18 - 1))
    @click.option("--invoice", default=None, metavar="NUMBER", help="Release every hold on this invoice.")
    @click.option("--customer", default=None, metavar="EMAIL", help="Release every hold on this customer.")
    @click.option("--note", default=None, help="Why (kept with the hold and in the audit trail).")
    @click.option("--json", "as_json", is_flag=True)
    @db_option
    @config_option
    def release_command(hold_id: int | None, invoice: str | None, customer: str | None, note: str | None,
                        as_json: bool, database_url: str | None, config: Path | None) -> None:
        """Release a hold (HOLD_ID), or every hold on --invoice or --customer. Reminders resume the next business day
        with the next due stage only."""
        from .reminders.holds import release_holds

        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            released = release_holds(rt.store, clock=rt.clock, zone=rt.policy.zone, source=h._operator(),
                                     hold_id=hold_id, invoice=invoice, customer=customer, note=note,
                                     calendar=rt.policy.calendar)
        finally:
            rt.close()
        if as_json:
            h._print_json([one.as_dict() for one in released])
            return
        if not released:
            click.echo("nothing to release: no unreleased hold matches")
        for one in released:
            resumes = one.resumes_on.isoformat() if one.resumes_on else "?"
            click.echo(f"hold {one.id} on {one.target} released; reminders resume on {resumes}")


    @click.command(name="holds")
    @click.option("--active", is_flag=True, help="Only the holds that cover today (in the policy's zone; one "
                  "released today still does: reminders resume tomorrow).")
    @click.option("--json", "as_json", is_flag=True)
    @db_option
    @config_option
    def holds_command(active: bool, as_json: bool, database_url: str | None, config: Path | None) -> None:
        """List holds, oldest first: id, invoice or customer, reason, who placed it, state."""
        from .reminders.holds import describe, list_holds

        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            today = rt.clock.now().astimezone(rt.policy.zone).date()
            holds = list_holds(rt.store, active_on=today if active else None)
        finally:
            rt.close()
        if as_json:
            h._print_json([one.as_dict() for one in holds])
            return
        if not holds:
            click.echo("no holds")
        for line in describe(holds):
            click.echo(line)

    for command in (hold_command, release_command, holds_command):
        group.add_command(command)
