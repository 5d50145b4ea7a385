"""Build hook: compile the reminder emails' gettext catalogs (.po -> .mo) into the built package.

Everything else about the package is declared in pyproject.toml. A source checkout needs no compiled
catalogs (oncebeat.reminders.translations compiles a .po in memory when its .mo is missing).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LOCALE = Path("src", "oncebeat", "reminders", "locale")


class BuildWithCatalogs(build_py):  # type: ignore[misc]
    """``build_py`` that also writes ``oncebeat.mo`` beside each shipped ``oncebeat.po``."""

    def run(self) -> None:
        super().run()
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po

        for po in sorted(LOCALE.glob("*/LC_MESSAGES/*.po")):
            target = Path(self.build_lib, *po.with_suffix(".mo").parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            with po.open("rb") as source:
                catalog = read_po(source, locale=po.parts[-3], domain=po.stem)
            with target.open("wb") as out:
                write_mo(out, catalog)


setup(cmdclass={"build_py": BuildWithCatalogs})
