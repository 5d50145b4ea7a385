"""Gettext catalogs of the reminder emails: which language a customer gets, and its translations.

The built-in templates are written in English and translated into German,
French and Spanish. Catalogs live in ``locale/<lang>/LC_MESSAGES/oncebeat.po``
beside this module; building the package compiles each to ``oncebeat.mo``
(see ``setup.py``). A source checkout without compiled files compiles the
``.po`` in memory on first use, so both paths read the same catalog.

One email, one language
-----------------------
:func:`email_locale` picks the locale an email is written in, words,
amounts and dates alike, along a chain:

1. the customer's locale (``de_AT``), when a catalog ships for it or for
   its language (``de``): the words come from that catalog and amounts and
   dates are formatted for the customer's locale (``de_AT``: "€ 1.234,50");
2. a customer locale Babel does not know but whose language it does
   (``de_XX``): that language (``de``), for words and formatting;
3. otherwise (a language without a catalog such as ``ja`` or ``ar``, a
   malformed or empty locale): the policy's ``[reminders] fallback_locale``
   (default ``en_US``) for words and formatting alike, so a Japanese
   customer gets an English email with English dates and amounts, never
   English sentences around Japanese dates.

Example::

    >>> language_of("de_AT"), language_of("pt-BR"), language_of(None)
    ('de', 'en', 'en')
    >>> str(email_locale("ja_JP", "fr_CA").locale), email_locale("ja_JP", "fr_CA").language
    ('fr_CA', 'fr')
    >>> translations("fr").gettext("Amount due")
    'Montant dû'
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.core import parse_locale
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations

__all__ = ["DEFAULT_FALLBACK_LOCALE", "DOMAIN", "LANGUAGES", "LOCALE_DIR", "SOURCE_LANGUAGE", "EmailLocale",
           "catalog_of", "catalog_path", "email_locale", "fallback_locale", "language_of", "translations"]

#: Folder holding ``<lang>/LC_MESSAGES/oncebeat.po`` (and ``.mo`` once built).
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: The gettext domain of the reminder templates.
DOMAIN = "oncebeat"
#: The language the templates are written in (no catalog needed).
SOURCE_LANGUAGE = "en"
#: Languages whose words ship with the package, the source language first.
LANGUAGES = (SOURCE_LANGUAGE, "de", "fr", "es")


#: The policy's default ``[reminders] fallback_locale``.
DEFAULT_FALLBACK_LOCALE = "en_US"


@dataclass(frozen=True, slots=True)
class EmailLocale:
    """The locale one email is written in: ``locale`` formats its amounts and dates, ``language`` is the catalog
    of its words (one of :data:`LANGUAGES`) and is always ``locale``'s own language."""

    locale: Locale
    language: str


def catalog_of(locale: Locale) -> str | None:
    """The shipped catalog that speaks ``locale``: its full identifier when one ships ("pt_BR"), else its
    language ("de" for de_AT), else ``None`` (no catalog: "ja", "ar")."""
    for name in (str(locale), locale.language):
        if name in LANGUAGES:
            return name
    return None


@lru_cache(maxsize=1024)
def _parse(value: str) -> Locale | None:
    """``value`` ("de_AT", "de-AT", "de_AT.UTF-8") as a Babel locale; one Babel does not know but whose language
    it does ("de_XX") as that language; ``None`` when malformed or unknown."""
    text = value.strip().replace("-", "_")
    try:
        return Locale.parse(text)
    except (UnknownLocaleError, ValueError, TypeError):
        pass
    try:
        language = parse_locale(text)[0]
        return Locale.parse(language)
    except (UnknownLocaleError, ValueError, TypeError):
        return None


@cache
def fallback_locale(value: str) -> EmailLocale:
    """The policy's fallback locale ("en_US", "de-DE") as an :class:`EmailLocale`.

    Raises ``ValueError`` whose message is the problem, to follow the value ("is not a locale Babel knows",
    "has no catalog"), when Babel does not know ``value`` or no catalog ships for its language: the emails
    of customers without a catalog would otherwise mix languages.
    """
    try:
        locale = Locale.parse(value.strip().replace("-", "_"))
    except (UnknownLocaleError, ValueError, TypeError, AttributeError):
        raise ValueError("is not a locale Babel knows") from None
    language = catalog_of(locale)
    if language is None:
        raise ValueError("has no catalog")
    return EmailLocale(locale, language)


def email_locale(customer_locale: str | None, fallback: str = DEFAULT_FALLBACK_LOCALE) -> EmailLocale:
    """The locale of an email to a customer with ``customer_locale`` (see the module's chain).

    ``fallback`` is the policy's ``[reminders] fallback_locale``; it raises ``ValueError`` when it has no
    catalog (see :func:`fallback_locale`). Any ``customer_locale`` is accepted, ``None`` and junk included.
    """
    if isinstance(customer_locale, str) and customer_locale.strip():
        locale = _parse(customer_locale)
        if locale is not None:
            language = catalog_of(locale)
            if language is not None:
                return EmailLocale(locale, language)
    return fallback_locale(fallback)


def language_of(locale: str | None, fallback: str = DEFAULT_FALLBACK_LOCALE) -> str:
    """The language of the words for a customer locale: "de_AT" -> "de"; without a catalog, ``fallback``'s."""
    return email_locale(locale, fallback).language


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
