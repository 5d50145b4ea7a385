"""The reminder policy file: defaults, validation messages, paths and durations."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.policy import (
    DEFAULT_CONFIG_NAME,
    Policy,
    default_toml,
    format_duration,
    load_policy,
    parse_duration,
    policy_from_dict,
    stage_label,
    write_default_config,
)


def write(tmp_path: Path, text: str, name: str = "oncebeat.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        policy_from_dict(data, "cfg.toml")
    return str(info.value)


# --------------------------------------------------------------------------- defaults


def test_the_defaults_match_the_design():
    p = Policy()
    assert p.schedule == "0 8 * * *"
    assert p.tz == "America/Chicago"
    assert p.catchup == "latest"
    assert p.catchup_window == 86400.0
    assert p.stages == (1, 7, 14, 30)
    assert p.sender == "Billing <billing@example.com>"
    assert p.reply_to is None
    assert p.templates is None
    assert p.company == "Example Co"


def test_no_path_and_no_default_file_gives_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_policy(None) == Policy()
    assert load_policy(Path(DEFAULT_CONFIG_NAME)) == Policy()


def test_no_path_reads_the_default_file_of_the_working_folder(tmp_path, monkeypatch):
    write(tmp_path, '[schedule]\ntz = "Europe/Berlin"\n')
    monkeypatch.chdir(tmp_path)
    assert load_policy(None).tz == "Europe/Berlin"


def test_an_explicit_missing_file_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "other.toml"
    with pytest.raises(ConfigError, match="other.toml: file not found.*oncebeat init"):
        load_policy(missing)


def test_an_empty_file_gives_the_defaults(tmp_path):
    assert load_policy(write(tmp_path, "")) == Policy()


def test_the_default_toml_loads_back_to_the_defaults(tmp_path):
    assert policy_from_dict(tomllib.loads(default_toml())) == Policy()
    assert load_policy(write(tmp_path, default_toml())) == Policy()


def test_the_default_toml_documents_every_key():
    text = default_toml()
    for key in ("cron", "tz", "catchup", "catchup_window", "stages", "templates", "from", "reply_to", "company"):
        assert f"{key} = " in text
    assert text.count("\n#") > 10  # commented


def test_writing_the_default_config_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "sub" / "oncebeat.toml"
    write_default_config(path)
    assert path.read_text(encoding="utf-8") == default_toml()
    path.write_text("# mine\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="already exists.*--force"):
        write_default_config(path)
    assert path.read_text(encoding="utf-8") == "# mine\n"
    write_default_config(path, force=True)
    assert path.read_text(encoding="utf-8") == default_toml()


def test_a_full_file_is_read_into_the_policy(tmp_path):
    (tmp_path / "mail").mkdir()
    path = write(
        tmp_path,
        """
[schedule]
cron = "30 7 * * 1-5"
tz = "Europe/Berlin"
catchup = "all"
catchup_window = "2d"

[reminders]
stages = [-3, 1, 10, 45]
templates = "mail"

