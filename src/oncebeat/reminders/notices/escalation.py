"""Escalation per stage: CC and BCC addresses, a late fee, and the internal notice of a final stage (issue 24.4).

In the policy file, a ``[stage.N]`` table per stage ``N`` of the default ladder, and the same ``stage`` tables
inside a ``[[ladders]]`` table for that ladder's stages::

    [reminders]
    stages = [1, 7, 14, 30]
    notify_final = "Collections <collections@example.com>"   # internal email when a final stage went out

    [stage.14]
    cc = ["Account Owner <owner@example.com>"]
    fee = { fixed = 2500 }                      # minor units of the invoice's currency: 25.00

    [stage.30]
    cc = ["owner@example.com"]
    bcc = ["collections@example.com"]           # an envelope recipient only: never in the message's headers
    fee = { percent = 1.5, cap = 5000 }         # 1.5 % of the amount due, rounded half up, at most 50.00

    [[ladders]]
    name = "enterprise"
    match = { currency = "EUR" }
    stages = [7, 21, 45]
    [ladders.stage.45]
    fee = { fixed = 10000 }

A ``[[ladders]]`` table without ``stage`` tables takes the default ladder's for the stages it shares with it; one
with ``stage`` tables takes only its own. A stage table must name a stage of its ladder. Every address is checked
when the policy is read, by the rule recipients follow (:func:`oncebeat.mail.address_problem`,
``email-validator``), and a line break or control character in any of these values is refused there, naming the
key: nothing here can reach a header unchecked.

The escalation of a stage is part of its ladder's settings, so it is pinned with the ladder version of each
invoice (:mod:`oncebeat.reminders.pinning`): editing a fee changes it for invoices that start dunning afterwards.
The fee itself is :mod:`.fees`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from ...mail import parse_address

__all__ = ["FeeRule", "StageEscalation", "check_notify_address", "escalation_config", "escalation_of",
           "escalation_from_json", "escalation_to_json", "fee_rule"]

MAX_ADDRESSES = 10  # per cc / bcc list: escalation copies, not a mailing list
MAX_FIXED_FEE = 10**12  # minor units
MAX_PERCENT = Decimal(100)
_PERCENT_PLACES = 4  # 1.2345 % at most: a rule a person wrote, not a float's noise
_STAGE_KEYS = ("cc", "bcc", "fee")
_FEE_FIX = ('Write fee = { fixed = 2500 } (minor units of the invoice\'s currency: 25.00) or '
            'fee = { percent = 1.5, cap = 5000 } (cap optional, minor units).')


@dataclass(frozen=True, kw_only=True, slots=True)
class FeeRule:
    """One stage's late fee: ``fixed`` minor units, or ``percent`` of the amount due (capped at ``cap`` minor
    units when given), in the invoice's own currency."""

    fixed: int | None = None
    percent: Decimal | None = None
    cap: int | None = None

    @property
    def basis(self) -> str:
        """``fixed`` or ``percent``."""
        return "fixed" if self.fixed is not None else "percent"

    def amount(self, amount_due: int) -> int:
        """The fee in minor units for an invoice of ``amount_due`` minor units (same currency).

        ``fixed``: that amount. ``percent``: ``amount_due * percent / 100`` rounded half up to a whole minor
        unit (``Decimal``, never ``float``), then at most ``cap``. E.g. 1.5 % of 123456 is 1851.84 -> 1852; with
        ``cap = 1000``, 1000. A negative amount due gives 0.
        """
        if self.fixed is not None:
            return self.fixed
        assert self.percent is not None
        exact = Decimal(max(0, amount_due)) * self.percent / Decimal(100)
        fee = int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))
        return min(fee, self.cap) if self.cap is not None else fee

    def describe(self) -> str:
        """The rule in words: ``fixed 2500`` or ``1.5 % (cap 5000)``; minor units."""
        if self.fixed is not None:
            return f"fixed {self.fixed}"
        return f"{self.percent} %" + (f" (cap {self.cap})" if self.cap is not None else "")

    def to_json(self) -> dict[str, Any]:
        if self.fixed is not None:
            return {"fixed": self.fixed}
        out: dict[str, Any] = {"percent": str(self.percent)}
        if self.cap is not None:
            out["cap"] = self.cap
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class StageEscalation:
    """What one stage adds to its notice: ``cc`` (in the ``Cc`` header) and ``bcc`` (envelope only) mailboxes as
    written (checked), and its late ``fee`` (None: none)."""

    stage: int
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()
    fee: FeeRule | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage}
        if self.cc:
            out["cc"] = list(self.cc)
        if self.bcc:
            out["bcc"] = list(self.bcc)
        if self.fee is not None:
            out["fee"] = self.fee.to_json()
        return out


