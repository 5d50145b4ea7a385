"""Several reminder ladders, chosen per invoice by rules; each invoice pinned to one ladder version.

The top-level ``[reminders]`` and ``[sender]`` settings are the ``default`` ladder. ``[[ladders]]`` tables add
named ladders, each a ``match`` table and overrides of ladder settings (a setting a ladder does not name is the
default ladder's)::

    [[ladders]]
    name = "enterprise"
    match = { currency = ["EUR", "CHF"], amount_min = 1000000 }   # minor units: EUR 10,000.00 and more
    stages = [7, 21, 45]
    spacing = "nominal"
    from = "Accounts <ar@example.com>"

    [[ladders]]
    name = "austria"
    match = { column = { name = "customer_locale", equals = ["de_AT"] } }
    templates = "templates-at"

    [[ladders]]
    name = "north-america-vip"
    match = { country = ["US", "CA"], tags_any = ["enterprise", "vip"] }

Matching: the ladders are tried in file order, the first whose every ``match`` key holds wins; no match gives
``default``. ``currency``: the invoice's ISO 4217 code (one or a list). ``amount_min``/``amount_max``: the
invoice's ``amount_due`` in MINOR units of its own currency (cents; yen for JPY), ``amount_min <= amount <
amount_max`` (a band; give ``currency`` too when amounts of several currencies meet). ``country``: the customer's
ISO 3166-1 alpha-2 code (one or a list; a customer without a country matches none). ``tags_any``: the customer
holds at least one of these tags (one or a list; :mod:`.segments`). ``column``: one field
(or a list of ``{name, equals}`` tables, all must hold) of the invoice or its customer, by the import's column
name (:data:`MATCH_COLUMNS`), equal to one of the values (text, compared exactly).

Pinning: each ladder's resolved settings (:class:`LadderSettings`) are stored as numbered versions
(``ladder_versions``: name, version, content hash, settings JSON). The scan records a new version when the file's
settings of a ladder changed (audited ``ladders.version``) and pins an invoice to the current version of its
matching ladder when its first stage comes due (``invoice_pins``, reminders 0021). From then on its stages, spacing,
templates and sender are that version's, whatever the file or the invoice's customer says later, until an
operator moves the open invoices of a ladder to its current version (:func:`apply_to_open`, audited
``ladders.applied``). A stage an invoice already has, in any state, is never created again (the scan creates only
stages above the highest one recorded; ``UNIQUE (invoice_id, stage)``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oncebeat.errors import ConfigError
from oncebeat.reminders.calendar import BusinessCalendar, calendar_from_json, calendar_problems, calendar_to_json
from oncebeat.reminders.ladder_lines import LadderLines
from oncebeat.reminders.notices.escalation import (
    StageEscalation,
    escalation_config,
    escalation_from_json,
    escalation_to_json,
)
from oncebeat.reminders.policy import _CHECKS, Policy, _describe, _Invalid, _show, _type_name, _unknown_key
from oncebeat.reminders.segments import check_country, check_tags, tag_set

__all__ = ["DEFAULT_LADDER", "MATCH_COLUMNS", "SPACINGS", "LadderDef", "LadderMatch", "LadderSettings",
           "ladder_defs", "ladders_of", "match_ladder"]

#: The name of the ladder the top-level settings make; the ladder of every invoice no ``[[ladders]]`` matches.
DEFAULT_LADDER = "default"
#: ``spacing``: after a late stage, is the next one due the stage gap after the late one's actual business date
#: (``from_sent``, the default) or on its own nominal date, due date + stage days (``nominal``)?
SPACINGS = ("from_sent", "nominal")
#: Fields ``match.column`` may name: the import's column names of the invoice and its customer.
MATCH_COLUMNS = ("invoice_number", "currency", "customer_email", "customer_name", "customer_locale", "customer_tz",
                 "customer_country")
#: Ladder settings a ``[[ladders]]`` table may override: TOML key -> Policy field.
OVERRIDES = {"stages": "stages", "collapse": "collapse", "spacing": "spacing", "send_at": "send_at",
             "from": "sender", "reply_to": "reply_to", "company": "company", "templates": "templates",
             "group": "group", "stage": "escalation", "calendar": "calendar",
             "max_notices_per_week": "max_notices_per_week"}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_MATCH_KEYS = ("currency", "amount_min", "amount_max", "country", "tags_any", "column")
_MAX_AMOUNT = 10**15


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderMatch:
    """The rule of one ladder; every given key must hold. Amounts are minor units of the invoice's currency."""

    currency: tuple[str, ...] = ()
    amount_min: int | None = None  # inclusive
    amount_max: int | None = None  # exclusive
    columns: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (MATCH_COLUMNS name, accepted values)
    country: tuple[str, ...] = ()  # ISO 3166-1 alpha-2 codes
    tags_any: tuple[str, ...] = ()  # lower-case tags: one is enough

    def matches(self, fields: Mapping[str, Any]) -> bool:
        """Whether invoice ``fields`` (``currency``, ``amount_due``, the :data:`MATCH_COLUMNS` and
        ``customer_tags``, the stored ``"a;b"`` text) match."""
        if self.currency and fields.get("currency") not in self.currency:
            return False
        if self.country and (fields.get("customer_country") or "") not in self.country:
            return False
        if self.tags_any and not tag_set(fields.get("customer_tags")) & set(self.tags_any):
            return False
        amount = int(fields.get("amount_due") or 0)
        if self.amount_min is not None and amount < self.amount_min:
            return False
        if self.amount_max is not None and amount >= self.amount_max:
            return False
        return all(str(fields.get(name) if fields.get(name) is not None else "") in values
                   for name, values in self.columns)

    def describe(self) -> str:
        """The rule in words, e.g. ``currency EUR, amount >= 1000000``."""
        parts = []
        if self.currency:
            parts.append("currency " + "/".join(self.currency))
        if self.amount_min is not None:
            parts.append(f"amount >= {self.amount_min}")
        if self.amount_max is not None:
            parts.append(f"amount < {self.amount_max}")
        if self.country:
            parts.append("country " + "/".join(self.country))
        if self.tags_any:
            parts.append("tagged " + " or ".join(self.tags_any))
        parts += [f"{name} = {'/'.join(values)}" for name, values in self.columns]
        return ", ".join(parts) or "everything"


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderDef:
    """One ``[[ladders]]`` table as written: its name, rule and the settings it overrides (validated values)."""

    name: str
    match: LadderMatch
    overrides: tuple[tuple[str, Any], ...] = field(default=())  # (Policy field, value)


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderSettings:
    """The resolved settings of one ladder: what a ladder version stores and an invoice pinned to it follows.

    ``stages``: days relative to the due date, ascending. ``templates``: an absolute folder or None (built-in).
    """

    name: str
    stages: tuple[int, ...]
    collapse: str
    spacing: str
    send_at: str
    sender: str
    reply_to: str | None
    company: str
    templates: str | None
    group: str = "none"  # "customer": one notice per customer and business date (notices.grouping)
    # CC, BCC and late fee per stage (oncebeat.reminders.notices.escalation); in the JSON only when there is
    # any, so a ladder without escalation keeps the content hash it had before escalation existed
    escalation: tuple[StageEscalation, ...] = ()
    # The ladder's own business calendar and per-customer cap (``calendar = {...}``, ``max_notices_per_week``);
    # None: the policy-wide ``[calendar]`` / ``[reminders] max_notices_per_week`` of the running file
    # (:mod:`.ladder_calendars`). In the JSON only when set, for the same reason as escalation.
    calendar: BusinessCalendar | None = None
    max_notices_per_week: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored settings; ``group``, ``escalation``, ``calendar`` and ``max_notices_per_week`` only when
        set, so a version recorded before they existed keeps its content hash (no new version of an unchanged
        ladder)."""
        out: dict[str, Any] = {
            "name": self.name, "stages": list(self.stages), "collapse": self.collapse, "spacing": self.spacing,
            "send_at": self.send_at, "sender": self.sender, "reply_to": self.reply_to, "company": self.company,
            "templates": self.templates}
        if self.group != "none":
            out["group"] = self.group
        if self.escalation:
            out["escalation"] = escalation_to_json(self.escalation)
        if self.calendar is not None:
            out["calendar"] = calendar_to_json(self.calendar)
        if self.max_notices_per_week is not None:
            out["max_notices_per_week"] = self.max_notices_per_week
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> LadderSettings:
        """From :meth:`to_json`'s dict or its JSON text (a stored version's ``settings``)."""
        d = json.loads(data) if isinstance(data, str) else dict(data)
        return cls(name=d["name"], stages=tuple(int(s) for s in d["stages"]), collapse=d["collapse"],
                   spacing=d.get("spacing", "from_sent"), send_at=d["send_at"], sender=d["sender"],
                   reply_to=d.get("reply_to"), company=d["company"], templates=d.get("templates"),
                   group=d.get("group", "none"), escalation=escalation_from_json(d.get("escalation")),
                   calendar=calendar_from_json(d["calendar"]) if d.get("calendar") is not None else None,
                   max_notices_per_week=d.get("max_notices_per_week"))

    def content_hash(self) -> str:
        """SHA-256 (hex) of the canonical JSON: equal settings, equal hash (a version is recorded per change)."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _base(policy: Policy, name: str) -> dict[str, Any]:
    return {"name": name, "stages": policy.stages, "collapse": policy.collapse, "spacing": policy.spacing,
            "send_at": policy.send_at, "sender": policy.sender, "reply_to": policy.reply_to,
            "company": policy.company, "templates": policy.templates, "group": policy.group,
            "escalation": policy.escalation}


