"""``oncebeat policies`` and ``oncebeat policies apply``: the ladders and the invoices pinned to them (README
"Several ladders").

Entry points only: parse, call :mod:`oncebeat.reminders.pinning`, print. Moving open invoices to a ladder's new
version is explicit (``--apply-to-open``) and audited (``ladders.applied``) with the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click

Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def register(group: click.Group, cli_module: ModuleType) -> None:
    """Add ``policies`` (and ``policies apply``) to the ``oncebeat`` group; ``cli_module`` gives the shared
    options and helpers (``DB_OPTION``, ``CONFIG_OPTION``, ``_runtime``, ``_operator``, ``_print_json``)."""
    db_option: Decorator = cli_module.DB_OPTION
    config_option: Decorator = cli_module.CONFIG_OPTION
    h: Any = cli_module

    @click.group(name="policies", invoke_without_command=True)
    @click.option("--ladder", default=None, metavar="NAME", help="List the invoices pinned to this ladder (open "
                  "first), with the version each is on.")
    @click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 1_000_000),
                  help="With --ladder: at most this many invoices.")
    @click.option("--json", "as_json", is_flag=True)
    @db_option
    @config_option
    @click.pass_context
    def policies_command(ctx: click.Context, ladder: str | None, limit: int, as_json: bool,
                         database_url: str | None, config: Path | None) -> None:
        """The ladders of the policy file in matching order (rule, stages, spacing) and, per recorded version, how
        many invoices it holds (open ones are still in dunning on it). `policies apply` moves open invoices to a
        ladder's new version."""
        if ctx.invoked_subcommand is not None:
            return
        from .reminders.ladder_calendars import describe_days
        from .reminders.ladders import ladders_of
        from .reminders.pinning import holdings, ladder_invoices

        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            held = holdings(rt.store, rt.policy)
            pinned = ladder_invoices(rt.store, ladder, limit=limit) if ladder else None
        finally:
            rt.close()
        ladders = ladders_of(rt.policy)
        names = [s.name for s, _ in ladders]
        if ladder is not None and ladder not in names and not any(x.name == ladder for x in held):
            raise click.UsageError(f"no ladder named {ladder!r}; ladders: {', '.join(names)}")
        if as_json:
            h._print_json({"ladders": [{"name": s.name, "match": rule.describe() if rule else "everything else",
                                        **s.to_json(), "versions": [vars_of(x) for x in held if x.name == s.name]}
                                       for s, rule in ladders],
                           "removed": [vars_of(x) for x in held if x.name not in names],
                           "invoices": pinned})
            return
        if pinned is not None:
            for r in pinned:
                click.echo(f"{r['number']}  version {r['version']}  {r['status']}  due {r['due_on'].isoformat()}")
            click.echo(f"{len(pinned)} invoice(s) on ladder {ladder}" + (" (--limit reached)" if len(pinned) == limit
                                                                          else ""))
            return
        for s, rule in ladders:
            click.echo(f"{s.name}: {rule.describe() if rule else 'everything else'}")
            click.echo(f"  stages {list(s.stages)}, collapse {s.collapse}, spacing {s.spacing}, from {s.sender}")
            click.echo(f"  {describe_days(rt.policy, s)}")
            versions = [x for x in held if x.name == s.name]
            for x in versions:
                mark = "  (current)" if x.current else ""
                click.echo(f"  version {x.version}: {x.open_invoices} open invoice(s), {x.invoices} in all{mark}")
            if not any(x.current for x in versions):
                nxt = max((x.version for x in versions), default=0) + 1
                click.echo(f"  the file's settings are not recorded yet: the next scan records version {nxt}")
        for x in held:
            if x.name not in names:
                click.echo(f"{x.name} (no longer in the file) version {x.version}: {x.open_invoices} open "
                           "invoice(s) still follow it")

    @policies_command.command(name="apply")
    @click.option("--ladder", required=True, metavar="NAME", help="The ladder whose open invoices move.")
    @click.option("--apply-to-open", "apply_to_open_", is_flag=True,
                  help="Move them now (without it: only say how many would move).")
    @click.option("--json", "as_json", is_flag=True)
    @db_option
    @config_option
    def apply_command(ladder: str, apply_to_open_: bool, as_json: bool, database_url: str | None,
                      config: Path | None) -> None:
        """Move the open invoices of ladder NAME to its current settings in the policy file (recorded as a new
        version if changed). Stages an invoice already has stay recorded; it continues above its highest one,
        never a stage twice. Audited (ladders.applied)."""
        from .reminders.pinning import apply_to_open, holdings

        rt = h._runtime(config=config, database_url=database_url, migrate=True)
        try:
            if not apply_to_open_:
                held = [x for x in holdings(rt.store, rt.policy) if x.name == ladder and not x.current]
                waiting = sum(x.open_invoices for x in held)
                if as_json:
                    h._print_json({"ladder": ladder, "would_move": waiting, "applied": False})
                    return
                click.echo(f"{waiting} open invoice(s) of ladder {ladder} are on an older version; nothing moved. "
                           f"Run `oncebeat policies apply --ladder {ladder} --apply-to-open` to move them.")
                return
            done = apply_to_open(rt.store, rt.policy, ladder, now=rt.clock.now(), source=h._operator())
        finally:
            rt.close()
        if as_json:
            h._print_json(done | {"applied": True})
            return
        froms = ", ".join(f"version {v}: {n}" for v, n in sorted(done["from_versions"].items()))
        click.echo(f"ladder {ladder}: {done['moved']} open invoice(s) moved to version {done['version']}"
                   + (f" (from {froms})" if froms else "")
                   + ". Stages they already have stay; each continues above its highest stage.")

    group.add_command(policies_command)


def vars_of(holding: Any) -> dict[str, Any]:
    """A :class:`~oncebeat.reminders.pinning.Holding` as JSON-ready fields."""
    return {"version": holding.version, "id": holding.id, "open_invoices": holding.open_invoices,
            "invoices": holding.invoices, "current": holding.current,
            "created_at": holding.created_at.isoformat()}
