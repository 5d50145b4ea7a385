"""Target schedules as written: ``[[schedules]]`` in oncebeat.toml and ``oncebeat.targets.schedule`` in code.

Each bad entry is refused with the entry's number and key, the field and the fix; a password is never
accepted into the file (it would be stored with the schedule) nor shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncebeat import App
from oncebeat.errors import ConfigError
from oncebeat.reminders.policy import load_policy
from oncebeat.targets import PUSH_TASK, derived_jid, derived_uuid, effect_key, schedule, targets_app
from oncebeat.targets.config import load_target_schedules

GOOD = '''
[schedule]
cron = "0 8 * * *"
tz = "America/Chicago"

[[schedules]]
key = "overdue-reminders"
cron = "0 8 * * *"
tz = "America/Chicago"
target = "sidekiq:OverdueReminderJob"
redis = "$REDIS_URL"
queue = "default"
args = ["overdue"]
catchup_window = "2h"

[[schedules]]
key = "nightly-report"
cron = "every 15m"
tz = "UTC"
target = "celery:billing.tasks.report"
broker = "redis://127.0.0.1:6379/0"
kwargs = { full = true }

[[schedules]]
key = "tick-hook"
cron = "30 6 * * 1-5"
tz = "Europe/Paris"
target = "http:https://billing.example.test/hooks/tick"
secret_env = "ONCEBEAT_HOOK_SECRET"
'''


def test_the_reminder_policy_file_carries_target_schedules(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text(GOOD)
    policy = load_policy(path)
    assert [d.key for d in policy.schedules] == ["overdue-reminders", "nightly-report", "tick-hook"]
    sidekiq = policy.schedules[0]
    assert sidekiq.task == PUSH_TASK and sidekiq.catchup_window == 7200.0
    assert sidekiq.args == {"target": "sidekiq:OverdueReminderJob", "redis": "$REDIS_URL", "queue": "default",
                            "args": ["overdue"], "retry": True}
    assert policy.schedules[1].args["kwargs"] == {"full": True}
    assert load_target_schedules(path) == policy.schedules  # what `--app oncebeat.targets:app` runs


def test_the_targets_app_holds_the_push_task_and_the_files_schedules(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text(GOOD)
    monkeypatch.setenv("ONCEBEAT_CONFIG", str(path))
    app = targets_app()
    assert PUSH_TASK in app.tasks and sorted(app.schedules) == ["nightly-report", "overdue-reminders", "tick-hook"]


@pytest.mark.parametrize(("entry", "message"), [
    ('target = "sidekik:X"\nredis = "$R"', "target kind 'sidekik' is not known. Did you mean 'sidekiq'?"),
    ('target = "sidekiq:overdue_job"\nredis = "$R"', "is not a Ruby class name"),
    ('target = "sidekiq:X"', 'a sidekiq target needs redis (e.g. redis = "$REDIS_URL")'),
    ('target = "sidekiq:X"\nredis = "redis://:hunter22@cache:6379/0"', "holds a password"),
    ('target = "sidekiq:X"\nredis = "redis://cache:6379/5?password=hunter22"', "holds the password parameter"),
    ('target = "celery:x.y"\nbroker = "amqp://mq/?token=hunter22"', "holds the token parameter"),
    ('target = "http:https://x.test/h?secret=hunter22"\nsecret_env = "S"', "holds credentials"),
    ('target = "sidekiq:X"\nredis = "$R"\nqueu = "x"', "queu is not an option of a sidekiq target. Did you mean "
                                                       "'queue'?"),
    ('target = "celery:x.y"\nbroker = "$B"\nargs = "a"', "args = 'a' must be a list"),
    ('target = "http:ftp://x.test/h"\nsecret_env = "S"', "is not an http(s) URL"),
    ('target = "http:https://x.test/h"\nsecret_env = "abc def"', "must name an environment variable"),
    ('target = "http:https://x.test/h"\nsecret_env = "S"\nattempts = 0', "attempts = 0 must be a whole number"),
])
def test_a_bad_entry_is_refused_naming_entry_field_and_fix(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text(f'[[schedules]]\nkey = "job"\ncron = "0 8 * * *"\ntz = "UTC"\n{entry}\n')
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    text = str(caught.value)
    assert f"{path}: [[schedules]] #1 (key 'job')" in text and message in text
    assert "hunter22" not in text


def test_missing_fields_and_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[[schedules]]\nkey = "a"\ntz = "UTC"\ntarget = "sidekiq:X"\nredis = "$R"\n')
    with pytest.raises(ConfigError, match=r"#1 \(key 'a'\): cron is missing; add e.g. cron = \"0 8 \* \* \*\""):
        load_target_schedules(path)
    one = '[[schedules]]\nkey = "a"\ncron = "0 8 * * *"\ntz = "UTC"\ntarget = "sidekiq:X"\nredis = "$R"\n'
    path.write_text(one + one)
    with pytest.raises(ConfigError, match=r"#2 \(key 'a'\): key 'a' is also \[\[schedules\]\] #1"):
        load_target_schedules(path)
    path.write_text(one.replace('"UTC"', '"Europe/Berln"'))
    with pytest.raises(ConfigError, match="did you mean Europe/Berlin"):
        load_target_schedules(path)


def test_a_code_schedule_defines_a_target_too() -> None:
    app = App()
    definition = schedule(app, "overdue", "0 8 * * *", tz="America/Chicago", target="sidekiq:OverdueReminderJob",
                          redis="$REDIS_URL")
    assert app.schedules["overdue"] is definition and PUSH_TASK in app.tasks
    with pytest.raises(ConfigError, match="a celery target needs broker"):
        schedule(app, "x", "0 8 * * *", tz="UTC", target="celery:x.y")


def test_ids_derive_from_the_occurrence_alone() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    at = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    key = effect_key("overdue", at)
    assert key == "push:overdue:2026-03-02T14:00:00+00:00"
    assert effect_key("overdue", at.astimezone(timezone(timedelta(hours=-6)))) == key  # the instant, any offset
    assert derived_jid(key) == derived_jid(key) and len(derived_jid(key)) == 24
    assert derived_uuid(key) != derived_uuid(effect_key("overdue", at + timedelta(days=1)))