def _settings(values: dict[str, Any]) -> LadderSettings:
    templates = values.pop("templates")
    return LadderSettings(**values, templates=str(templates) if templates is not None else None)


def ladders_of(policy: Policy) -> list[tuple[LadderSettings, LadderMatch | None]]:
    """Every ladder of ``policy`` in matching order, ``default`` last (its rule None: everything)."""
    out: list[tuple[LadderSettings, LadderMatch | None]] = []
    for d in policy.ladders:
        values = _base(policy, d.name) | dict(d.overrides)
        if "escalation" not in dict(d.overrides):  # the default ladder's, for the stages this ladder shares
            values["escalation"] = tuple(e for e in policy.escalation if e.stage in values["stages"])
        out.append((_settings(values), d.match))
    out.append((_settings(_base(policy, DEFAULT_LADDER)), None))
    return out


def match_ladder(ladders: Sequence[tuple[LadderSettings, LadderMatch | None]], fields: Mapping[str, Any]) -> str:
    """The name of the first ladder whose rule ``fields`` (an invoice with its customer) match."""
    for settings, rule in ladders:
        if rule is None or rule.matches(fields):
            return settings.name
    return DEFAULT_LADDER


# --------------------------------------------------------------------------- validation


def _strings(value: Any, fix: str, *, upper: bool = False) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise _Invalid(f"must be a non-empty string or array of strings, got {_type_name(value)}", fix, value=value)
    return tuple(v.strip().upper() if upper else v for v in items)


