"""The README's library example runs as written (its blocking `app.run` given a few seconds instead of a signal)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_library_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## The engine as a library\n\n```python\n(.*?)```", readme, re.S)
    assert block, "README lost its library example"
    code = block.group(1)
    blocking = "app.run(store, concurrency=4)"
    assert blocking in code
    # the real clock and worker, stopped after a few seconds instead of by a signal
    code = code.replace(blocking, "print(app.run(store, concurrency=4, stop_after=3)['processed'], 'jobs')")
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "digest for team 1" in result.stdout and "1 jobs" in result.stdout
