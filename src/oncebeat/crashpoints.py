"""Crash points for fault-injection tests and the simulator: one subscriber of :mod:`oncebeat.telemetry`.

Engine code emits a telemetry event at each step where a real process could die
(after claiming a job, after an effect ran but before it was recorded, ...);
this module maps those events to named crash points. Unarmed, it does nothing. Armed in-process, it raises
:class:`SimulatedCrash` — a ``BaseException`` that the worker treats as its
own death: it abandons its jobs without completing, failing or returning
them, exactly as ``kill -9`` would. Armed through the environment
(``ONCEBEAT_CRASH_AT=name`` or ``name:N`` for the N-th hit) it kills the real
process with SIGKILL.

Points and the events they hang on: ``after_claim`` (``job.claimed``), ``mid_batch``
(``job.batch_step``), ``before_complete`` (``job.batch_done``), ``before_effect``
(``effect.requested``), ``effect_before_record`` (``effect.performed``),
``after_effect_record`` (``effect.recorded`` with state ``done``), ``effect_no_return``
(``effect.no_return``: the effect recorded its point of no return, nothing has left yet), ``done_batch``
(``effect.batch``: the done records of one or more effects that happened, about to be written together by the
process's group commit — a death there leaves every key of that write in doubt); inside an SMTP
send: ``smtp_connect`` (``mail.connecting``, before connecting), ``smtp_data`` (``mail.data``, connected,
before ``DATA``), ``smtp_after_dot`` (``mail.final_dot``, the final ``.`` of ``DATA`` sent, before the reply); inside a
push to a target (:mod:`oncebeat.targets`): ``target_ready`` (``target.ready``, connected to the broker or endpoint,
before the point of no return), ``target_sent`` (``target.sent``, the push went out; for HTTP before the reply).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import telemetry

__all__ = ["CRASH_POINTS", "POINT_OF_EVENT", "Crashpoints", "SimulatedCrash", "crashpoints"]

CRASH_POINTS = ("after_claim", "before_effect", "effect_no_return", "effect_before_record", "done_batch",
                "after_effect_record", "before_complete", "mid_batch", "smtp_connect", "smtp_data", "smtp_after_dot",
                "target_ready", "target_sent")
POINT_OF_EVENT = {"job.claimed": "after_claim", "job.batch_step": "mid_batch", "job.batch_done": "before_complete",
                  "effect.requested": "before_effect", "effect.no_return": "effect_no_return",
                  "effect.performed": "effect_before_record", "effect.batch": "done_batch",
                  "effect.recorded": "after_effect_record",
                  "mail.connecting": "smtp_connect", "mail.data": "smtp_data", "mail.final_dot": "smtp_after_dot",
                  "target.ready": "target_ready", "target.sent": "target_sent"}


class SimulatedCrash(BaseException):
    """The process 'died' at a crash point (in-process simulation of SIGKILL)."""


class Crashpoints:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, int] = {}
        self.hook: Callable[[str], bool] | None = None  # simulator: return True to crash here
        env = os.environ.get("ONCEBEAT_CRASH_AT", "")
        self._env_point, _, n = env.partition(":")
        self._env_left = int(n or "1")

    def arm(self, point: str, after: int = 1) -> None:
        """Crash at the ``after``-th next hit of ``point`` (in-process)."""
        if point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}; use one of {', '.join(CRASH_POINTS)}")
        with self._lock:
            self._armed[point] = after

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()
        self.hook = None

    def on_event(self, event: str, data: Mapping[str, Any]) -> None:
        """The telemetry subscriber: reach the crash point that ``event`` stands for."""
        if event == "effect.recorded" and data.get("state") != "done":
            return  # after_effect_record is the moment after a successful record only
        self.hit(POINT_OF_EVENT[event])

    def hit(self, point: str) -> None:
        """Die here if armed for ``point`` (SIGKILL from the environment, :class:`SimulatedCrash` in-process)."""
        if self._env_point == point:
            self._env_left -= 1
            if self._env_left <= 0:
                os.kill(os.getpid(), signal.SIGKILL)
        if self.hook is not None and self.hook(point):
            raise SimulatedCrash(point)
        if not self._armed:
            return
        with self._lock:
            left = self._armed.get(point)
            if left is None:
                return
            if left > 1:
                self._armed[point] = left - 1
                return
            del self._armed[point]
        raise SimulatedCrash(point)


crashpoints = Crashpoints()
for _event in POINT_OF_EVENT:  # SimulatedCrash is a BaseException: telemetry lets it through to the engine
    telemetry.attach(_event, crashpoints.on_event)
