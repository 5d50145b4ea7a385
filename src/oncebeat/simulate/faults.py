"""Named faults for the simulator, each after the real-world cause it models, with default rates.

Rates are probabilities per opportunity (per fire instant, per crash point hit,
per SMTP delivery, per statement, per scan); ``--faults all`` turns every kind
on at its default rate, ``--faults worker-crash=0.05,db-blip`` picks some.
"""

from __future__ import annotations

import hashlib

from ..errors import ConfigError

__all__ = ["FAULTS", "keyed_draw", "parse_faults"]

FAULTS: dict[str, tuple[float, str]] = {
    "clock-restart": (0.25, "a clock process stops and restarts at, just before or just after a fire instant, "
                            "or after downtime spanning fire instants (per fire instant)"),
    "double-clock": (1.0, "two more clocks run all the time, one an old version that still has a retired schedule"),
    "leftover-trigger": (0.02, "an old cron entry runs `oncebeat trigger reminders` at arbitrary times (per hour)"),
    "worker-crash": (0.01, "a worker dies after claiming, mid-batch, after the SMTP server accepted a message but "
                           "before the effect was recorded, or after recording before completing (per crash point)"),
    "smtp-transient": (0.05, "451 replies, connections dropped before or after the final reply (per delivery)"),
    "smtp-permanent": (0.05, "550 for some recipients (per customer)"),
    "db-blip": (0.005, "a statement fails with a connection error / database is locked (per statement)"),
    "payment-race": (0.2, "an invoice is paid between the scan and its send (per scan)"),
    "late-import": (0.1, "an overdue invoice is imported mid-run, between two scans, and half of those are paid "
                         "before the next scan (per open invoice)"),
    "holds": (0.1, "holds placed and released at arbitrary times: promises to pay kept (paid before the date) "
                   "and broken, disputes opened and closed (also between a scan and its sends), customer holds "
                   "(per open invoice, and per scan for a dispute mid-send)"),
    "dst": (1.0, "schedules at 02:30 in zones whose DST transitions fall inside the run"),
    "host-tz": (1.0, "the process TZ is Pacific/Kiritimati (UTC+14), not the schedule's zone"),
    "schedule-change": (1.0, "the reminder schedule's time and zone are edited mid-run"),
    "stale-import": (1.0, "the payment import stops for 2 days mid-run: payments made meanwhile reach oncebeat when "
                          "it resumes (with [reminders] max_payment_staleness the sends wait; per run)"),
    "ladder-edit": (0.5, "the policy file's ladders are edited mid-run, and an operator applies each ladder's new "
                         "version to its open invoices (per ladder; 0: edited, never applied)"),
    "segment-move": (0.25, "a customer's locale changes mid-run, moving it to another ladder's segment (per "
                          "customer)"),
    "pause": (0.15, "an operator pauses the reminder schedule just after a fire, its run queued and not yet "
                    "claimed, and resumes it 1 to 30 hours later (per fire instant)"),
}


def parse_faults(spec: str | None) -> dict[str, float]:
    """Parse ``all``, ``none``/empty, or ``name[=rate],…`` into {name: rate}.

    Raises:
        ConfigError: unknown fault name or a rate outside [0, 1].
    """
    if not spec or spec == "none":
        return {}
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, _, rate_text = part.strip().partition("=")
        if name == "all":
            out.update({k: v[0] for k, v in FAULTS.items()})
            continue
        if name not in FAULTS:
            raise ConfigError(f"--faults: unknown fault {name!r}; known: all, {', '.join(FAULTS)}")
        try:
            rate = float(rate_text) if rate_text else FAULTS[name][0]
        except ValueError as exc:
            raise ConfigError(f"--faults: rate of {name} must be a number, not {rate_text!r}") from exc
        if not 0 <= rate <= 1:
            raise ConfigError(f"--faults: rate of {name} must be between 0 and 1")
        out[name] = rate
    return out


def keyed_draw(*key: object) -> float:
    """A uniform draw in [0, 1) fixed by ``key`` alone (its parts' ``str``, joined), not by any generator's state.

    For faults whose opportunities are frequent and incidental (``db-blip``: one per statement): a run that issues
    one statement more or fewer draws the same for every other statement, and the faults drawn from the run's
    sequential generator (crashes, SMTP faults, races) do not move with the statement count. 64 bits of BLAKE2b.
    """
    digest = hashlib.blake2b("\x1f".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64
