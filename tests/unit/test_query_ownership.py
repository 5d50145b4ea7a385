"""One owner per query: a module runs only the named queries of the SQL file it owns (README, Development).

Every module under ``src/oncebeat`` is parsed (no import, no database); each call that runs a named query
(``tx.run("x")``, ``.one``, ``.read``, ``.many``, ``.query_sql``, ``store.run_idempotent``, ``store.run_alone``,
both names of ``.run_with("x", "source")``, and the source of ``Queue.enqueue_select(tx, "source")``) must name a
query defined in a file its module owns. Where another module needs the data it calls the owner's verb
(``ledger.get_schedule``, ``Queue.list_jobs``, ``effects.list_effects``, ``processes.list_processes``, …).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import oncebeat.reminders  # noqa: F401  (registers the reminder app's SQL line)
from oncebeat.store.sqlfiles import SqlLine, query_files, registered_lines

SRC = Path(__file__).resolve().parents[2] / "src" / "oncebeat"

#: Which module owns each SQL file, as (line, file) -> module. A package (``oncebeat.doctor``,
#: ``oncebeat.reminders``) owns its files as a unit: any module inside it may run their queries.
#: ``"*"`` stands for every file of the line. The same table is in README's "Development" section.
OWNERS: dict[tuple[str, str], str] = {
    ("engine", "audit.sql"): "oncebeat.audit",
    ("engine", "clock.sql"): "oncebeat.clock",
    ("engine", "dbtime.sql"): "oncebeat.dbtime",
    ("engine", "doctor.sql"): "oncebeat.doctor",
    ("engine", "effects.sql"): "oncebeat.effects",
    ("engine", "idempotency.sql"): "oncebeat.idempotency",
    ("engine", "ledger.sql"): "oncebeat.ledger",
    ("engine", "processes.sql"): "oncebeat.processes",
    ("engine", "pauses.sql"): "oncebeat.pauses",
    ("engine", "queue_limits.sql"): "oncebeat.queue_limits",
    ("engine", "queue.sql"): "oncebeat.queue",
    ("engine", "ratelimit.sql"): "oncebeat.ratelimit",
    ("engine", "retention.sql"): "oncebeat.retention",
    ("engine", "schedule_admin.sql"): "oncebeat.schedule_admin",
    ("engine", "schedules_report.sql"): "oncebeat.schedules_report",
    ("reminders", "*"): "oncebeat.reminders",
}

#: Queries no module of the package runs, kept for a stated reason (tests read them to look inside).
NOT_RUN = {"count_invoices": "tests count imported invoices", "list_stripe_events": "tests read the webhook log",
           "aging_from_invoices": "tests compare the aging kept in invoice_open_totals with the invoices' own",
           "report_receivable_moves_from_invoices": "tests compare the moves kept in receivable_moves with the "
                                                    "invoices' own"}

QUERY_VERBS = {"run", "one", "read", "many", "query_sql", "run_idempotent", "run_alone"}


def _owner_of(line: SqlLine, file: str) -> str:
    owner = OWNERS.get((line.name, file)) or OWNERS.get((line.name, "*"))
    assert owner is not None, f"no owner for {line.name} {file}: add it to OWNERS here and to README, Development"
    return owner


def query_owners() -> dict[str, str]:
    """Every registered query -> the module or package that owns it."""
    return {name: _owner_of(line, file) for line in registered_lines() for name, file in query_files(line).items()}


def _names(node: ast.expr, scope: ast.AST) -> set[str] | None:
    """The string values ``node`` can take: a literal, ``a if c else b``, or a local name bound only to such."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        body, orelse = _names(node.body, scope), _names(node.orelse, scope)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(node, ast.Name):
        values = [a.value for a in ast.walk(scope) if isinstance(a, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
        found: set[str] = set()
        for value in values:
            names = _names(value, scope)
            if names is None:
                return None
            found |= names
        return found or None
    return None


def _query_args(call: ast.Call) -> Iterator[ast.expr]:
    """The arguments of ``call`` that name a query."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return
    if func.attr in QUERY_VERBS and call.args:
        yield call.args[0]
    elif func.attr == "run_with":
        yield from call.args[:2]
    elif func.attr in ("enqueue_select", "enqueue_select_returning", "enqueue_runs_select"):
        yield from call.args[1:2]
        yield from (k.value for k in call.keywords if k.arg == "source")


def query_calls(source: str) -> list[tuple[str, int]]:
    """``(query name, line)`` of each call in ``source`` that runs a named query, as far as names resolve."""
    tree = ast.parse(source)
    functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    scopes: list[ast.AST] = [tree, *functions]
    found: set[tuple[str, int]] = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call):
                for arg in _query_args(node):
                    found |= {(name, node.lineno) for name in _names(arg, scope) or ()}
    return sorted(found)


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _owns(module: str, owner: str) -> bool:
    return module == owner or module.startswith(owner + ".")


def violations(module: str, source: str, owners: dict[str, str]) -> list[str]:
    """The calls in ``source`` (module ``module``) that run a query another module owns."""
    return [f"{module}:{line} runs {name!r}, owned by {owners[name]}: call {owners[name]}'s verb instead"
            for name, line in query_calls(source) if name in owners and not _owns(module, owners[name])]


MODULES = {_module(p): p for p in sorted(SRC.rglob("*.py"))}


def test_every_sql_file_has_an_owner_module_that_exists() -> None:
    owners = set(query_owners().values())
    assert owners <= set(MODULES), f"owners that are not modules or packages: {sorted(owners - set(MODULES))}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_runs_only_the_queries_it_owns(module: str) -> None:
    assert violations(module, MODULES[module].read_text(encoding="utf-8"), query_owners()) == []


def test_every_query_is_run_by_its_owner() -> None:
    owners = query_owners()
    run = {name for module, path in MODULES.items()
           for name, _ in query_calls(path.read_text(encoding="utf-8")) if _owns(module, owners.get(name, "-"))}
    dead = sorted(set(owners) - run - set(NOT_RUN))
    assert dead == [], "queries nobody runs: delete them (or list them in NOT_RUN with the reason)"
    assert not set(NOT_RUN) & run, "a query in NOT_RUN is run after all: take it off the list"


def test_the_scanner_flags_a_cross_module_query_call() -> None:
    owners = query_owners()
    snippet = '''
def dashboard(store, tx, running):
    store.read("get_job", id=1)
    tx.one("list_schedules")
    name = "list_running_processes" if running else "list_processes"
    store.read(name)
    tx.run_with("enqueue_select", "pending_send_jobs")
    Queue(store).enqueue_select(tx, "pending_send_jobs", task="x")
    ledger.run("invoice:7", send)  # EffectLedger.run: a key, not a query
'''
    found = violations("oncebeat.web.jobs", snippet, owners)
    assert sorted((f.split(" runs ")[1].split(",")[0], int(f.split(":")[1].split()[0])) for f in found) == [
        ("'enqueue_select'", 7), ("'get_job'", 3), ("'list_processes'", 6), ("'list_running_processes'", 6),
        ("'list_schedules'", 4), ("'pending_send_jobs'", 7), ("'pending_send_jobs'", 8)]
    assert violations("oncebeat.queue", 'def f(tx):\n    tx.one("get_job", id=1)\n', owners) == []
    assert violations("oncebeat.reminders.service", 'def f(q, tx):\n    q.enqueue_select(tx, "pending_send_jobs")\n',
                      owners) == []
