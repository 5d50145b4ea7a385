"""What the doctor reads: one :class:`Facts` per run, loading rows lazily and once.

The doctor only reads. Everything comes from named queries (``store/sql/*/doctor.sql``
and the engine's own read queries; an app's checks read its own SQL line), the Maildir when one is given, and the
schedule definitions when the caller passes them.

Scope: ``since`` limits history (events, occurrences, discarded jobs, processes,
mail); current state (effects in doubt, expired leases, overdue jobs, an
app's pending work) is always examined. ``schedule`` keeps what belongs to one
schedule (its occurrences, the jobs they caused, their effects and events);
an app's scope (:func:`~oncebeat.doctor.registry.register_scope`) keeps the jobs, effects, schedules and mail that
belong to one of its values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .. import dbtime, ledger, processes
from ..app import App, ScheduleDef
from ..errors import OncebeatError, ScheduleError
from ..mail.maildir import StoredMessage, read_maildir
from ..schedules import Schedule
from ..store import Store
from . import registry
from .model import Timeface

__all__ = ["Facts", "Proc", "LIVENESS_MARGIN", "EPOCH", "occurrences_by_ids", "jobs_by_unique_keys"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LIVENESS_MARGIN = timedelta(seconds=90)
"""A process not stopped is taken as alive until this long after its last sign of life
(heartbeat or audit event). Clocks heartbeat every 5 s, workers every lease/3 (10 s by default)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Proc:
    """A row of the process registry with its lifetime as the doctor sees it.

    ``last_seen`` is the later of the heartbeat and the process's newest audit
    event; ``end`` is ``stopped_at``, else ``last_seen`` plus :data:`LIVENESS_MARGIN`.
    """

    id: int
    role: str
    host: str
    pid: int
    name: str
    version: str
    tz_env: str | None
    info: dict[str, Any]
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    last_seen: datetime
    end: datetime

    def alive_at(self, instant: datetime) -> bool:
        """Possibly alive at ``instant`` (within :data:`LIVENESS_MARGIN` of its last sign of life)."""
        return self.started_at <= instant <= self.end

    def seen_after_start_of(self, other: Proc) -> bool:
        """This process showed a sign of life at or after ``other`` started: both were certainly alive then."""
        return self.last_seen >= other.started_at

    def overlaps(self, other: Proc) -> bool:
        """Both were certainly alive at once: each showed a sign of life after the other started.

        A crashed process followed by its replacement does not overlap (the old one was last seen
        before the new one started), whatever the liveness margin.
        """
        return self.seen_after_start_of(other) and other.seen_after_start_of(self)

    def overlap(self, other: Proc) -> tuple[datetime, datetime]:
        return max(self.started_at, other.started_at), min(self.last_seen, other.last_seen)

    def schedules(self) -> list[str] | None:
        keys = self.info.get("schedules") if isinstance(self.info, dict) else None
        return [str(k) for k in keys] if isinstance(keys, list) else None

    def label(self) -> str:
        return f"process {self.id} ({self.role}) {self.name} pid {self.pid} on {self.host} v{self.version}"


def source_of(row: dict[str, Any]) -> dict[str, Any]:
    """The provenance columns of a row as ``{"kind", "host", "pid", "name", "version"}``."""
    return {"kind": row.get("source_kind"), "host": row.get("source_host"), "pid": row.get("source_pid"),
            "name": row.get("source_name"), "version": row.get("source_version")}


def source_text(row: dict[str, Any]) -> str:
    return (f"{row.get('source_kind')} {row.get('source_name')} pid {row.get('source_pid')} "
            f"on {row.get('source_host')} (v{row.get('source_version')})")


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Order versions numerically where they are numbers (``0.10.0`` after ``0.9.1``)."""
    out: list[tuple[int, int | str]] = []
    for part in version.replace("-", ".").replace("+", ".").split("."):
        out.append((0, int(part)) if part.isdigit() else (1, part))
    return tuple(out)


def occurrences_by_ids(store: Store, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The occurrence rows of ``ids`` by id (ids not in the ledger are left out); read in chunks of 500."""
    out: dict[int, dict[str, Any]] = {}
    for chunk in store.iter_chunks(sorted({int(i) for i in ids}), 500):
        out.update({int(r["id"]): r for r in store.read("doctor_occurrences_by_ids", ids=chunk)})
    return out


