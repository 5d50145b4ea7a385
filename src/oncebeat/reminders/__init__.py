"""Overdue-invoice reminders (dunning), built only on oncebeat's public engine API.

Modules: ``model`` (values), ``policy`` (oncebeat.toml), ``importing`` (CSV),
``book`` (seeded and Chinook invoice books), ``render`` (Jinja2 + Babel),
``jobs`` (the scan and send tasks), ``service`` (database operations and reports),
``demo`` (the main job, end to end).
"""