def _amount(value: Any, key: str) -> int:
    fix = f"Write {key} as a whole number of minor units (cents), e.g. {key} = 1000000 for 10,000.00."
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"must be a whole number of minor units, got {_type_name(value)}", fix, value=value)
    if not 0 <= value <= _MAX_AMOUNT:
        raise _Invalid(f"must be between 0 and {_MAX_AMOUNT}", fix, value=value)
    return value


def _columns(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    fix = ('Write column = { name = "customer_locale", equals = ["de_AT"] } (a list of such tables: all must '
           f"hold); name is one of {', '.join(MATCH_COLUMNS)}.")
    tables = [value] if isinstance(value, dict) else value
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise _Invalid(f"must be a table or an array of tables, got {_type_name(value)}", fix, value=value)
    out = []
    for t in tables:
        if set(t) != {"name", "equals"}:
            raise _Invalid("must have exactly the keys name and equals", fix, value=t)
        if t["name"] not in MATCH_COLUMNS:
            raise _Invalid(f"names no field a ladder can match on ({t['name']!r})", fix, value=t)
        out.append((str(t["name"]), _strings(t["equals"], fix)))
    return tuple(out)


class _MatchInvalid(Exception):
    """A problem of one key of a ``match`` table (named ``match.<key>`` in the message)."""

    def __init__(self, key: str, inv: _Invalid) -> None:
        super().__init__(inv.problem)
        self.key = key
        self.inv = inv


def _match(value: Any) -> LadderMatch:
    fix = ('Write e.g. match = { currency = "EUR", amount_min = 100000 } (keys: '
           f"{', '.join(_MATCH_KEYS)}; at least one).")
    if not isinstance(value, dict) or not value:
        raise _Invalid("must be a non-empty table (a ladder matching everything would hide the default ladder)",
                       fix, value=value)
    for key in value:
        if key not in _MATCH_KEYS:
            close = ["tags_any"] if key in ("tag", "tags") else difflib.get_close_matches(key, _MATCH_KEYS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise _MatchInvalid(key, _Invalid(f"is not a known key.{hint}", fix, show_value=False))
    currency: tuple[str, ...] = ()
    if "currency" in value:
        try:
            currency = _strings(value["currency"], 'Write currency = "EUR" or ["EUR", "CHF"] (ISO 4217 codes).',
                                upper=True)
            if any(not re.fullmatch(r"[A-Z]{3}", c) for c in currency):
                raise _Invalid("must be ISO 4217 codes of three letters", 'Write e.g. currency = ["EUR", "CHF"].',
                               value=value["currency"])
        except _Invalid as inv:
            raise _MatchInvalid("currency", inv) from None
    bounds: dict[str, int | None] = {}
    for key in ("amount_min", "amount_max"):
        try:
            bounds[key] = _amount(value[key], key) if key in value else None
        except _Invalid as inv:
            raise _MatchInvalid(key, inv) from None
    lo, hi = bounds["amount_min"], bounds["amount_max"]
    if lo is not None and hi is not None and lo >= hi:
        raise _Invalid("has amount_min >= amount_max: no invoice could match",
                       "Write amount_min below amount_max (amount_min <= amount < amount_max).", value=value)
    try:
        columns = _columns(value["column"]) if "column" in value else ()
    except _Invalid as inv:
        raise _MatchInvalid("column", inv) from None
    try:
        country = _countries(value["country"]) if "country" in value else ()
    except _Invalid as inv:
        raise _MatchInvalid("country", inv) from None
    try:
        tags_any = _tags(value["tags_any"]) if "tags_any" in value else ()
    except _Invalid as inv:
        raise _MatchInvalid("tags_any", inv) from None
    return LadderMatch(currency=currency, amount_min=lo, amount_max=hi, columns=columns, country=country,
                       tags_any=tags_any)


def _countries(value: Any) -> tuple[str, ...]:
    fix = 'Write country = "US" or ["US", "CA"] (ISO 3166-1 alpha-2 codes).'
    out = []
    for code in _strings(value, fix):
        checked, reason = check_country(code)
        if checked is None:
            raise _Invalid(f"holds {code!r}, which {reason}", fix, value=value)
        out.append(checked)
    return tuple(out)


def _tags(value: Any) -> tuple[str, ...]:
    fix = 'Write tags_any = "enterprise" or ["enterprise", "vip"] (lower-case letters, digits, -, _ or .).'
    items = _strings(value, fix)
    text, reason = check_tags(items)
    if text is None:
        raise _Invalid(reason or "is not a list of tags", fix, value=value)
    return tuple(sorted(tag_set(text)))


def _calendar_key(problem: str, table: str) -> str | None:
    """The key of a ``calendar`` table a problem names (``<table>country = ...`` -> ``country``), for its line."""
    m = re.match(r"(\w+)", problem.removeprefix(table))
    return m.group(1) if m else None


def ladder_defs(value: Any, *, source: str = "<dict>", base_dir: Path | None = None,
                text: str | None = None) -> tuple[LadderDef, ...]:
    """Validate the ``[[ladders]]`` array of tables into :class:`LadderDef` values, in file order.

    A relative ``templates`` folder is resolved against ``base_dir`` when given and must exist. ``text``: the
    file's text, to name the line of each problem (:class:`.ladder_lines.LadderLines`).

    Raises:
        ConfigError: every problem at once, each naming its line (``line 12: ``, with ``text``), ``[[ladders]][N]``
            (1-based), its name and the fix.
    """
    lines = LadderLines(text)

    def at(n: int, problem: str, key: str | None = None, sub: str | None = None) -> str:
        line = lines.line(n, key, sub)
        return problem if line is None else f"line {line}: {problem}"

    if isinstance(value, tuple) and all(isinstance(d, LadderDef) for d in value):
        return value  # already validated (Policy(ladders=...) built from ladder_defs' result)
    if not isinstance(value, list):
        raise ConfigError(f"{source}: ladders = {_show(value)} must be an array of tables. Write each ladder as a "
                          "[[ladders]] header followed by its keys.")
    problems: list[str] = []
    out: list[LadderDef] = []
    seen: set[str] = set()
    for n, table in enumerate(value, start=1):
        where = f"[[ladders]][{n}]"
        if not isinstance(table, dict):
            problems.append(at(n, f"{where} must be a table. Write a [[ladders]] header followed by its keys."))
            continue
        name = table.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == DEFAULT_LADDER or name in seen:
            why = ("is missing" if name is None else "is taken by an earlier ladder" if name in seen
                   else "is the name of the top-level settings" if name == DEFAULT_LADDER
                   else "must be 1-40 lower-case letters, digits, - or _")
            problems.append(at(n, f"{where} name{'' if name is None else ' = ' + _show(name)} {why}. Write e.g. "
                               'name = "enterprise", unique in the file and not "default".', "name"))
            continue
        seen.add(name)
        where = f"{where} ({name})"
        if "match" not in table:
            problems.append(at(n, f"{where} has no match table. Write e.g. match = {{ currency = \"EUR\" }}."))
        overrides: list[tuple[str, Any]] = []
        rule = LadderMatch()
        for key, raw in table.items():
            if key == "name":
                continue
            try:
                if key == "match":
                    rule = _match(raw)
                    continue
                if key == "stage":  # escalation per stage: its own module checks it
                    found, bad = escalation_config(raw, where=f"{where} stage.".__add__, table=f"{where} stage")
                    problems += bad
                    overrides.append(("escalation", found))
                    continue
                if key == "calendar":  # the ladder's own business calendar: [calendar]'s keys and checks
                    if not isinstance(raw, dict):
                        problems.append(at(n, f"{where} calendar = {_show(raw)} must be a table. Write e.g. calendar "
                                           '= { country = "DE", subdivision = "BY" } ([calendar]\'s keys).', key))
                        continue
                    found_cal, bad_cal = calendar_problems(raw, table=f"{where} calendar.")
                    problems += [at(n, p, key, _calendar_key(p, f"{where} calendar.")) for p in bad_cal]
                    if found_cal is not None:
                        overrides.append(("calendar", found_cal))
                    continue
                if key not in OVERRIDES:
                    problems.append(at(n, _unknown_key(f"{where} {key}", key, ["name", "match", *OVERRIDES]), key))
                    continue
                value_ = _CHECKS[OVERRIDES[key]](raw)
            except _MatchInvalid as bad:
                problems.append(at(n, _describe(f"{where} match.{bad.key}", bad.inv), "match", bad.key))
                continue
            except _Invalid as inv:
                problems.append(at(n, _describe(f"{where} {key}", inv), key))
                continue
            if key == "templates" and isinstance(value_, Path):
                value_ = value_.expanduser()
                if base_dir is not None:
                    value_ = value_ if value_.is_absolute() else Path(base_dir).absolute() / value_
                    if not value_.is_dir():
                        problems.append(at(n, f"{where} templates = {_show(raw)}: folder {str(value_)!r} does not "
                                           "exist. Create it or remove the key to use the default ladder's "
                                           "templates.", "templates"))
                        continue
            overrides.append((OVERRIDES[key], value_))
        out.append(LadderDef(name=name, match=rule, overrides=tuple(overrides)))
    if problems:
        if len(problems) == 1:
            raise ConfigError(f"{source}: {problems[0]}")
        listing = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"{source}: {len(problems)} problems:\n{listing}")
    return tuple(out)

