"""Gettext catalogs of the reminder emails: which language a customer gets, and its translations.

The built-in templates are written in English and translated into German,
French and Spanish. Catalogs live in ``locale/<lang>/LC_MESSAGES/oncebeat.po``
beside this module; building the package compiles each to ``oncebeat.mo``
(see ``setup.py``). A source checkout without compiled files compiles the
``.po`` in memory on first use, so both paths read the same catalog.

Example::

    >>> language_of("de_AT"), language_of("pt-BR"), language_of(None)
    ('de', 'en', 'en')
    >>> translations("fr").gettext("Amount due")
    'Montant dû'
"""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations

__all__ = ["DOMAIN", "LANGUAGES", "LOCALE_DIR", "SOURCE_LANGUAGE", "catalog_path", "language_of", "translations"]

#: Folder holding ``<lang>/LC_MESSAGES/oncebeat.po`` (and ``.mo`` once built).
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: The gettext domain of the reminder templates.
DOMAIN = "oncebeat"
#: The language the templates are written in (no catalog needed).
SOURCE_LANGUAGE = "en"
#: Languages whose words ship with the package, the source language first.
LANGUAGES = (SOURCE_LANGUAGE, "de", "fr", "es")


def language_of(locale: str | None) -> str:
    """The language of the words for a customer locale: "de_DE" -> "de"; unknown or unsupported -> "en"."""
    if not isinstance(locale, str) or not locale.strip():
        return SOURCE_LANGUAGE
    try:
        language = Locale.parse(locale.strip().replace("-", "_")).language
    except (UnknownLocaleError, ValueError, TypeError):
        return SOURCE_LANGUAGE
    return language if language in LANGUAGES else SOURCE_LANGUAGE


def catalog_path(language: str, suffix: str = ".po") -> Path:
    """Where the catalog of ``language`` lives: ``locale/<lang>/LC_MESSAGES/oncebeat<suffix>``."""
    return LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


@cache
def translations(language: str) -> NullTranslations:
    """The translations of ``language`` (one of :data:`LANGUAGES`); English is the identity.

    Reads the compiled ``.mo`` when the package was built, otherwise compiles
    the ``.po`` in memory. Raises ``ValueError`` for a language that does not
    ship (call :func:`language_of` first).
    """
    if language == SOURCE_LANGUAGE:
        return NullTranslations()
    if language not in LANGUAGES:
        raise ValueError(f"no catalog for language {language!r}; shipped: {', '.join(LANGUAGES)}")
    compiled = catalog_path(language, ".mo")
    if compiled.is_file() and compiled.stat().st_mtime >= catalog_path(language).stat().st_mtime:
        with compiled.open("rb") as fp:
            return Translations(fp, domain=DOMAIN)
    with catalog_path(language).open("rb") as po:
        catalog = read_po(po, locale=language, domain=DOMAIN)
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return Translations(buffer, domain=DOMAIN)
