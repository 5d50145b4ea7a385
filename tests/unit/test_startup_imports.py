"""What an ``oncebeat`` process imports: what its command needs, not every library the project uses.

Every worker, clock and cron-run command is a new process, and a test run starts hundreds of them; importing the SMTP
sink's aiosmtpd and asyncio, the holidays tables or the web stack for a command that never uses them costs each one
tenths of a second of CPU. ``oncebeat``, ``oncebeat.mail`` and ``oncebeat.simulate`` look their names up on first
use (PEP 562), reading a Maildir does not import the sink, and holidays, iso4217 and email_validator are imported
where they are used. These tests run real commands in new processes and read ``sys.modules`` as they exit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import oncebeat
import oncebeat.mail
import oncebeat.simulate

# Libraries (and engine modules) that only some commands need.
SINK = {"aiosmtpd", "asyncio"}
CALENDAR = {"holidays"}
WEB = {"starlette", "uvicorn", "prometheus_client"}
LATE = {"email_validator", "iso4217"}
ENGINE = {"oncebeat.app", "oncebeat.clock", "oncebeat.worker", "oncebeat.queue", "oncebeat.effects", "oncebeat.store"}

_RUN = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["oncebeat", *sys.argv[2:]]
from oncebeat.cli import main
main()
"""


def _imported(tmp_path: Path, *args: str) -> set[str]:
    """The modules (and their top-level packages) loaded when ``oncebeat ARGS`` exits; it must exit 0."""
    out = tmp_path / "modules.json"
    result = subprocess.run([sys.executable, "-c", _RUN, str(out), *args], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    names = set(json.loads(out.read_text()))
    return names | {name.partition(".")[0] for name in names}


@pytest.fixture(scope="module")
def tiny_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite database with nothing in it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('tiny')}/oncebeat.db"
    migrated = subprocess.run([sys.executable, "-m", "oncebeat.cli", "migrate", "--db", url], capture_output=True,
                              text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    return url


@pytest.mark.parametrize("args", [["--help"], ["worker", "--help"], ["check", "--help"]], ids=" ".join)
def test_help_imports_no_engine_and_no_heavy_library(tmp_path: Path, args: list[str]) -> None:
    imported = _imported(tmp_path, *args)
    assert sorted(imported & (SINK | CALENDAR | WEB | LATE | ENGINE | {"jinja2", "babel", "psycopg"})) == []


def test_check_on_a_small_database_imports_no_sink_calendar_or_web(tmp_path: Path, tiny_db: str) -> None:
    imported = _imported(tmp_path, "check", "--db", tiny_db)
    assert "oncebeat.simulate.checker" in imported, "the command did its work"
    assert sorted(imported & (SINK | CALENDAR | WEB | LATE)) == []
    assert "oncebeat.simulate.runner" not in imported


def test_doctor_imports_no_sink_or_web(tmp_path: Path, tiny_db: str) -> None:
    imported = _imported(tmp_path, "doctor", "--db", tiny_db)
    assert "oncebeat.doctor.checks" in imported, "the command did its work"
    assert sorted(imported & (SINK | WEB)) == []


def test_import_of_a_csv_imports_no_stripe_sink_or_web(tmp_path: Path, tiny_db: str) -> None:
    db = tmp_path / "oncebeat.db"
    shutil.copyfile(tiny_db.removeprefix("sqlite:///"), db)
    (tmp_path / "invoices.csv").write_text("invoice_number,customer_email,customer_name,currency,amount_due,"
                                           "issued_on,due_on\nINV-1,c1@example.test,C,USD,12.50,2026-01-01,"
                                           "2026-01-31\n", encoding="utf-8")
    imported = _imported(tmp_path, "import", "invoices.csv", "--db", f"sqlite:///{db}")
    assert "oncebeat.reminders.importing" in imported, "the command did its work"
    assert sorted(imported & (SINK | WEB | {"stripe", "requests"})) == []


def test_every_public_name_still_resolves() -> None:
    """The lazy packages export what they exported before, each name from the module that defines it."""
    for package in (oncebeat, oncebeat.mail, oncebeat.simulate):
        for name in package.__all__:
            value = getattr(package, name)
            assert value is not None, f"{package.__name__}.{name}"
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="no attribute 'missing'"):
            package.missing  # noqa: B018 - the lookup is what is tested
    from oncebeat.mail.maildir import read_maildir
    from oncebeat.mail.sink import MailSink, StoredMessage
    assert oncebeat.mail.read_maildir is read_maildir and oncebeat.mail.MailSink is MailSink
    assert oncebeat.mail.StoredMessage is StoredMessage, "the sink module still offers what reads its Maildir"


def test_the_command_lines_copies_of_engine_constants_match_the_engine() -> None:
    from oncebeat.cli_common import JOB_STATES
    from oncebeat.cli_jobs import DELETABLE_STATES
    from oncebeat.job_admin import DELETABLE_STATES as ENGINE_DELETABLE
    from oncebeat.queue import JOB_STATES as ENGINE_STATES

    assert (JOB_STATES, DELETABLE_STATES) == (ENGINE_STATES, ENGINE_DELETABLE)
