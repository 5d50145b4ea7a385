"""Minor units: how many decimals a stored amount of each currency has (ISO 4217), never CLDR's display rounding.

Money is stored as an integer of minor units plus an ISO 4217 code. The number of minor units per major unit
is ISO 4217's "Minor unit" column (list one, "Current currency & funds code list"), read from the ``iso4217``
package, which ships that table (:func:`minor_digits`): USD 2, JPY 0, KWD 3, **HUF 2, IDR 2, COP 2, ALL 2,
LBP 2, IQD 3**.

CLDR (Babel's ``get_currency_precision``) is not that table: it gives the digits people usually *show*, and
for HUF, IDR, COP, ALL, LBP, IQD, AFN, IRR, KPW, LAK, MGA, MMK, SOS, SYP and YER it gives 0 (no coins in
use) where ISO 4217 and every processor (Stripe: ``amount_due`` 849150 is HUF 8,491.50) keep the minor
unit. Reading amounts with CLDR's digits refused "HUF 8491.50" and Stripe's HUF 849150 as "a fraction of the
smallest HUF unit"; it would also have stored 8491.50 rounded. So:

- parsing (CSV ``amount_due``, Stripe's ``amount_due``) and storing use :func:`minor_digits` (ISO 4217);
- display may follow CLDR's rounding, but only when it loses nothing: HUF 849100 shows as "HUF 8,491",
  HUF 849150 as "HUF 8,491.50" (:func:`oncebeat.reminders.render.format_money`).

Stripe's own exponents (its zero-decimal and three-decimal lists, and ISK, HUF, TWD, which its API expresses
with two decimals) are applied by :func:`oncebeat.reminders.stripe.stripe_minor_to_iso` before an amount
reaches this table.

Reminders migration 0010 rescales amounts stored before this rule, in the 15 currencies above, from CLDR's
digits to ISO 4217's.
"""

from __future__ import annotations

from functools import lru_cache

from babel.numbers import get_currency_precision, list_currencies

__all__ = ["iso_minor_digits", "minor_digits"]


@lru_cache(maxsize=1)
def _iso_table() -> dict[str, int]:
    """{code: exponent} of ISO 4217 list one; codes without a minor unit ("N.A.": XAU, XDR, XXX …) left out."""
    from iso4217 import Currency  # imported when first needed: building its enum takes ~0.05 s

    return {c.code: c.exponent for c in Currency if c.exponent is not None}


def iso_minor_digits(code: str) -> int | None:
    """ISO 4217's minor-unit exponent of ``code`` (upper case): 2 for USD and HUF, 0 for JPY, 3 for KWD; None when
    ISO 4217's current list has no minor unit for it (a withdrawn code such as DEM, or XAU, XXX)."""
    return _iso_table().get(code)


def minor_digits(code: str) -> int:
    """The decimals of a stored amount of ``code`` (upper case): ISO 4217's exponent (:func:`iso_minor_digits`).

    A code ISO 4217's current list does not carry but CLDR knows (a withdrawn currency such as DEM: never
    accepted by an import, but it may be stored by hand) falls back to CLDR's digits, so it can still be shown.

    Raises:
        ValueError: ``code`` is neither in ISO 4217's list nor known to CLDR.
    """
    digits = iso_minor_digits(code)
    if digits is not None:
        return digits
    if code in list_currencies():
        return int(get_currency_precision(code))
    raise ValueError(f"unknown currency {code!r}: use an upper-case ISO 4217 code such as 'USD', 'EUR' or 'JPY'")
