"""``oncebeat web``: the operator dashboard and the Prometheus ``/metrics`` endpoint.

Server-rendered pages (no JavaScript), read and admin verbs of the library only (no SQL here),
security by default: binds 127.0.0.1, actions need ``ONCEBEAT_WEB_TOKEN`` and a CSRF check, read-only
without a token, a strict Content-Security-Policy. See :mod:`oncebeat.web.app` and
:mod:`oncebeat.web.security`.
"""

from __future__ import annotations

from .app import WebSettings, create_app

__all__ = ["WebSettings", "create_app"]