def jobs_by_unique_keys(store: Store, keys: Iterable[str]) -> list[dict[str, Any]]:
    """The jobs enqueued with one of these unique keys (every state), oldest first."""
    out: list[dict[str, Any]] = []
    for chunk in store.iter_chunks(sorted(set(keys)), 500):
        out.extend(store.read("doctor_jobs_by_unique_keys", keys=chunk))
    return sorted(out, key=lambda j: int(j["id"]))


class Facts:
    """Rows the checks need, loaded on first use; plus the run's scope and time rendering.

    ``scopes`` are the registered scopes given (:func:`~oncebeat.doctor.registry.register_scope`), as
    ``{name: value}``; ``lines`` are the SQL lines migrated in the database, and ``hooks`` the registered
    :class:`~oncebeat.doctor.registry.Hooks` whose line is among them.

    Raises:
        OncebeatError: an unknown scope, or one whose value does not exist (e.g. no such order number).
    """

    def __init__(self, store: Store, *, now: datetime, since: datetime | None = None, schedule: str | None = None,
                 maildir: Path | str | None = None, definitions: App | Iterable[ScheduleDef] | None = None,
                 scopes: Mapping[str, str] | None = None) -> None:
        if now.tzinfo is None or since is not None and since.tzinfo is None:
            raise ValueError("now and since must be timezone-aware instants")
        self.store = store
        self.now = now.astimezone(UTC)
        self.since_arg = since.astimezone(UTC) if since is not None else None
        self.since = self.since_arg or EPOCH
        self.schedule_arg = schedule
        self.scope_args: dict[str, str] = dict(scopes or {})
        self.maildir = Path(maildir) if maildir is not None else None
        if definitions is None:
            self.definitions: dict[str, ScheduleDef] | None = None
        elif isinstance(definitions, App):
            self.definitions = dict(definitions.schedules)
        else:
            self.definitions = {d.key: d for d in definitions}
        self._cache: dict[str, Any] = {}
        self.lines: set[str] = set(store.schema_versions())
        self.hooks: list[registry.Hooks] = registry.hooks(self.lines)
        self.schedules: dict[str, dict[str, Any]] = {r["key"]: r for r in ledger.list_schedules(store)}
        self.face = Timeface(self._default_tz())
        self._occ_keys: dict[int, str] = {}
        self._jobs: dict[int, dict[str, Any] | None] = {}
        self._effects_cache: dict[str, dict[str, Any] | None] = {}
        self._resolve_scope()

    # --- scope ---------------------------------------------------------------------------------
    def _default_tz(self) -> str:
        if self.schedule_arg and self.schedule_arg in self.schedules:
            return str(self.schedules[self.schedule_arg]["tz"])
        zones = {r["tz"] for r in self.schedules.values() if r["state"] != "retired"}
        if not zones and self.definitions:
            zones = {d.tz for d in self.definitions.values()}
        return str(zones.pop()) if len(zones) == 1 else "UTC"

    def _resolve_scope(self) -> None:
        self.schedule_keys: set[str] | None = {self.schedule_arg} if self.schedule_arg is not None else None
        self.scope_job_ids: set[int] | None = None
        self.scope_effect_keys: set[str] | None = None
        self.scope_notes: list[str] = []
        self._message_filters: list[Any] = []
        known = registry.scopes()
        for name, value in self.scope_args.items():
            sdef = known.get(name)
            if sdef is None:
                names = ", ".join(f"--{n}" for n in sorted(known)) or "none (no app that adds one is loaded)"
                raise OncebeatError(f"doctor --{name}: no such scope (scopes: {names})")
            if sdef.sql_line is not None and sdef.sql_line not in self.lines:
                raise OncebeatError(f"doctor --{name} {value!r}: this database has no tables of the {sdef.sql_line!r} "
                                    f"SQL line (run `oncebeat migrate` with that app installed)")
            scope = sdef.resolve(self, value)
            if scope.job_ids is not None:
                self.scope_job_ids = set(scope.job_ids) if self.scope_job_ids is None else (
                    self.scope_job_ids & scope.job_ids)
            if scope.effect_keys is not None:
                self.scope_effect_keys = set(scope.effect_keys) if self.scope_effect_keys is None else (
                    self.scope_effect_keys & scope.effect_keys)
            if scope.schedule_keys is not None:
                self.schedule_keys = set(scope.schedule_keys) if self.schedule_keys is None else (
                    self.schedule_keys & scope.schedule_keys)
            if scope.message_ok is not None:
                self._message_filters.append(scope.message_ok)
            self.scope_notes.extend(scope.notes)

    @property
    def app_scoped(self) -> bool:
        """A registered (app) scope limits this run."""
        return bool(self.scope_args)

    @property
    def scoped(self) -> bool:
        return self.schedule_keys is not None or self.app_scoped

    def schedule_ok(self, key: str | None) -> bool:
        return self.schedule_keys is None or key in self.schedule_keys

    def occurrence_ok(self, occ: dict[str, Any]) -> bool:
        return self.schedule_ok(str(occ["schedule_key"]))

    def job_ok(self, job: dict[str, Any] | None, job_id: int | None = None) -> bool:
        if job is None:
            return not self.scoped
        jid = int(job["id"])
        if self.scope_job_ids is not None and jid not in self.scope_job_ids:
            return False
        if self.schedule_keys is not None:
            occ = job.get("occurrence_id")
            return occ is not None and self.occurrence_key(int(occ)) in self.schedule_keys
        return True

    def effect_ok(self, effect: dict[str, Any]) -> bool:
        if self.scope_effect_keys is not None and effect["key"] not in self.scope_effect_keys:
            return False
        if self.schedule_keys is not None:
            jid = effect.get("job_id")
            return jid is not None and self.job_ok(self.job(int(jid)))
        return True

    def event_ok(self, event: dict[str, Any]) -> bool:
        """Events about a schedule, job or effect follow those rules; others (processes) always pass."""
        kind, _, rest = str(event["subject"]).partition(":")
        if not self.scoped:
            return True
        if kind == "schedule":
            return self.schedule_ok(rest)
        if kind == "job":
            return rest.isdigit() and self.job_ok(self.job(int(rest)))
        if kind == "effect":
            if rest not in self._effects_cache:
                rows = self.effects_by_keys([rest])
                self._effects_cache[rest] = rows[0] if rows else None
            effect = self._effects_cache[rest]
            return effect is not None and self.effect_ok(effect)
        return True

    def message_ok(self, msg: StoredMessage) -> bool:
        return all(ok(msg) for ok in self._message_filters)

    # --- what the apps add (registry.Hooks) ----------------------------------------------------
    def effect_context(self, keys: Sequence[str]) -> dict[str, registry.Context]:
        """The apps' word about effect keys (their rows, the Message-ID mailed); keys no app knows are absent."""
        out: dict[str, registry.Context] = {}
        for h in self.hooks:
            out.update(h.effect_context(self, list(keys)))
        return out

    def job_context(self, jobs: Sequence[dict[str, Any]]) -> dict[int, registry.Context]:
        """The apps' word about job rows (their rows, how the app redoes the work)."""
        out: dict[int, registry.Context] = {}
        for h in self.hooks:
            out.update(h.job_context(self, list(jobs)))
        return out

    def message_effect(self, msg: StoredMessage) -> str | None:
        """The effect key that sent ``msg``, if an app can tell from the message."""
        return next((k for h in self.hooks if (k := h.message_effect(msg))), None)

    def effect_sends_mail(self, key: str) -> bool:
        return any(h.effect_sends_mail(key) for h in self.hooks)

    def message_group(self, msg: StoredMessage) -> str | None:
        """What ``msg`` is, in an app's words, the same for each copy (``order X step 1``); None if no app says."""
        return next((g for h in self.hooks if (g := h.message_group(msg))), None)

    def message_fields(self, msg: StoredMessage) -> tuple[str, dict[str, Any]]:
        text, data = "", {}
        for h in self.hooks:
            t, d = h.message_fields(msg)
            text += t
            data.update(d)
        return text, data

    def group_context(self, messages: Sequence[StoredMessage]) -> registry.Context | None:
        return next((c for h in self.hooks if (c := h.group_context(self, messages)) is not None), None)

    # --- rows ----------------------------------------------------------------------------------
    def once(self, key: str, load: Any) -> Any:
        """``load()``'s value, computed once per run under ``key`` (apps' checks share rows this way)."""
        return self._once(key, load)

    def _once(self, key: str, load: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = load()
        return self._cache[key]

    @property
    def db_now(self) -> datetime:
        """The database server's clock (:func:`oncebeat.dbtime.database_now`), read once per run."""
        return self._once("db_now", lambda: dbtime.database_now(self.store))  # type: ignore[no-any-return]

    def processes(self) -> list[Proc]:
        """Every registered process whose lifetime reaches ``since`` (oldest start first)."""
        def load() -> list[Proc]:
            activity = {int(r["process_id"]): r for r in self.store.read("doctor_process_activity")}
            out = []
            for r in self.store.read("doctor_processes", since=self.since):
                act = activity.get(int(r["id"]))
                last_seen = max(x for x in (r["heartbeat_at"], act["last_at"] if act else None) if x is not None)
                end = r["stopped_at"] if r["stopped_at"] is not None else last_seen + LIVENESS_MARGIN
                p = Proc(id=int(r["id"]), role=r["role"], host=r["host"], pid=int(r["pid"]), name=r["name"],
                         version=r["version"], tz_env=r["tz_env"], info=dict(r["info"] or {}),
                         started_at=r["started_at"], heartbeat_at=r["heartbeat_at"], stopped_at=r["stopped_at"],
                         last_seen=last_seen, end=end)
                if p.end >= self.since:
                    out.append(p)
            return out
        return self._once("processes", load)  # type: ignore[no-any-return]

    def registry(self) -> set[tuple[str, int]]:
        """(host, pid) of every process ever registered (whatever ``since``)."""
        return self._once("registry", lambda: {(r["host"], int(r["pid"]))  # type: ignore[no-any-return]
                                               for r in processes.list_processes(self.store)})

    def proc(self, process_id: int | None) -> Proc | None:
        if process_id is None:
            return None
        for p in self.processes():
            if p.id == process_id:
                return p
        return None

    def events(self, *kinds: str) -> list[dict[str, Any]]:
        """Audit events of ``kinds`` at or after ``since``, in scope, oldest first."""
        key = "events:" + ",".join(sorted(kinds))

        def load() -> list[dict[str, Any]]:
            rows = self.store.read("doctor_events", since=self.since, kinds=sorted(kinds))
            if self.scoped:  # fetch the jobs and effects the subjects name in a few queries, not one each
                subjects = [str(e["subject"]).partition(":") for e in rows]
                self.load_jobs(int(rest) for kind, _, rest in subjects if kind == "job" and rest.isdigit())
                self._effects_cache.update({e["key"]: e for e in self.effects_by_keys(
                    [rest for kind, _, rest in subjects if kind == "effect" and rest not in self._effects_cache])})
            return [e for e in rows if self.event_ok(e)]
        return self._once(key, load)  # type: ignore[no-any-return]

    def occurrence_key(self, occurrence_id: int) -> str | None:
        if occurrence_id not in self._occ_keys:
            self.load_occurrences([occurrence_id])
        return self._occ_keys.get(occurrence_id)

    def load_occurrences(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The occurrence rows of ``ids``."""
        out = occurrences_by_ids(self.store, ids)
        self._occ_keys.update({i: str(r["schedule_key"]) for i, r in out.items()})
        return out

    def job(self, job_id: int) -> dict[str, Any] | None:
        if job_id not in self._jobs:
            self.load_jobs([job_id])
        return self._jobs.get(job_id)

    def load_jobs(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The job rows of ``ids`` that still exist (pruned ones are left out)."""
        ids = [int(i) for i in ids]
        wanted = sorted(set(ids) - set(self._jobs))
        for chunk in self.store.iter_chunks(wanted, 500):
            rows = self.store.read("doctor_jobs_by_ids", ids=chunk)
            for r in rows:
                self._jobs[int(r["id"])] = r
            found = {int(r["id"]) for r in rows}
            for jid in chunk:
                if jid not in found:
                    self._jobs[jid] = None  # pruned (only finished jobs are pruned)
        occ_ids = [int(j["occurrence_id"]) for j in self._jobs.values()
                   if j is not None and j["occurrence_id"] is not None
                   and int(j["occurrence_id"]) not in self._occ_keys]
        if occ_ids:
            self.load_occurrences(occ_ids)
        return {i: j for i in ids if (j := self._jobs.get(i)) is not None}

    def effects_by_keys(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for chunk in self.store.iter_chunks(sorted(set(keys)), 500):
            out.extend(self.store.read("doctor_effects_by_keys", keys=chunk))
        return out

    def jobs_by_unique_keys(self, keys: Iterable[str]) -> list[dict[str, Any]]:
        """The jobs enqueued with one of these unique keys, oldest first."""
        out = jobs_by_unique_keys(self.store, keys)
        for j in out:
            self._jobs[int(j["id"])] = j
        return out

    def events_for_subjects(self, subjects: Iterable[str]) -> list[dict[str, Any]]:
        """Every audit event about these subjects (``effect:KEY``, ``job:42``), whatever ``since``, oldest first."""
        out: list[dict[str, Any]] = []
        for chunk in self.store.iter_chunks(sorted(set(subjects)), 500):
            out.extend(self.store.read("doctor_events_for_subjects", subjects=chunk))
        return sorted(out, key=lambda e: int(e["id"]))

    def effects_of_jobs(self, job_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for chunk in self.store.iter_chunks(sorted(set(job_ids)), 500):
            for e in self.store.read("doctor_effects_of_jobs", ids=chunk):
                out.setdefault(int(e["job_id"]), []).append(e)
        return out

    def messages(self) -> list[StoredMessage]:
        """Messages in ``maildir`` (in scope); empty without a Maildir."""
        if self.maildir is None:
            return []
        maildir = self.maildir
        return self._once("messages", lambda: [m for m in read_maildir(maildir)  # type: ignore[no-any-return]
                                               if self.message_ok(m) and self._message_since(m)])

    def _message_since(self, msg: StoredMessage) -> bool:
        if self.since_arg is None:
            return True
        when = message_date(msg)
        return when is None or when >= self.since_arg

    # --- schedules -----------------------------------------------------------------------------
    def schedule_rows(self, *, include_retired: bool = False) -> list[dict[str, Any]]:
        return [r for k, r in sorted(self.schedules.items())
                if self.schedule_ok(k) and (include_retired or r["state"] != "retired")]

    def parsed(self, row: dict[str, Any]) -> Schedule | None:
        """The stored schedule as a :class:`Schedule` (None if the row no longer parses)."""
        key = f"parsed:{row['key']}:{row['version']}"

        def load() -> Schedule | None:
            try:
                return Schedule(expression=row["expression"], tz=row["tz"], dst_gap=row["dst_gap"],
                                dst_fold=row["dst_fold"])
            except ScheduleError:
                return None
        return self._once(key, load)  # type: ignore[no-any-return]

    def tz_of(self, schedule_key: str | None) -> str | None:
        row = self.schedules.get(schedule_key or "")
        return str(row["tz"]) if row else None


def _header(msg: StoredMessage, name: str) -> str | None:
    wanted = name.lower()
    for k, v in msg.headers.items():
        if k.lower() == wanted:
            return v.strip()
    return None


def header(msg: StoredMessage, name: str) -> str | None:
    """The value of header ``name`` (case-insensitive), stripped; None if absent."""
    return _header(msg, name)


def message_date(msg: StoredMessage) -> datetime | None:
    from email.utils import parsedate_to_datetime

    raw = _header(msg, "Date")
    if not raw:
        return None
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
