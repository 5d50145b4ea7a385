"""The Mailer's connection pool against a relay that caps connections per client (issue 26 item 3).

A real aiosmtpd sink greets every connection beyond 4 open at once with ``421 too many connections``: the
pool shrinks to the 4 the relay took, each refused send raises ConnectionCapped (a delay, never an outage nor
a failure) and goes out over a kept connection, and the pool grows back after ``regrow_after`` without a
refusal.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oncebeat.errors import ConnectionCapped, MailError, TransientMailError
from oncebeat.mail import Mailer, MailSink, build_message, make_message_id, read_maildir


def message(n: int):  # type: ignore[no-untyped-def]
    return build_message(sender="Billing <billing@example.com>", to=f"c{n}@example.com", subject=f"Reminder {n}",
                         text=f"Reminder number {n}\n", html=f"<p>Reminder {n}</p>",
                         message_id=make_message_id(f"reminder:{n}:1", "example.com"),
                         date=datetime(2026, 3, 9, 8, 0, tzinfo=UTC))


@pytest.fixture
def capped_sink(tmp_path: Path) -> Iterator[MailSink]:
    with MailSink(tmp_path / "mail") as sink:
        sink.faults.cap_connections(4)
        yield sink


def send_all(mailer: Mailer, numbers: list[int], threads: int) -> tuple[Counter[str], list[BaseException]]:
    """Send each message from ``threads`` threads, retrying a ConnectionCapped one; count what each raised."""
    outcomes: Counter[str] = Counter()
    other: list[BaseException] = []
    lock = threading.Lock()
    todo = list(numbers)

    def run() -> None:
        while True:
            with lock:
                if not todo:
                    return
                n = todo.pop()
            while True:
                try:
                    mailer.send(message(n))
                except ConnectionCapped:
                    with lock:
                        outcomes["capped"] += 1
                    time.sleep(0.02)
                    continue
                except MailError as exc:
                    with lock:
                        other.append(exc)
                    break
                with lock:
                    outcomes["sent"] += 1
                break

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    return outcomes, other


def test_a_relay_refusing_a_fifth_connection_shrinks_the_pool_and_every_message_goes_out_once(
        capped_sink: MailSink) -> None:
    with Mailer(capped_sink.url, connections=16, regrow_after=3600) as mailer:
        assert mailer.pool_size == 16
        outcomes, other = send_all(mailer, list(range(120)), threads=16)
        assert other == [], "a refused connection is never an outage nor a failure"
        assert outcomes["sent"] == 120
        assert outcomes["capped"] >= 1 and capped_sink.counters().capped == outcomes["capped"]
        assert mailer.pool_size <= 4
        connections_before = capped_sink.connections
        outcomes, other = send_all(mailer, list(range(120, 180)), threads=16)  # the shrunk pool: no refusal
        assert other == [] and outcomes == Counter({"sent": 60})
        assert capped_sink.connections == connections_before, "the kept connections were reused"
    delivered = Counter(m.message_id for m in read_maildir(capped_sink.maildir))
    assert len(delivered) == 180 and set(delivered.values()) == {1}


def test_the_shrunk_pool_grows_back_one_connection_per_quiet_period(capped_sink: MailSink) -> None:
    # A quiet period of 1.5 s, not less: on a loaded machine (load 20 seen) sending the 40 took longer than a
    # 0.3 s period after the last refusal, so the pool regrew to 5 before the first assertion looked.
    with Mailer(capped_sink.url, connections=8, regrow_after=1.5) as mailer:
        send_all(mailer, list(range(40)), threads=8)
        shrunk = mailer.pool_size
        assert shrunk <= 4
        capped_sink.faults.cap_connections(None)
        time.sleep(1.6)
        mailer.send(message(100))
        assert mailer.pool_size == shrunk + 1
        mailer.send(message(101))
        assert mailer.pool_size == shrunk + 1  # not before another quiet period
        time.sleep(1.6)
        mailer.send(message(102))
        assert mailer.pool_size == shrunk + 2


def test_a_refusal_with_no_other_connection_open_is_an_outage_not_a_cap(tmp_path: Path) -> None:
    with MailSink(tmp_path / "mail") as sink, Mailer(sink.url, connections=4) as mailer:
        sink.faults.cap_connections(1)
        with Mailer(sink.url) as other_process:  # another process holds the one connection the relay allows
            other_process.send(message(1))
            with pytest.raises(TransientMailError) as refused:
                mailer.send(message(2))
            assert not isinstance(refused.value, ConnectionCapped)
            assert refused.value.code == 421 and refused.value.stage == "connect"  # type: ignore[attr-defined]
            assert mailer.pool_size == 4


def test_mailsink_max_connections_greets_one_more_with_421(tmp_path: Path) -> None:
    import io
    import re
    import smtplib

    from oncebeat.mail import serve_forever

    out, stop = io.StringIO(), threading.Event()
    server = threading.Thread(target=serve_forever, args=(tmp_path / "mail", "127.0.0.1", 0),
                              kwargs={"stop": stop, "out": out, "max_connections": 1})
    server.start()
    try:
        deadline = time.monotonic() + 10
        while not (found := re.search(r"smtp://127\.0\.0\.1:(\d+)", out.getvalue())):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        port = int(found.group(1))
        with smtplib.SMTP("127.0.0.1", port, timeout=5) as first:
            first.ehlo()
            with pytest.raises(smtplib.SMTPConnectError) as refused:
                smtplib.SMTP("127.0.0.1", port, timeout=5)
            assert refused.value.smtp_code == 421
    finally:
        stop.set()
        server.join(10)
    assert "2 connections (1 refused over the cap of 1)" in out.getvalue()
