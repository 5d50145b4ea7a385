"""``oncebeat web``: the operator dashboard and the Prometheus ``/metrics`` endpoint.

Server-rendered pages (no JavaScript), read and admin verbs of the library only (no SQL here),
private by default: binds 127.0.0.1, every page needs a login (``ONCEBEAT_WEB_TOKEN`` for the admin,
``ONCEBEAT_WEB_VIEWER_TOKEN`` for a read-only viewer), actions need the admin and a CSRF check, the Host
header is checked, request bodies are bounded, a strict Content-Security-Policy. See
:mod:`oncebeat.web.app` and :mod:`oncebeat.web.security`.
"""

from __future__ import annotations

from .app import WebSettings, create_app

__all__ = ["WebSettings", "create_app"]