[sender]
from = "Acme Billing <billing@acme.test>"
reply_to = "accounts@acme.test"
company = "Acme GmbH"
""",
    )
    p = load_policy(path)
    assert p == Policy(
        schedule="30 7 * * 1-5",
        tz="Europe/Berlin",
        catchup="all",
        catchup_window=172800.0,
        stages=(-3, 1, 10, 45),
        templates=tmp_path / "mail",
        sender="Acme Billing <billing@acme.test>",
        reply_to="accounts@acme.test",
        company="Acme GmbH",
    )


# --------------------------------------------------------------------------- templates path


def test_a_relative_templates_folder_is_resolved_against_the_file_folder(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "templates").mkdir(parents=True)
    path = write(conf, '[reminders]\ntemplates = "templates"\n')
    monkeypatch.chdir(tmp_path)  # not the folder of the file
    p = load_policy(Path("conf") / "oncebeat.toml")
    assert p.templates == conf / "templates"
    assert p.templates.is_absolute()
    assert load_policy(path).templates == conf / "templates"


def test_an_absolute_templates_folder_is_kept(tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (tmp_path / "conf").mkdir()
    path = write(tmp_path / "conf", f'[reminders]\ntemplates = "{folder.as_posix()}"\n')
    assert load_policy(path).templates == folder


def test_a_missing_templates_folder_is_an_error_naming_the_key(tmp_path):
    path = write(tmp_path, '[reminders]\ntemplates = "nope"\n')
    with pytest.raises(ConfigError, match=r"\[reminders\] templates = \"nope\": folder .*nope.* does not exist"):
        load_policy(path)


# --------------------------------------------------------------------------- validation messages


def test_an_unknown_key_is_named_with_the_allowed_keys_and_a_suggestion():
    msg = error_of({"schedule": {"timezone": "UTC"}})
    assert msg.startswith("cfg.toml: [schedule] timezone is not a known key.")
    assert "Allowed keys: cron, tz, catchup, catchup_window, overlap." in msg


def test_a_misspelled_key_gets_a_did_you_mean():
    assert "Did you mean 'stages'?" in error_of({"reminders": {"stage": [1]}})


def test_an_unknown_section_is_named_with_the_allowed_sections():
    msg = error_of({"schedul": {}})
    assert "[schedul] is not a known section. Did you mean [schedule]?" in msg
    assert ("Allowed sections: [schedule], [reminders], [sender], [delivery], [retention], [source], [calendar], "
            "[attachments], [stage]." in msg)


def test_a_key_outside_its_section_says_where_it_belongs():
    assert "tz must be inside the [schedule] section" in error_of({"tz": "UTC"})


def test_a_section_that_is_not_a_table_is_an_error():
    assert "reminders = [1, 7] must be a table" in error_of({"reminders": [1, 7]})


def test_an_unknown_zone_suggests_close_matches():
    msg = error_of({"schedule": {"tz": "America/Chicgo"}})
    assert '[schedule] tz = "America/Chicgo" is not a known IANA time zone' in msg
    assert 'Did you mean "America/Chicago"' in msg


def test_a_zone_with_wrong_case_or_only_a_city_suggests_the_real_name():
    assert 'Did you mean "America/Chicago"' in error_of({"schedule": {"tz": "america/chicago"}})
    assert 'Did you mean "America/Chicago"' in error_of({"schedule": {"tz": "Chicago"}})


@pytest.mark.parametrize("zone", ["", "America", "../etc/passwd", "/etc/localtime"])
def test_malformed_zone_names_are_refused_not_crashed_on(zone):
    assert "[schedule] tz" in error_of({"schedule": {"tz": zone}})


def test_an_unknown_catchup_lists_the_choices():
    msg = error_of({"schedule": {"catchup": "Latest"}})
    assert '[schedule] catchup = "Latest" must be one of "none", "latest", "all"' in msg
    assert 'Did you mean "latest"?' in msg


def test_an_empty_or_multiline_cron_is_refused():
    assert '[schedule] cron = "  " is empty' in error_of({"schedule": {"cron": "  "}})
    assert "must be a single line" in error_of({"schedule": {"cron": "0 8 * * *\n0 9 * * *"}})
    assert "[schedule] cron" in error_of({"schedule": {"cron": 8}})


def test_the_cron_expression_is_stored_with_single_spaces():
    assert policy_from_dict({"schedule": {"cron": " 0  8 * * * "}}).schedule == "0 8 * * *"


def test_stages_out_of_order_name_the_index():
    msg = error_of({"reminders": {"stages": [1, 14, 7]}})
    assert msg.startswith("cfg.toml: [reminders] stages[2] = 7 is smaller than stages[1] = 14")
    assert "ascending order" in msg


def test_duplicate_stages_name_the_index():
    assert "[reminders] stages[2] = 7 repeats stage 7" in error_of({"reminders": {"stages": [1, 7, 7]}})


@pytest.mark.parametrize("bad", ["7", 7.0, True])
def test_a_stage_that_is_not_an_integer_names_the_index(bad):
    assert "[reminders] stages[1]" in error_of({"reminders": {"stages": [1, bad]}})


@pytest.mark.parametrize("bad", [-366, 3651])
def test_a_stage_out_of_range_names_the_index_and_the_range(bad):
    msg = error_of({"reminders": {"stages": [bad]}})
    assert f"[reminders] stages[0] = {bad} is out of range" in msg
    assert "-365 and 3650" in msg


def test_empty_stages_are_refused():
    assert "[reminders] stages = [] is empty" in error_of({"reminders": {"stages": []}})


def test_stages_that_are_not_an_array_are_refused():
    assert "[reminders] stages = 7 must be an array" in error_of({"reminders": {"stages": 7}})


def test_courtesy_stages_before_the_due_date_are_allowed():
    assert policy_from_dict({"reminders": {"stages": [-365, -3, 0, 3650]}}).stages == (-365, -3, 0, 3650)


@pytest.mark.parametrize("bad", ["billing", "a@", "@b.com", "Billing <billing@@x.com>", "a@b.com, c@d.com", "a..b@c.com", 5])
def test_a_bad_from_address_is_refused(bad):
    assert "[sender] from" in error_of({"sender": {"from": bad}})


def test_a_from_address_with_a_line_break_is_refused():
    msg = error_of({"sender": {"from": "a@b.com\r\nBcc: x@y.com"}})
    assert "[sender] from" in msg and "line break" in msg


@pytest.mark.parametrize("good", ["billing@example.com", "Billing <billing@example.com>", '"Acme, Inc." <a.b+c@mail.acme.co.uk>', "dev@localhost"])
def test_good_addresses_are_accepted(good):
    assert policy_from_dict({"sender": {"from": good, "reply_to": good}}).sender == good


def test_a_bad_reply_to_is_refused_and_an_empty_one_means_none():
    assert "[sender] reply_to" in error_of({"sender": {"reply_to": "not an address"}})
    assert policy_from_dict({"sender": {"reply_to": ""}}).reply_to is None


def test_an_empty_company_is_refused():
    assert '[sender] company = "" is empty' in error_of({"sender": {"company": ""}})


def test_the_fallback_locale_defaults_to_en_us_and_is_read_from_reminders(tmp_path):
    assert Policy().fallback_locale == "en_US"
    assert 'fallback_locale = "en_US"' in default_toml()
    path = write(tmp_path, '[reminders]\nfallback_locale = "de-AT"\n')
    assert load_policy(path).fallback_locale == "de_AT"


@pytest.mark.parametrize(("value", "problem"), [
    ("ja_JP", 'fallback_locale = "ja_JP" has no catalog'),  # its customers would get English words around 2026年3月1日
    ("ar", 'fallback_locale = "ar" has no catalog'),
    ("xx_YY", 'fallback_locale = "xx_YY" is not a locale Babel knows'),
    ("", 'fallback_locale = "" is not a locale Babel knows'),
    (7, "fallback_locale = 7 must be a locale string, got integer"),
])
def test_a_fallback_locale_without_catalog_is_refused_naming_the_key_and_the_languages(value, problem):
    msg = error_of({"reminders": {"fallback_locale": value}})
    assert f"[reminders] {problem}" in msg
    assert "(English, German, French, Spanish)" in msg and '"en_US"' in msg


def test_several_problems_are_reported_together():
    msg = error_of({"schedule": {"tz": "Nowhere/City", "catchup": "some"}, "reminders": {"stages": [2, 1]}})
    assert msg.startswith("cfg.toml: 3 problems:")
    assert "[schedule] tz" in msg and "[schedule] catchup" in msg and "[reminders] stages[1]" in msg


def test_a_toml_syntax_error_names_file_line_and_column(tmp_path):
    path = write(tmp_path, '[schedule]\ntz = "UTC"\ncatchup = latest\n')
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:3:")
    assert "TOML syntax error" in msg


def test_a_syntax_error_at_the_end_of_the_file_names_the_last_line(tmp_path):
    path = write(tmp_path, '[schedule]\ntz = "UTC')
    with pytest.raises(ConfigError, match=r"oncebeat\.toml:2:10: TOML syntax error: Unterminated string"):
        load_policy(path)


def test_a_file_that_is_not_utf8_is_an_error(tmp_path):
    path = tmp_path / "oncebeat.toml"
    path.write_bytes(b'[sender]\ncompany = "Caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_policy(path)


def test_validation_errors_from_a_file_name_the_file(tmp_path):
    path = write(tmp_path, "[reminders]\nstages = [1, 7, 14, 7]\n")
    with pytest.raises(ConfigError, match=r"oncebeat\.toml: \[reminders\] stages\[3\] = 7"):
        load_policy(path)


def test_building_a_policy_in_code_validates_and_normalizes_it():
    p = Policy(stages=[1, 2], templates="t", catchup_window="15m")  # type: ignore[arg-type]
    assert p.stages == (1, 2) and p.templates == Path("t") and p.catchup_window == 900.0
    with pytest.raises(ConfigError, match=r"Policy: stages\[1\] = 1 repeats stage 1"):
        Policy(stages=(1, 1))
    with pytest.raises(ConfigError, match="tz"):
        Policy(tz="Mars/Olympus")


def test_the_business_zone_is_available_as_a_zoneinfo():
    assert Policy(tz="Asia/Tokyo").zone.key == "Asia/Tokyo"


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(3600, 3600.0), (90.5, 90.5), ("90s", 90.0), ("15m", 900.0), ("24h", 86400.0), ("2d", 172800.0), ("1h30m", 5400.0), ("3600", 3600.0), (" 2 H ", 7200.0)],
)
def test_durations_are_read_as_seconds(raw, seconds):
    assert parse_duration(raw) == seconds
    assert policy_from_dict({"schedule": {"catchup_window": raw}}).catchup_window == seconds


@pytest.mark.parametrize("raw", ["1 week", "h", "", "-5m", "5 m s", True, [1]])
def test_bad_durations_name_the_key(raw):
    assert "[schedule] catchup_window" in error_of({"schedule": {"catchup_window": raw}})


def test_a_zero_catchup_window_points_to_catchup_none():
    assert 'catchup = "none"' in error_of({"schedule": {"catchup_window": 0}})


@pytest.mark.parametrize("seconds", [90.0, 900.0, 5400.0, 86400.0, 172800.0, 1.5, 0.0])
def test_formatted_durations_read_back_exactly(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def test_the_default_window_is_written_as_24h():
    assert format_duration(86400) == "24h"
    assert 'catchup_window = "24h"' in default_toml()


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("stage", "label"),
    [(-3, "3 days before due"), (-1, "1 day before due"), (0, "on the due date"), (1, "1 day past due"), (30, "30 days past due")],
)
def test_stage_labels_read_as_english(stage, label):
    assert stage_label(stage) == label


def test_the_overlap_policy_is_read_and_a_misspelling_gets_a_did_you_mean(tmp_path):
    assert load_policy(write(tmp_path, '[schedule]\noverlap = "skip"\n')).overlap == "skip"
    msg = error_of({"schedule": {"overlap": "Skipp"}})
    assert '[schedule] overlap = "Skipp" must be one of "allow", "skip", "buffer_one".' in msg
    assert 'Did you mean "skip"?' in msg


def test_retention_is_off_by_default_and_reads_a_duration_of_at_least_a_day():
    assert Policy().retention is None
    p = policy_from_dict({"retention": {"older_than": "90d", "cron": "15 2 * * *"}})
    assert p.retention == 90 * 86400 and p.retention_cron == "15 2 * * *"
    msg = error_of({"retention": {"older_than": "12h"}})
    assert "[retention] older_than" in msg and "shorter than a day" in msg and "30d" in msg
    assert "[retention] cron" in error_of({"retention": {"cron": "not cron"}})


def test_delivery_relay_limits_are_read_and_default_to_none() -> None:
    assert (Policy().max_per_minute, Policy().max_connections, Policy().rate_window) == (None, None, 60.0)
    policy = policy_from_dict({"delivery": {"max_per_minute": 60, "max_connections": 4, "rate_window": "5s"}})
    assert (policy.max_per_minute, policy.max_connections, policy.rate_window) == (60, 4, 5.0)


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("max_per_minute", 0, "[delivery] max_per_minute = 0 must be from 1 to 1000000. Write how many emails"),
    ("max_per_minute", "60", '[delivery] max_per_minute = "60" must be a whole number, got string'),
    ("max_per_minute", 1.5, "[delivery] max_per_minute = 1.5 must be a whole number, got"),
    ("max_connections", 0, "[delivery] max_connections = 0 must be from 1 to 1024. Write how many connections"),
    ("max_connections", True, "[delivery] max_connections = true must be a whole number, got boolean"),
    ("rate_window", "2h", '[delivery] rate_window = "2h" must be from 1s to 1h. Write a duration from 1s to 1h'),
    ("rate_window", "soon", '[delivery] rate_window = "soon" is not a duration'),
])
def test_bad_relay_limits_are_refused_naming_the_file_the_key_and_the_fix(key: str, value: object,
                                                                          problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        policy_from_dict({"delivery": {key: value}}, "oncebeat.toml")
    assert str(refused.value).startswith(f"oncebeat.toml: {problem}"), str(refused.value)


def test_a_retention_cron_without_older_than_is_refused():
    msg = error_of({"retention": {"cron": "0 2 * * *"}})
    assert "older_than is not" in msg and 'older_than = "90d"' in msg
    assert msg.startswith('cfg.toml: [retention] cron = "0 2 * * *" is set'), msg  # the file, as other problems
