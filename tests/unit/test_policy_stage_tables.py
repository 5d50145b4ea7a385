"""``[stage.N]`` tables in oncebeat.toml: each problem names its line, and ``cc``/``bcc`` must be arrays.

Two defects fixed with the split of the policy module (issue 27): the ``[stage.N]`` problems gave no line while the
``[[ladders]]`` ones did, and ``cc = "a@b"`` (a string, not an array) was silently read as one address.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.reminders.policy import Policy, load_policy, policy_from_dict
from oncebeat.reminders.policy.lines import StageLines


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "oncebeat.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    return str(info.value)


def test_each_stage_table_problem_names_the_line_of_its_key_or_table(tmp_path: Path) -> None:
    text = _error(tmp_path, """\
[reminders]
stages = [7, 30]

[stage.30]
# copies to the account owner
cc = ["owner@example.com", "not-an-address"]
fee = { fixed = 0 }
fees = 1

[stage."7"]
bcc = ["Collections <collections@example.com>\\r\\nBcc: eve@evil.example"]

[stage.thirty]
cc = []

[stage.14]
must = 1
""")
    assert text.startswith(f"{tmp_path / 'oncebeat.toml'}: 6 problems:"), text
    assert "  - line 6: [stage.30] cc[1] = \"not-an-address\" is not a valid email address" in text, text
    assert "  - line 7: [stage.30] fee fixed = 0 must be from 1" in text, text
    assert "  - line 8: [stage.30] fees is not a known key" in text, text
    assert "  - line 11: [stage.7] bcc[0] = " in text and "line break" in text, text  # a quoted table name
    assert "  - line 13: [stage.thirty]: 'thirty' is not a stage number" in text, text  # no key: the header's line
    assert "  - line 17: [stage.14] must is not a known key" in text, text


def test_a_stage_its_ladder_does_not_have_names_the_line_of_its_table(tmp_path: Path) -> None:
    text = _error(tmp_path, '[reminders]\nstages = [7, 30]\n\n[stage.45]\nbcc = ["x@example.com"]\n')
    assert text == (f"{tmp_path / 'oncebeat.toml'}: line 4: [stage.45] names stage 45, which [reminders] stages "
                    "[7, 30] do not have. Name a stage of that list, or add the stage to it."), text


def test_a_stage_written_inline_in_a_stage_table_names_that_line(tmp_path: Path) -> None:
    text = _error(tmp_path, '[stage]\n30 = { cc = ["bad"] }\n"7" = { fee = { percent = 0 } }\n')
    assert "  - line 2: [stage.30] cc[0] = \"bad\" is not a valid email address" in text, text
    assert "  - line 3: [stage.7] fee percent = 0 must be above 0" in text, text


def test_without_the_file_text_the_messages_name_no_line() -> None:
    with pytest.raises(ConfigError) as info:
        policy_from_dict({"stage": {"30": {"cc": ["bad"]}}}, "oncebeat.toml")
    assert str(info.value).startswith("oncebeat.toml: [stage.30] cc[0] = \"bad\""), info.value


def test_the_ladders_line_numbers_are_unchanged_beside_stage_tables(tmp_path: Path) -> None:
    text = _error(tmp_path, """\
[stage.30]
cc = ["bad"]

[[ladders]]
name = "eur"
match = { currency = "EUR" }
colapse = "next"
""")
    assert "line 2: [stage.30] cc[0]" in text and "line 7: [[ladders]][1] (eur) colapse" in text, text


@pytest.mark.parametrize("key", ["cc", "bcc"])
def test_an_address_written_as_a_string_is_refused_naming_the_key_and_the_fix(tmp_path: Path, key: str) -> None:
    text = _error(tmp_path, f'[reminders]\nstages = [7, 30]\n\n[stage.30]\n{key} = "owner@example.com"\n')
    assert text == (f'{tmp_path / "oncebeat.toml"}: line 5: [stage.30] {key} = "owner@example.com" is a string: '
                    f'{key} is an array of addresses, even for one. Write {key} = ["owner@example.com"].'), text


def test_an_address_string_is_refused_in_a_ladders_stage_table_and_in_a_policy_built_directly() -> None:
    with pytest.raises(ConfigError, match=r'\[\[ladders\]\]\[1\] \(big\) stage\.45 cc = "a@example\.com" is a '
                                          r'string: cc is an array of addresses, even for one\. Write '
                                          r'cc = \["a@example\.com"\]'):
        policy_from_dict({"ladders": [{"name": "big", "match": {"currency": "EUR"}, "stages": [7, 45],
                                       "stage": {"45": {"cc": "a@example.com"}}}]}, "oncebeat.toml")
    with pytest.raises(ConfigError, match=r"\[stage\.30\] cc = \"a@example\.com\" is a string"):
        Policy(escalation={"30": {"cc": "a@example.com"}})  # type: ignore[arg-type]


def test_a_bad_address_string_gets_both_problems_and_a_list_of_one_is_accepted(tmp_path: Path) -> None:
    text = _error(tmp_path, '[stage.30]\nbcc = "a@example.com\\nX-Evil: 1"\n')
    assert "line 2: [stage.30] bcc = \"a@example.com\\nX-Evil: 1\" is a string: bcc is an array" in text, text
    assert "line 2: [stage.30] bcc = \"a@example.com\\nX-Evil: 1\" contains a line break" in text, text
    path = tmp_path / "ok.toml"
    path.write_text('[stage.30]\ncc = ["owner@example.com"]\nbcc = ["Collections <c@example.com>"]\n',
                    encoding="utf-8")
    (stage,) = load_policy(path).escalation
    assert (stage.stage, stage.cc, stage.bcc) == (30, ("owner@example.com",), ("Collections <c@example.com>",))


def test_stage_lines_reads_headers_with_spaces_quotes_and_comments() -> None:
    lines = StageLines('# top\n[ stage . "-3" ]  # courtesy\nfee = { fixed = 1 }\n"cc" = []\n[sender]\ncc = 1\n')
    assert lines.line("-3") == 2 and lines.line("-3", "fee") == 3 and lines.line("-3", "cc") == 4
    assert lines.line("-3", "bcc") == 2  # not in the table: its header (never the [sender] line after it)
    assert lines.line("30") is None and StageLines(None).line("30") is None
    assert lines.at("[stage.-3] fee fixed = 0 ...") == "line 3: [stage.-3] fee fixed = 0 ..."
    assert lines.at("[reminders] stages ...") == "[reminders] stages ..."
