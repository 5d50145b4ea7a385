"""Calendar months, the period of every collection report: ``Month(2026, 3)`` is March 2026, written ``2026-03``.

A month's figures are taken at its last day (``end``); it is *over* on a business date after that day.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

from ...errors import OncebeatError

__all__ = ["MAX_MONTHS", "Month", "MonthError", "month_range"]

#: The longest range one report covers (50 years): a typo such as 0026-01 is refused, not computed.
MAX_MONTHS = 600
_MONTH = re.compile(r"(\d{4})-(\d{2})")


class MonthError(OncebeatError):
    """A month or a range of months that cannot be read (the message names the option and the fix)."""


@dataclass(frozen=True, order=True, slots=True)
class Month:
    """One calendar month; ordered, so ``Month(2026, 1) < Month(2026, 2)``."""

    year: int
    month: int

    @classmethod
    def of(cls, day: date) -> Month:
        return cls(day.year, day.month)

    @classmethod
    def parse(cls, text: str, what: str = "month") -> Month:
        """``YYYY-MM`` -> Month. Raises :class:`MonthError` naming ``what`` (``--from``) otherwise."""
        match = _MONTH.fullmatch(text.strip())
        if not match or not 1 <= int(match.group(2)) <= 12 or int(match.group(1)) < 1:
            raise MonthError(f"{what}: {text!r} is not a month; write it as YYYY-MM, e.g. 2026-03")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def days(self) -> int:
        """Number of calendar days (28 to 31)."""
        return calendar.monthrange(self.year, self.month)[1]

    @property
    def start(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def end(self) -> date:
        return date(self.year, self.month, self.days)

    def shift(self, months: int) -> Month:
        index = self.year * 12 + self.month - 1 + months
        return Month(index // 12, index % 12 + 1)


def month_range(first: Month, last: Month) -> list[Month]:
    """``first`` .. ``last`` inclusive, oldest first. Raises :class:`MonthError` when ``first`` is after ``last``."""
    if first > last:
        raise MonthError(f"--from {first} is after --to {last}; give the earlier month first")
    if (last.year - first.year) * 12 + last.month - first.month >= MAX_MONTHS:
        raise MonthError(f"--from {first} --to {last} spans more than {MAX_MONTHS} months; report a shorter range")
    out = [first]
    while out[-1] < last:
        out.append(out[-1].shift(1))
    return out
