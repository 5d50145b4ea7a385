"""The layer rules of README's "Development" section, checked on the source: lower layers never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "oncebeat"

# package (or top-level module) -> the oncebeat packages it must never import
ENGINE = ("app", "audit", "clock", "crashpoints", "dbtime", "effects", "errors", "idempotency", "ledger", "processes",
          "job_admin", "pauses", "provenance", "queue", "queue_limits", "ratelimit", "redact", "retention", "schedules", "schedules_report", "store",
          "telemetry", "timebase", "durations",
          "tracing", "worker")
FORBIDDEN = {
    **{name: ("reminders", "sample", "web", "cli", "simulate", "doctor", "mail") for name in ENGINE},
    "mail": ("reminders", "sample", "web", "cli", "simulate", "doctor", "clock", "worker", "queue", "effects"),
    "doctor": ("reminders", "sample", "web", "cli", "simulate"),
    # the reminder app plugs its checks into the doctor (oncebeat.reminders.doctor); the doctor never imports it
    "reminders": ("sample", "web", "cli", "simulate"),
    "sample": ("web", "cli", "simulate", "doctor"),
    "web": ("cli", "simulate"),
    "targets": ("reminders", "sample", "web", "cli", "simulate", "doctor", "mail"),
}


def _layer_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[str]:
    """Top-level oncebeat packages imported by ``path`` (absolute or relative imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth_of_file = len(path.relative_to(SRC).parts) - 1  # 0 for oncebeat/x.py, 1 for oncebeat/pkg/x.py
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("oncebeat.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.startswith("oncebeat."):
                found.add(node.module.split(".")[1])
            elif node.level and node.level - 1 == depth_of_file:  # relative to the oncebeat package itself
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found |= {a.name for a in node.names}
    return found


def _files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if _layer_of(p) in FORBIDDEN)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_imports_a_layer_above_its_own(path: Path) -> None:
    bad = _imported_packages(path) & set(FORBIDDEN[_layer_of(path)])
    assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}: see README, Development, layer rules"


def test_the_sample_package_sits_above_the_reminder_app() -> None:
    """``sample`` uses the reminder app (so the rule is not vacuous) and ``simulate`` uses ``sample``."""
    assert "reminders" in _imported_packages(SRC / "sample" / "demo.py")
    assert "sample" in _imported_packages(SRC / "simulate" / "runner.py")
    assert not (SRC / "reminders" / "demo.py").exists() and not (SRC / "reminders" / "book.py").exists()
    assert not (SRC / "workdir.py").exists()


def test_the_rule_checker_sees_relative_imports_from_a_subpackage() -> None:
    sample = SRC / "doctor" / "__init__.py"
    assert "store" in _imported_packages(sample) or "timebase" in _imported_packages(sample)
