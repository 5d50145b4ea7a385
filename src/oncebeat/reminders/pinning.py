"""Ladder versions in the database and the pin of each invoice (reminders migration 0014, README "Several ladders").

- :func:`sync_versions` records a ladder's settings as a new version when they differ from its newest recorded
  one (content hash), audited ``ladders.version``; run by every scan, so a file edit takes effect at the next scan
  for invoices that start dunning from then on.
- :func:`pin_due` pins each open invoice not yet in dunning to the current version of its matching ladder once
  its first stage has come; the scan then computes its stages from that version only (:func:`stage_rows`).
- :func:`apply_to_open` moves the open invoices of one ladder to its current version, audited
  ``ladders.applied``: the operator's explicit ``--apply-to-open``. Stages the invoice already has stay recorded;
  the scan creates only stages above its highest one, so none is ever created or sent twice.

Every writer here runs under the scan lock (``scan_lock``): versions are numbered one at a time and no scan sees a
half-moved ladder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from .. import audit
from ..errors import OncebeatError
from ..provenance import Source
from ..store import Store, Tx
from .calendar import BusinessCalendar, stage_cutoffs
from .ladder_calendars import ladder_calendar
from .ladders import DEFAULT_LADDER, LadderSettings, ladders_of, match_ladder
from .policy import Policy

__all__ = ["ApplyCountChanged", "Holding", "LadderVersion", "all_versions", "apply_plan", "apply_to_open",
           "holdings", "ladder_invoices", "pin_due", "pin_moves", "stage_rows", "sync_versions", "versions_by_id"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderVersion:
    """One recorded version of a ladder: its id (``invoice_pins.ladder_version_id``), number and settings."""

    id: int
    version: int
    settings: LadderSettings

    @property
    def name(self) -> str:
        return self.settings.name


@dataclass(frozen=True, kw_only=True, slots=True)
class Holding:
    """One ladder version and the invoices pinned to it (``open_invoices`` of ``invoices``)."""

    name: str
    version: int
    id: int
    created_at: datetime
    open_invoices: int
    invoices: int
    current: bool  # the version the policy file gives today (new invoices take it)


def sync_versions(tx: Tx, policy: Policy, *, now: datetime, source: Source) -> dict[str, LadderVersion]:
    """The current version of every ladder of ``policy`` (name -> version), recording changed ones first.

    A ladder whose resolved settings differ from its newest recorded version (or that has none) gets version
    N+1, audited ``ladders.version`` with its settings. Run it under ``scan_lock``.
    """
    latest = {r["name"]: r for r in tx.run("ladder_versions_latest")}
    current: dict[str, LadderVersion] = {}
    for settings, _ in ladders_of(policy):
        digest = settings.content_hash()
        row = latest.get(settings.name)
        if row is not None and row["content_hash"] == digest:
            current[settings.name] = LadderVersion(id=int(row["id"]), version=int(row["version"]), settings=settings)
            continue
        number = 1 if row is None else int(row["version"]) + 1
        created = tx.one("insert_ladder_version", name=settings.name, version=number, content_hash=digest,
                         settings=_json_text(settings), now=now)
        assert created is not None
        current[settings.name] = LadderVersion(id=int(created["id"]), version=number, settings=settings)
        audit.record(tx, now=now, kind="ladders.version", subject=f"ladder:{settings.name}", source=source,
                     detail={"name": settings.name, "version": number, "id": int(created["id"]),
                             "settings": settings.to_json()})
    return current


def _json_text(settings: LadderSettings) -> str:
    return json.dumps(settings.to_json(), sort_keys=True, ensure_ascii=False)


def pin_due(tx: Tx, policy: Policy, current: Mapping[str, LadderVersion], day_of: Callable[[str | None], date],
            latest_day: date) -> int:
    """Pin every open invoice not yet in dunning whose first stage has come to its matching ladder's version.

    ``day_of(customer_tz)``: the business date of a customer in that zone for this scan; ``latest_day``: the
    latest of them (bounds the invoices read). With the default ladder only, one set-based update. Returns the
    number of invoices pinned (exact when matched one by one; the set-based update counts as 0).
    """
    ladders = ladders_of(policy)

    def cutoff(day: date, version: LadderVersion) -> date:
        # The latest due date whose first stage has come by ``day``, in calendar days or, with a business calendar
        # (the ladder's own, else the policy's) counting business days, the later of both: a pin a little early
        # is harmless (it only fixes the ladder), a late one would lose the stage the scan creates on its day.
        stage = version.settings.stages[0]
        calendar = ladder_calendar(policy, version.settings)
        plain = day - timedelta(days=stage)
        return plain if calendar is None else max(plain, calendar.stage_cutoff(day, stage))

    if len(ladders) == 1:  # every invoice takes the default ladder: no need to read them
        only = current[DEFAULT_LADDER]
        tx.run("pin_open_invoices", version_id=only.id, cutoff=cutoff(latest_day, only))
        return 0
    pins = []
    for r in tx.run("unpinned_open_invoices", max_cutoff=max(cutoff(latest_day, v) for v in current.values())):
        version = current[match_ladder(ladders, r)]
        if r["due_on"] <= cutoff(day_of(r["customer_tz"] or None), version):
            pins.append({"id": r["id"], "version_id": version.id})
    if pins:
        tx.many("pin_invoice", pins)
    return len(pins)


def versions_by_id(store: Store | Tx, ids: Iterable[int]) -> dict[int, LadderVersion]:
    """The recorded versions with these ids (id -> version), read from ``store`` or an open transaction."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return {int(r["id"]): LadderVersion(id=int(r["id"]), version=int(r["version"]),
                                        settings=LadderSettings.from_json(r["settings"]))
            for r in store.read("ladder_versions_by_id", ids=wanted)}


