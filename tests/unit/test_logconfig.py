"""Log lines in text and JSON go through one redaction: no password reaches either format."""

from __future__ import annotations

import json
import logging

import pytest

from oncebeat.logconfig import configure


@pytest.fixture(autouse=True)
def _restore_root() -> object:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    logging.getLogger("oncebeat.test").setLevel(logging.NOTSET)
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_password_in_a_message_an_extra_field_or_a_traceback_is_masked(fmt: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    configure("info", fmt)
    url = "postgresql://billing:hunter2@db.internal/prod"
    log = logging.getLogger("oncebeat.test")
    log.setLevel(logging.INFO)  # whatever an earlier test set on the "oncebeat" logger (simulate quiets it)
    log.info("connecting to %s", url, extra={"event": "test.connect", "target": url, "nested": {"url": url}})
    try:
        raise RuntimeError(f"cannot reach {url}")
    except RuntimeError:
        log.exception("failed")
    err = capsys.readouterr().err
    assert "hunter2" not in err and "***" in err
    if fmt == "json":
        first, second = (json.loads(line) for line in err.strip().splitlines()[:2])
        assert first["event"] == "test.connect" and first["level"] == "info" and first["logger"] == "oncebeat.test"
        assert "***" in first["target"] and "***" in first["nested"]["url"]
        assert "cannot reach" in second["exc"]


def test_unknown_levels_and_formats_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="log level must be one of debug, info, warning, error, not 'loud'"):
        configure("loud", "text")
    with pytest.raises(ValueError, match="log format must be one of text, json, not 'xml'"):
        configure("info", "xml")
