"""The version stamped on every provenance record is the installed distribution's, not a second copy."""

from __future__ import annotations

from importlib import metadata

import oncebeat
from oncebeat.provenance import current_source


def test_the_version_comes_from_the_package_metadata() -> None:
    assert oncebeat.__version__ == metadata.version("oncebeat")
    assert current_source("cli").version == metadata.version("oncebeat")