def all_versions(store: Store) -> dict[int, LadderVersion]:
    """Every recorded ladder version (id -> version)."""
    return {int(r["id"]): LadderVersion(id=int(r["id"]), version=int(r["version"]),
                                        settings=LadderSettings.from_json(r["settings"]))
            for r in store.read("all_ladder_versions")}


def pin_moves(store: Store) -> list[tuple[datetime, str, int, int]]:
    """Every move of an open invoice to another version, oldest first, from the audit trail (``ladders.applied``):
    ``(instant, invoice number, from version id, to version id)``. Moves of a pruned audit trail are gone."""
    out = []
    for e in audit.list_events(store, since=datetime(1970, 1, 1, tzinfo=UTC), kind="ladders.applied"):
        detail = e["detail"] if isinstance(e["detail"], dict) else json.loads(e["detail"])
        out += [(e["at"], str(number), int(from_id), int(detail["id"])) for number, from_id in detail["moves"]]
    return out


def open_versions(tx: Tx) -> list[LadderVersion]:
    """The versions open invoices are pinned to (the ladders a scan runs), oldest first."""
    return [LadderVersion(id=int(r["id"]), version=int(r["version"]), settings=LadderSettings.from_json(r["settings"]))
            for r in tx.run("open_ladder_versions")]


def stage_rows(version: LadderVersion, business_date: date, tz: str | None,
               calendar: BusinessCalendar | None = None) -> list[dict[str, Any]]:
    """The scan's stage rows of one ladder version on ``business_date`` (for customers in zone ``tz``; None:
    every customer): :func:`.calendar.stage_cutoffs` rows (none on a non-business day of ``calendar``) with
    ``lv`` (the version id) and ``nominal`` (1 with ``spacing = "nominal"``)."""
    nominal = 1 if version.settings.spacing == "nominal" else 0
    return [row | {"lv": version.id, "nominal": nominal}
            for row in stage_cutoffs(version.settings.stages, business_date, tz, calendar)]


def holdings(store: Store, policy: Policy) -> list[Holding]:
    """Every recorded ladder version with the invoices pinned to it, by ladder name and version.

    ``current`` marks the version each ladder of ``policy`` has today (by content hash: a file edited since the
    last scan shows no current version until the next scan or apply records it).
    """
    hashes = {s.name: s.content_hash() for s, _ in ladders_of(policy)}
    return [Holding(name=r["name"], version=int(r["version"]), id=int(r["id"]), created_at=r["created_at"],
                    open_invoices=int(r["open_invoices"]), invoices=int(r["invoices"]),
                    current=hashes.get(r["name"]) == r["content_hash"])
            for r in store.read("ladder_holdings")]


def ladder_invoices(store: Store, name: str, *, limit: int = 1000) -> list[dict[str, Any]]:
    """The invoices pinned to ladder ``name`` (open first, then by number): ``number, status, due_on, version``."""
    return store.read("ladder_invoices", name=name, limit=limit)


