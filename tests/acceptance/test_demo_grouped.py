"""The demo with one notice per customer, fees and the team's final-stage notice on (found while writing the
closing note: the demo's Maildir count took every grouped notice and every internal notice for a second copy of
one (invoice, stage) and printed 127 duplicates where there were none)."""

from __future__ import annotations

from pathlib import Path

from oncebeat.reminders.policy import policy_from_dict
from oncebeat.sample.demo import run_demo

POLICY = {"reminders": {"stages": [1, 7, 14, 30], "group": "customer",
                        "notify_final": "Collections <collections@example.com>"},
          "stage": {"14": {"cc": ["owner@example.com"], "fee": {"fixed": 2500}},
                    "30": {"bcc": ["collections@example.com"], "fee": {"percent": 1.5, "cap": 5000}}}}


def test_the_demo_counts_no_duplicate_with_grouped_notices_and_internal_notices(tmp_path: Path) -> None:
    result = run_demo(workdir=tmp_path / "demo", days=40, policy=policy_from_dict(POLICY, "oncebeat.toml"))
    assert result.duplicates == 0 and result.lost == 0 and result.in_doubt == 0
    sent = result.reminders.get("sent", 0)
    # fewer customer emails than reminders sent (grouped), plus one internal notice per final stage sent
    finals = result.reminders_by_stage.get("30", {}).get("sent", 0)
    assert 0 < result.messages_delivered - finals < sent
