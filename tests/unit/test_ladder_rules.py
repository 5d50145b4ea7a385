"""Several ladders: the [[ladders]] tables, their validation, first-match-wins and the version content."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.ladders import LadderSettings, ladders_of, match_ladder
from oncebeat.reminders.policy import Policy, load_policy, policy_from_dict, stages_due

TOML = """
[reminders]
stages = [1, 7, 14, 30]

[sender]
from = "Billing <billing@example.com>"
company = "Example Co"

[[ladders]]
name = "enterprise"
match = { currency = ["EUR", "chf"], amount_min = 1000000 }
stages = [7, 21, 45]
spacing = "nominal"
from = "Accounts <ar@example.de>"

[[ladders]]
name = "austria"
match = { column = { name = "customer_locale", equals = ["de_AT"] } }
templates = "templates-at"
company = "Beispiel GmbH"
"""


def _fields(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"currency": "USD", "amount_due": 10_000, "invoice_number": "INV-1",
                               "customer_email": "a@example.com", "customer_name": "A", "customer_locale": "en_US",
                               "customer_tz": ""}
    return base | kw


def test_ladders_load_from_the_file_with_overrides_and_the_default_last(tmp_path: Path) -> None:
    (tmp_path / "templates-at").mkdir()
    (tmp_path / "oncebeat.toml").write_text(TOML)
    policy = load_policy(tmp_path / "oncebeat.toml")
    ladders = ladders_of(policy)
    assert [s.name for s, _ in ladders] == ["enterprise", "austria", "default"]
    enterprise, austria, default = (s for s, _ in ladders)
    assert enterprise.stages == (7, 21, 45) and enterprise.spacing == "nominal"
    assert enterprise.sender == "Accounts <ar@example.de>" and enterprise.company == "Example Co"  # inherited
    assert austria.templates == str(tmp_path.absolute() / "templates-at") and austria.stages == (1, 7, 14, 30)
    assert default.spacing == "from_sent" and default.templates is None


def test_the_first_matching_ladder_wins_and_no_match_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "templates-at").mkdir()
    (tmp_path / "oncebeat.toml").write_text(TOML)
    ladders = ladders_of(load_policy(tmp_path / "oncebeat.toml"))
    assert match_ladder(ladders, _fields(currency="EUR", amount_due=1_000_000, customer_locale="de_AT")) == "enterprise"
    assert match_ladder(ladders, _fields(currency="CHF", amount_due=2_000_000)) == "enterprise"  # codes upper-cased
    assert match_ladder(ladders, _fields(currency="EUR", amount_due=999_999, customer_locale="de_AT")) == "austria"
    assert match_ladder(ladders, _fields(currency="EUR", amount_due=999_999)) == "default"
    assert match_ladder(ladders, _fields(customer_locale="de_DE")) == "default"


def test_an_amount_band_includes_its_minimum_and_excludes_its_maximum() -> None:
    policy = policy_from_dict({"ladders": [{"name": "mid", "match": {"amount_min": 100, "amount_max": 500}}]})
    ladders = ladders_of(policy)
    assert [match_ladder(ladders, _fields(amount_due=a)) for a in (99, 100, 499, 500)] == \
        ["default", "mid", "mid", "default"]


def test_a_settings_edit_changes_the_content_hash_and_equal_settings_keep_it() -> None:
    one = ladders_of(Policy())[0][0]
    assert one.content_hash() == ladders_of(Policy())[0][0].content_hash()
    assert one.content_hash() != ladders_of(Policy(stages=(1, 7)))[0][0].content_hash()
    assert LadderSettings.from_json(one.to_json()) == one


@pytest.mark.parametrize(("ladders", "expected"), [
    ([{"match": {"currency": "EUR"}}], "[[ladders]][1] name is missing"),
    ([{"name": "default", "match": {"currency": "EUR"}}], "is the name of the top-level settings"),
    ([{"name": "a", "match": {"currency": "EUR"}}, {"name": "a", "match": {"currency": "USD"}}],
     "[[ladders]][2] name = \"a\" is taken by an earlier ladder"),
    ([{"name": "Big Ones", "match": {"currency": "EUR"}}], "must be 1-40 lower-case letters"),
    ([{"name": "a"}], "[[ladders]][1] (a) has no match table"),
    ([{"name": "a", "match": {}}], "must be a non-empty table"),
    ([{"name": "a", "match": {"curency": "EUR"}}], "Did you mean 'currency'?"),
    ([{"name": "a", "match": {"currency": "EURO"}}], "must be ISO 4217 codes"),
    ([{"name": "a", "match": {"amount_min": 10.5}}], "must be a whole number of minor units, got float"),
    ([{"name": "a", "match": {"amount_min": 500, "amount_max": 100}}], "has amount_min >= amount_max"),
    ([{"name": "a", "match": {"column": {"name": "country", "equals": "DE"}}}], "names no field a ladder can"),
    ([{"name": "a", "match": {"currency": "EUR"}, "stages": [7, 1]}], "[[ladders]][1] (a) stages"),
    ([{"name": "a", "match": {"currency": "EUR"}, "spacing": "weekly"}], "is not a spacing"),
    ([{"name": "a", "match": {"currency": "EUR"}, "send_zone": "customer"}],
     "[[ladders]][1] (a) send_zone is not a known key"),
])
def test_a_bad_ladder_is_refused_naming_the_table_the_key_and_the_fix(ladders: list[dict[str, object]],
                                                                      expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        policy_from_dict({"ladders": ladders}, "cfg.toml")
    assert str(caught.value).startswith("cfg.toml: ")
    assert expected in str(caught.value)


def test_every_problem_of_the_ladders_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        policy_from_dict({"ladders": [{"name": "a", "match": {"currency": "EURO"}, "collapse": "all"}]}, "cfg.toml")
    assert "2 problems" in str(caught.value)


def test_a_missing_ladder_templates_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "oncebeat.toml").write_text('[[ladders]]\nname = "a"\nmatch = { currency = "EUR" }\n'
                                            'templates = "nowhere"\n')
    with pytest.raises(ConfigError, match="folder .*nowhere.* does not exist"):
        load_policy(tmp_path / "oncebeat.toml")


def test_spacing_from_sent_keeps_the_gap_after_a_late_stage_and_nominal_does_not() -> None:
    due = date(2026, 3, 1)
    late = [(1, date(2026, 3, 6))]  # stage 1 went out 4 days late (an outage)
    assert stages_due((1, 7, 14), due, date(2026, 3, 8), "next", late) == []  # 6 days after stage 1: wait
    assert stages_due((1, 7, 14), due, date(2026, 3, 12), "next", late) == [7]
    assert stages_due((1, 7, 14), due, date(2026, 3, 8), "next", late, spacing="nominal") == [7]  # its own date
    assert stages_due((1, 7, 14), due, date(2026, 3, 7), "next", late, spacing="nominal") == []  # not before it


def test_the_readme_ladders_example_loads_and_matches_as_it_says(tmp_path: Path) -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### Several ladders\n.*?```toml\n(.*?)```", readme, re.S)
    assert block, "README lost its ladders example"
    (tmp_path / "templates-at").mkdir()
    (tmp_path / "oncebeat.toml").write_text(block.group(1), encoding="utf-8")
    ladders = ladders_of(load_policy(tmp_path / "oncebeat.toml"))
    assert [s.name for s, _ in ladders] == ["enterprise", "austria", "north-america-key", "germany", "default"]
    assert match_ladder(ladders, _fields(currency="CHF", amount_due=1_000_000)) == "enterprise"
    assert match_ladder(ladders, _fields(currency="EUR", amount_due=999_999, customer_locale="de_AT")) == "austria"
    assert match_ladder(ladders, _fields(customer_country="CA", customer_tags="key-account;vip")) == \
        "north-america-key"
    assert match_ladder(ladders, _fields(customer_country="MX", customer_tags="enterprise")) == "default"
    assert match_ladder(ladders, _fields(customer_country="DE")) == "germany"
    germany = next(s for s, _ in ladders if s.name == "germany")  # its own calendar and cap (ladder_calendars)
    assert germany.max_notices_per_week == 1 and germany.calendar is not None
    assert (germany.calendar.country, germany.calendar.subdivision, germany.calendar.stage_days) == ("DE", "BY",
                                                                                                     "business")