class ApplyCountChanged(OncebeatError):
    """An apply confirmed for ``expected`` moving invoices found ``actual``: nothing was moved (look again)."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        super().__init__(f"ladder {name}: {actual} open invoice(s) would move now, not the {expected} confirmed "
                         "(invoices were paid, pinned or moved meanwhile); nothing was moved. Look at the count "
                         "again and confirm it.")
        self.expected = expected
        self.actual = actual


def _known(policy: Policy, name: str) -> None:
    names = [s.name for s, _ in ladders_of(policy)]
    if name not in names:
        raise OncebeatError(f"no ladder named {name!r} in the policy file; ladders: {', '.join(names)}. "
                            "`oncebeat policies` lists them.")


def apply_plan(store: Store | Tx, policy: Policy, name: str) -> dict[str, Any]:
    """What :func:`apply_to_open` of ladder ``name`` would do now, writing nothing.

    Returns:
        ``{"ladder", "to_version", "recorded", "moves": {version: open invoices}, "total"}``: ``to_version`` is
        the newest recorded version when it holds the file's settings (``recorded`` True), else the number the
        apply records; ``moves`` counts the open invoices on every other version.
    Raises:
        OncebeatError: ``name`` is no ladder of the policy file.
    """
    _known(policy, name)
    digest = next(s.content_hash() for s, _ in ladders_of(policy) if s.name == name)
    rows = [r for r in (store.run if isinstance(store, Tx) else store.read)("ladder_holdings") if r["name"] == name]
    latest = max(rows, key=lambda r: int(r["version"]), default=None)
    recorded = latest is not None and latest["content_hash"] == digest
    to_version = int(latest["version"]) + (0 if recorded else 1) if latest is not None else 1
    moves = {int(r["version"]): int(r["open_invoices"]) for r in rows
             if int(r["open_invoices"]) and not (recorded and int(r["version"]) == to_version)}
    return {"ladder": name, "to_version": to_version, "recorded": recorded, "moves": moves,
            "total": sum(moves.values())}


def apply_to_open(store: Store, policy: Policy, name: str, *, now: datetime, source: Source,
                  expected: int | None = None, tx: Tx | None = None) -> dict[str, Any]:
    """Move the open invoices of ladder ``name`` to its current version (the file's settings), in one transaction
    (``tx`` when given: the API writes under its idempotency key).

    Records the version first if the file changed. Stages an invoice already has are kept; the scan continues
    above its highest one (never a stage twice). Audited ``ladders.applied`` (version, count, numbers).
    ``expected``: the count the operator confirmed (:func:`apply_plan`'s ``total``); another count moves nothing.

    Returns:
        ``{"ladder", "version", "moved", "from_versions": {version: count}}``.
    Raises:
        OncebeatError: ``name`` is no ladder of the policy file.
        ApplyCountChanged: ``expected`` is not the count of invoices that would move (nothing written).
    """
    _known(policy, name)
    if tx is None:
        with store.transaction() as own:
            return _apply(own, policy, name, now=now, source=source, expected=expected)
    return _apply(tx, policy, name, now=now, source=source, expected=expected)


def _apply(tx: Tx, policy: Policy, name: str, *, now: datetime, source: Source,
           expected: int | None) -> dict[str, Any]:
    tx.run("scan_lock")  # no scan sees a half-moved ladder; versions are numbered one at a time
    if expected is not None and (actual := apply_plan(tx, policy, name)["total"]) != expected:
        raise ApplyCountChanged(name, expected, actual)
    target = sync_versions(tx, policy, now=now, source=source)[name]
    rows = tx.run("open_invoices_on_old_versions", name=name, version_id=target.id)
    if rows:
        tx.many("repin_invoice", [{"id": r["id"], "from_id": r["ladder_version_id"], "version_id": target.id}
                                  for r in rows])
    moved_from: dict[int, int] = {}
    for r in rows:
        moved_from[int(r["version"])] = moved_from.get(int(r["version"]), 0) + 1
    audit.record(tx, now=now, kind="ladders.applied", subject=f"ladder:{name}", source=source,
                 detail={"name": name, "version": target.version, "id": target.id, "moved": len(rows),
                         "from_versions": {str(k): v for k, v in sorted(moved_from.items())},
                         "invoices": [r["number"] for r in rows][:1000],
                         "moves": [[r["number"], int(r["ladder_version_id"])] for r in rows][:1000]})
    return {"ladder": name, "version": target.version, "moved": len(rows), "from_versions": moved_from}
