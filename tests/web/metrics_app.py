"""A library user's app for the metrics tests: one task that sleeps a little (``--app metrics_app:app``)."""

from __future__ import annotations

import time
from typing import Any

from oncebeat import App

app = App()


@app.task("metrics_test.nap")
def nap(ctx: Any, seconds: float = 0.01) -> None:
    time.sleep(seconds)
