"""A mail outage is a delay, not a failure (issue 9 item 7), on both backends, through a real aiosmtpd server.

The SMTP server refuses connections, answers 421, or refuses the login for several minutes of (simulated)
time, then recovers: every reminder due then ends ``sent`` exactly once, and its send job used none of its
attempt budget on the outage. An outage longer than ``[delivery] outage_retry`` ends the reminder ``failed``;
``doctor`` reports failed reminders and those waiting out an outage for more than an hour as errors, ``check``
exits 3, and ``oncebeat reminders retry --failed`` puts failed ones back (never a sent or in-doubt one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.cli import cli
from oncebeat.doctor import run_doctor
from oncebeat.errors import ConfigError
from oncebeat.mail import Mailer, MailSink
from oncebeat.reminders.model import Customer
from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.reminders.service import SEND_MAX_ATTEMPTS
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

OUTAGE = timedelta(minutes=10)  # longer than the old budget: 8 attempts over about 265 s


@pytest.fixture
def make_harness(store: Store, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[tuple[Harness, MailSink]] = []

    def make(policy: Policy | None = None, credentials: dict[str, str] | None = None) -> Harness:
        sink = MailSink(tmp_path / "maildir", credentials=credentials).start() if credentials else \
            maildir_sink(tmp_path)
        h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                    policy=policy or Policy())
        made.append((h, sink))
        return h

    yield make
    for h, sink in made:
        h.close()
        if sink.running:
            sink.stop()


def three_invoices(h: Harness) -> None:
    h.add_invoices(*(invoice(f"INV-{n}", date(2026, 3, 1), email=f"c{n}@example.com") for n in (1, 2, 3)),
                   customers=tuple(Customer(email=f"c{n}@example.com", name=f"Customer {n}") for n in (1, 2, 3)))


def run_for(h: Harness, span: timedelta, step: float = 15.0) -> None:
    end = h.clock.now() + span
    worker = h.new_worker()
    while h.clock.now() < end:
        worker.drain()
        h.clock.advance(step)
    worker.drain()


def send_jobs(h: Harness) -> list[dict[str, Any]]:
    return h.store.read("list_jobs", state=None, task="reminders.send", limit=100)


def break_server(h: Harness, kind: str) -> Callable[[], None]:
    """Start an outage of ``kind``; return the function that ends it."""
    if kind == "refused":  # nothing listens on the port
        h.sink.stop()
        return lambda: h.sink.start()
    if kind == "421":
        h.sink.faults.fail_next(10_000, code=421, text="4.3.2 service not available, closing channel")
        return h.sink.faults.clear
    assert kind == "auth"  # the server's password was rotated; SMTP_URL still has the old one
    assert h.sink.credentials is not None
    h.sink.credentials["billing"] = "new-secret"
    return lambda: h.sink.credentials.__setitem__("billing", "old-secret")  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["refused", "421", "auth"])
def test_outage_then_recovery_sends_each_reminder_once_without_using_attempts(
        make_harness: Callable[..., Harness], kind: str) -> None:
    h = make_harness(credentials={"billing": "old-secret"} if kind == "auth" else None)
    if kind == "auth":
        h.mailer.close()
        h.mailer = h.service.mailer = Mailer(f"smtp://billing:old-secret@127.0.0.1:{h.sink.port}")
    three_invoices(h)
    recover = break_server(h, kind)
    h.tick_to(FIRST_FIRE)
    run_for(h, OUTAGE, step=5.0)
    during = h.reminders()
    assert [r["state"] for r in during] == ["pending"] * 3
    assert all(r["deferred_since"] is not None and "mail outage" in r["reason"] for r in during)
    tries = [j["attempt"] for j in send_jobs(h)]
    assert min(tries) > SEND_MAX_ATTEMPTS  # more tries than the old budget, none of them used it up
    recover()
    run_for(h, timedelta(minutes=10), step=30.0)
    rows = h.reminders()
    assert [r["state"] for r in rows] == ["sent"] * 3
    delivered = Counter(m.headers["X-Oncebeat-Invoice"] for m in h.messages())
    assert delivered == {"INV-1": 1, "INV-2": 1, "INV-3": 1}
    for job in send_jobs(h):
        assert job["state"] == "completed"
        assert job["max_attempts"] - job["attempt"] == SEND_MAX_ATTEMPTS - 1  # the budget is untouched
        assert {e["kind"] for e in job["errors"]} == {"snooze"}
    print(f"{kind}: {max(j['attempt'] for j in send_jobs(h)) - 1} snoozed tries over {OUTAGE}, each reminder sent once")


def test_a_recipient_5xx_still_fails_at_once(make_harness: Callable[..., Harness]) -> None:
    h = make_harness()
    three_invoices(h)
    h.sink.faults.reject_recipient("c2@example.com", code=550, text="5.1.1 no such user")
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    states = {r["number"]: (r["state"], r["reason"]) for r in h.reminders()}
    assert states["INV-2"][0] == "failed" and "550" in states["INV-2"][1]
    assert states["INV-1"][0] == states["INV-3"][0] == "sent"


def test_outage_longer_than_outage_retry_fails_is_reported_and_retried(
        make_harness: Callable[..., Harness], db_url: str, tmp_path: Path) -> None:
    h = make_harness(policy=Policy(outage_retry="2h"))  # type: ignore[arg-type]  # validated into seconds
    h.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    assert [r["state"] for r in h.reminders()] == ["sent"]  # sent before the outage: never retried
    h.add_invoices(invoice("INV-2", date(2026, 3, 2)))
    h.sink.stop()
    h.tick_to(FIRST_FIRE + timedelta(days=1))
    run_for(h, timedelta(minutes=90), step=300.0)
    report = run_doctor(h.store, now=h.clock.now())
    waiting = [f for f in report.findings if f.code == "undelivered"]
    assert [f.severity for f in waiting] == ["error"]
    assert "waiting out a mail outage for more than 1 h" in waiting[0].summary and "outage_retry" in waiting[0].fix
    assert not [f for f in report.findings if f.code == "lost"]  # reported once, as undelivered

    run_for(h, timedelta(minutes=45), step=300.0)
    by_number = {r["number"]: r for r in h.reminders()}
    assert by_number["INV-2"]["state"] == "failed"
    reason = by_number["INV-2"]["reason"]
    assert reason.startswith("gave up after 2h of mail outage (outage_retry 2h): SMTP 127.0.0.1"), reason
    report = run_doctor(h.store, now=h.clock.now())
    (failed,) = [f for f in report.findings if f.code == "undelivered"]
    assert failed.severity == "error" and "1 reminder failed" in failed.summary
    assert "oncebeat reminders retry --failed" in failed.fix and report.exit_code == 1
    assert check_deployment(h.store, h.app, h.policy, maildir=None).exit_code == 3

    h.sink.start()
    config = tmp_path / "oncebeat.toml"
    config.write_text('[delivery]\noutage_retry = "2h"\n')
    result = CliRunner().invoke(cli, ["reminders", "retry", "--failed", "--db", db_url, "--config", str(config)])
    assert result.exit_code == 0, result.output
    rid = by_number["INV-2"]["id"]
    assert result.output.startswith(f"1 failed reminder(s) put back to pending with a send job: {rid}")
    again = CliRunner().invoke(cli, ["reminders", "retry", "--failed", "--db", db_url, "--config", str(config)])
    assert again.output.startswith("0 failed reminder(s)")
    events = h.store.read("list_events", subject=None, kind="reminders.retried", since=FIRST_FIRE - timedelta(days=1))
    assert [e["detail"]["count"] for e in events] == [1, 0]
    h.clock.set(max(h.clock.now(), _now_utc()))  # the CLI enqueued at the real time
    h.new_worker().drain()
    assert {r["number"]: r["state"] for r in h.reminders()} == {"INV-1": "sent", "INV-2": "sent"}
    assert Counter(m.headers["X-Oncebeat-Invoice"] for m in h.messages()) == {"INV-1": 1, "INV-2": 1}
    assert not [f for f in run_doctor(h.store, now=h.clock.now()).findings if f.code == "undelivered"]
    assert check_deployment(h.store, h.app, h.policy, maildir=None).exit_code == 0


def test_retry_failed_never_puts_back_a_reminder_whose_email_may_have_gone_out(
        make_harness: Callable[..., Harness]) -> None:
    h = make_harness()
    three_invoices(h)
    h.sink.faults.reject_recipient("c3@example.com", code=550, text="5.1.1 no such user")
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    by_number = {r["number"]: r for r in h.reminders()}
    # A reminder recorded failed although its effect is done (e.g. a last attempt that broke after the send).
    with h.store.transaction() as tx:
        tx.run("finish_reminder", id=by_number["INV-1"]["id"], state="failed", reason="gave up after 8 attempts: x",
               message_id=None, sent_at=None, now=h.clock.now(), from_state="sent")
    from oncebeat.provenance import current_source

    ids = h.service.retry_failed(since=date(2026, 3, 2), source=current_source("cli"))
    assert ids == [by_number["INV-3"]["id"]]  # not INV-1 (its email went out), not INV-2 (sent)
    assert h.service.retry_failed(since=date(2026, 3, 3), source=current_source("cli")) == []
    h.sink.faults.clear()
    h.new_worker().drain()
    states = {r["number"]: r["state"] for r in h.reminders()}
    assert states == {"INV-1": "failed", "INV-2": "sent", "INV-3": "sent"}
    assert Counter(m.headers["X-Oncebeat-Invoice"] for m in h.messages()) == {"INV-1": 1, "INV-2": 1, "INV-3": 1}


def test_outage_retry_below_an_hour_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"oncebeat.toml: \[delivery\] outage_retry = \"30m\" is shorter than 1h"):
        policy_from_dict({"delivery": {"outage_retry": "30m"}}, "oncebeat.toml")
    assert policy_from_dict({"delivery": {"outage_retry": "2d"}}).outage_retry == 172800.0
    assert Policy().outage_retry == 86400.0


def _now_utc() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)
