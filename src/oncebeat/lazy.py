"""Lazy public names for a package's ``__init__`` (PEP 562), so importing a package imports none of its modules.

Why: every ``oncebeat`` process (hundreds per test run, every worker and clock start) paid for the engine, the
mail sink's aiosmtpd and the simulator's runner whether the command used them or not (docs/benchmarks.md,
"Test suite", round 3c). The packages ``oncebeat``, ``oncebeat.mail`` and ``oncebeat.simulate`` use this one
helper; their ``TYPE_CHECKING`` imports keep the names visible to type checkers and editors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str | tuple[str, str]],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: The package's ``__name__``.
        homes: Public name -> the submodule defining it (``"queue"``), or ``(submodule, attribute)`` when the
            attribute is named differently there (``"__version__": ("provenance", "VERSION")``).
        namespace: The package's ``globals()``: a name, once imported, is stored there, so later lookups are
            plain attribute reads.

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises ``AttributeError`` for a name not in ``homes``.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (home, name) if isinstance(home, str) else home
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