def escalation_to_json(items: Sequence[StageEscalation]) -> list[dict[str, Any]]:
    """The JSON of a ladder's escalation (stored in its version's settings)."""
    return [e.to_json() for e in items]


def escalation_from_json(data: Iterable[Mapping[str, Any]] | None) -> tuple[StageEscalation, ...]:
    """Back from :func:`escalation_to_json` (a stored ladder version's ``escalation``; None: none)."""
    out = []
    for d in data or ():
        fee = d.get("fee")
        rule = None if fee is None else FeeRule(
            fixed=fee.get("fixed"), percent=Decimal(fee["percent"]) if "percent" in fee else None, cap=fee.get("cap"))
        out.append(StageEscalation(stage=int(d["stage"]), cc=tuple(d.get("cc", ())), bcc=tuple(d.get("bcc", ())),
                                   fee=rule))
    return tuple(out)


def escalation_of(items: Sequence[StageEscalation], stage: int) -> StageEscalation | None:
    """The escalation of ``stage`` among ``items`` (a ladder's), or None."""
    return next((e for e in items if e.stage == stage), None)


# --------------------------------------------------------------------------- validation


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in text)


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else '"' + value.encode("unicode_escape").decode("ascii") + '"'
    return text if len(text) <= 80 else text[:77] + "..."


def check_notify_address(value: Any) -> str | None:
    """``value`` as one checked mailbox text (``"collections@example.com"`` or ``"Name <addr>"``), None for None.

    Raises:
        ValueError: not a string, a line break or control character in it, or not a deliverable address (the
            message says which and how to fix it).
    """
    if value is None:
        return None
    return _address(value)


def _address(value: Any) -> str:
    fix = 'Write one address per string, e.g. "owner@example.com" or "Account Owner <owner@example.com>".'
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__}. {fix}")
    if _has_control(value):
        raise ValueError(f"contains a line break or control character (a header could be injected through it). "
                         f"Write the address on one line. {fix}")
    text = value.strip()
    if not text:
        raise ValueError(f"is empty. {fix}")
    try:
        parse_address(text, field="address", deliverable=True)
    except ValueError as exc:
        raise ValueError(f"is not a valid email address ({str(exc).removeprefix('address: ')}). {fix}") from None
    return text


def _addresses(value: Any, key: str) -> tuple[list[str], list[tuple[int | None, str]]]:
    # A string is refused, never read as a list of one: the documented form is an array, and a string passing as one
    # address hides the mistake until a list of two is written the same way.
    if isinstance(value, str):
        try:
            written = f"{key} = [{_show(_address(value))}]"
        except ValueError as exc:
            return [], [(None, f"= {_show(value)} is a string: {key} is an array of addresses. Write e.g. "
                               f'{key} = ["owner@example.com"] (brackets, even for one address).'),
                        (None, f"= {_show(value)} {exc}")]
        return [], [(None, f"= {_show(value)} is a string: {key} is an array of addresses, even for one. Write "
                           f"{written}.")]
    items = value
    if not isinstance(items, list):
        return [], [(None, f"must be an array of strings, got {type(value).__name__}. Write e.g. "
                           f'{key} = ["owner@example.com"].')]
    if len(items) > MAX_ADDRESSES:
        return [], [(None, f"lists {len(items)} addresses; at most {MAX_ADDRESSES}. Send to a mailing list "
                           "address instead.")]
    out: list[str] = []
    problems: list[tuple[int | None, str]] = []
    for n, item in enumerate(items):
        try:
            out.append(_address(item))
        except ValueError as exc:
            problems.append((n, f"= {_show(item)} {exc}"))
    return out, problems


def fee_rule(value: Any) -> FeeRule:
    """A checked :class:`FeeRule` from its TOML table (``{fixed = 2500}`` or ``{percent = 1.5, cap = 5000}``).

    Raises:
        ValueError: the problem and the fix (an unknown key, both or neither of fixed and percent, a bound).
    """
    if not isinstance(value, dict):
        raise ValueError(f"must be a table, got {type(value).__name__}. {_FEE_FIX}")
    unknown = set(value) - {"fixed", "percent", "cap"}
    if unknown:
        raise ValueError(f"has unknown key(s) {', '.join(sorted(unknown))}. {_FEE_FIX}")
    if ("fixed" in value) == ("percent" in value):
        raise ValueError(f"must have exactly one of fixed and percent. {_FEE_FIX}")
    if "fixed" in value:
        if "cap" in value:
            raise ValueError(f"has a cap with a fixed fee (a cap bounds a percentage). {_FEE_FIX}")
        return FeeRule(fixed=_minor(value["fixed"], "fixed"))
    raw = value["percent"]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"percent = {_show(raw)} must be a number, e.g. 1.5. {_FEE_FIX}")
    try:
        percent = Decimal(str(raw))  # the decimal as written (1.5), not the float's binary value
    except InvalidOperation:
        raise ValueError(f"percent = {_show(raw)} must be a number, e.g. 1.5. {_FEE_FIX}") from None
    if not Decimal(0) < percent <= MAX_PERCENT or not percent.is_finite():
        raise ValueError(f"percent = {raw} must be above 0 and at most 100. {_FEE_FIX}")
    if -percent.as_tuple().exponent > _PERCENT_PLACES:  # type: ignore[operator]
        raise ValueError(f"percent = {raw} has more than {_PERCENT_PLACES} decimals. {_FEE_FIX}")
    cap = _minor(value["cap"], "cap") if "cap" in value else None
    return FeeRule(percent=percent.normalize() if percent == percent.to_integral() else percent, cap=cap)


def _minor(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} = {_show(value)} must be a whole number of minor units (2500 for 25.00). "
                         f"{_FEE_FIX}")
    if not 0 < value <= MAX_FIXED_FEE:
        raise ValueError(f"{key} = {value} must be from 1 to {MAX_FIXED_FEE} minor units. {_FEE_FIX}")
    return value


def escalation_config(value: Any, *, where: Callable[[str], str],
                      table: str = "[stage]") -> tuple[tuple[StageEscalation, ...], list[str]]:
    """Check the ``stage`` tables (``{"30": {"cc": [...], "bcc": [...], "fee": {...}}}``) of one ladder.

    ``where(stage_key)`` names a stage table in messages (``[stage.30]`` or ``[[ladders]][1] (enterprise)
    stage.30``), ``table`` the whole (``[stage]``). Returns the escalations in stage order and the problems
    (each naming the table, the key with its index, the value and the fix); the escalations are complete only
    when there are no problems. Whether each stage is one of the ladder's is checked by the policy
    (:func:`stage_problems`).
    """
    if isinstance(value, tuple) and all(isinstance(e, StageEscalation) for e in value):
        return value, []  # already checked
    if not isinstance(value, dict):
        return (), [f"{table} must be tables, one per stage. Write e.g. [stage.30] followed by cc, bcc or fee."]
    out: list[StageEscalation] = []
    problems: list[str] = []
    for key, table in value.items():
        here = where(str(key))
        try:
            stage = int(str(key))
        except ValueError:
            problems.append(f"{here}: {key!r} is not a stage number. Name the table by a stage of the ladder, e.g. "
                            "[stage.30] or [stage.-3].")
            continue
        if not isinstance(table, dict) or not table:
            problems.append(f"{here} must be a table with cc, bcc or fee. Write e.g. [stage.{stage}] followed by "
                            'fee = { fixed = 2500 }.')
            continue
        lists: dict[str, tuple[str, ...]] = {"cc": (), "bcc": ()}
        rule: FeeRule | None = None
        for k, raw in table.items():
            if k not in _STAGE_KEYS:
                problems.append(f"{here} {k} is not a known key. Allowed keys: {', '.join(_STAGE_KEYS)}.")
            elif k == "fee":
                try:
                    rule = fee_rule(raw)
                except ValueError as exc:
                    problems.append(f"{here} fee {exc}")
            else:
                found, bad = _addresses(raw, k)
                problems += [f"{here} {k}" + (f"[{n}]" if n is not None else "") + f" {why}" for n, why in bad]
                lists[k] = tuple(found)
        out.append(StageEscalation(stage=stage, cc=lists["cc"], bcc=lists["bcc"], fee=rule))
    return tuple(sorted(out, key=lambda e: e.stage)), problems


def stage_problems(items: Sequence[StageEscalation], stages: Sequence[int], *, where: Callable[[str], str],
                   ladder: str) -> list[str]:
    """A problem for each of ``items`` whose stage is not one of ``stages`` (its ladder's)."""
    return [f"{where(str(e.stage))} names stage {e.stage}, which {ladder} stages {list(stages)} do not have. "
            "Name a stage of that list, or add the stage to it." for e in items if e.stage not in stages]
