"""Rendering one reminder email (subject, plain text, HTML) with Jinja2.

Template lookup
---------------
A reminder email has three parts, each rendered from its own template:
``<name>.subject.j2``, ``<name>.txt.j2`` and ``<name>.html.j2``. For a
reminder at stage ``N`` (days relative to the due date), each part is the
first file found among, in this order:

1. ``reminder_stage_<N>.<part>.j2`` in the user's templates folder
   (e.g. ``reminder_stage_14.html.j2``, ``reminder_stage_-3.txt.j2``);
2. ``reminder_stage_<N>.<part>.j2`` among the built-in templates (none ship
   today; the slot exists so the lookup is the same everywhere);
3. ``reminder_<kind>.<part>.j2`` in the user's templates folder;
4. ``reminder_<kind>.<part>.j2`` among the built-in templates,

where ``kind`` is the stage kind (:func:`template_kind`):

=============  ==========================  =============================
kind           stages                      tone
=============  ==========================  =============================
``courtesy``   ``N <= 0``                  due soon / due today
``first``      ``1 <= N <= 6``             first overdue notice
``second``     ``7 <= N <= 29``            firmer reminder
``final``      ``N >= 30``                 action required
=============  ==========================  =============================

Parts are looked up independently: a folder holding only
``reminder_first.html.j2`` changes the HTML of first notices and keeps the
built-in subject and text. The built-in bodies extend ``layout.txt.j2`` and
``layout.html.j2``, which a user folder may override as well.

Templates are read once per process (each :class:`Renderer` compiles a template on first use and Jinja's
``auto_reload`` is off): to pick up an edited template file, restart the workers.

Safety
------
The HTML environment autoescapes every value; the subject and text
environments do not (they are not HTML). Values that belong on one line
(customer name, invoice number, company) have line breaks and control
characters collapsed to a single space before they reach any template, so a
customer name cannot inject headers or fake lines; the rendered subject is
collapsed to one line as well. Undefined variables raise
(``StrictUndefined``): a typo in a template is a :class:`ConfigError`
naming the template, never a silently empty field.

Template variables
------------------
``company``, ``customer_name``, ``invoice_number``, ``currency``,
``amount`` (formatted for the customer's locale), ``amount_due`` (minor
units), ``due_date``/``issued_date`` (long dates in the customer's locale),
``due_on``/``issued_on`` (``datetime.date``), ``stage``, ``stage_label``
("7 days past due"), ``kind``, ``days_past_due`` (negative before the due
date), ``days_overdue`` (``max(0, days_past_due)``), ``days_until_due``
(``max(0, -days_past_due)``), ``days_text`` ("1 day", "7 days"),
``status_text`` ("is 7 days past due", "is due in 3 days", "is due today"),
``locale`` (the locale used), ``language`` (the language of the words:
"en", "de", "fr" or "es"), ``promise_missed`` (True in the first reminder
after a promise to pay passed unpaid) with ``promise_date`` (the promised
date, long, in the customer's locale; "" otherwise), ``late_fee`` (the stage's late fee formatted, "" when
none; :mod:`oncebeat.reminders.notices.fees`) with ``late_fee_minor`` (minor units, 0 when none) and
``total_with_fee`` (amount due plus the fee, formatted) and, in the text and HTML parts, ``subject``.
``amount``, ``due_date`` and ``issued_date`` hold no breakable space (their
spaces are U+00A0), so neither wrapping nor a mail client splits them.

Line wrapping
-------------
The ``wrap`` filter (built-in text bodies, 72 columns) breaks lines at ASCII
spaces only: never inside an amount or a date, never at a no-break space
(U+00A0, U+202F, U+2007) or next to a word joiner (U+2060), never at a
hyphen. A word longer than the line stays whole on a line of its own, so a
run of CJK text without spaces is not broken at all.

Languages
---------
The words of the built-in templates are translated with gettext catalogs
through Babel: English, German, French and Spanish ship with the package
(``reminders/locale/<lang>/LC_MESSAGES/oncebeat.po``, compiled to ``.mo``
when the package is built; a source checkout compiles them in memory on
first use). One email is in one language: the customer's locale when its
language has a catalog (``de_AT``: German words, Austrian amounts and
dates), otherwise the policy's ``[reminders] fallback_locale`` for words,
amounts and dates alike (:func:`oncebeat.reminders.translations.email_locale`
states the chain). Templates use Jinja's i18n extension: ``{% trans %}``
blocks and ``_()``/``ngettext()``. Catalog maintenance (``pybabel extract``,
``update``, ``compile``) is described in README's Development section.

Money is formatted with Babel from integer minor units and the currency's
ISO 4217 minor unit (JPY 0, USD 2, BHD 3, HUF 2: :mod:`oncebeat.reminders.money`) using ``Decimal``, never
``float``. The digits shown follow CLDR (HUF 849100 shows as "HUF 8,491") unless that would hide a minor unit
the amount has (HUF 849150 shows as "HUF 8,491.50", never rounded to 8,492).
:func:`format_money` on its own falls back to ``en_US`` for an unknown locale.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from datetime import date
from decimal import Context, Decimal, localcontext
from functools import lru_cache
from pathlib import Path
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.dates import format_date
from babel.numbers import format_currency, get_currency_precision, list_currencies
from babel.support import NullTranslations
from jinja2 import (
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    StrictUndefined,
    Template,
    TemplateError,
    nodes,
)
from jinja2.ext import InternationalizationExtension

from oncebeat.errors import ConfigError
from oncebeat.reminders.money import minor_digits
from oncebeat.reminders.money_shapes import shaped
from oncebeat.reminders.render_skeleton import Plan, analyse, probe_wrap
from oncebeat.reminders.translations import (
    DEFAULT_FALLBACK_LOCALE,
    EmailLocale,
    email_locale,
    translations,
)
from oncebeat.reminders.translations import fallback_locale as _fallback  # Renderer.__init__ has a parameter so named

__all__ = [
    "BUILTIN_TEMPLATES",
    "FALLBACK_LOCALE",
    "NO_BREAK",
    "PARTS",
    "RenderedEmail",
    "Renderer",
    "format_money",
    "is_known_currency",
    "minor_units",
    "resolve_locale",
    "template_kind",
    "template_names",
]

#: Folder of the built-in templates.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Locale of :func:`format_money` and :func:`resolve_locale` for a missing or unknown one (an email uses the
#: policy's ``[reminders] fallback_locale``, see :class:`Renderer`).
FALLBACK_LOCALE = "en_US"
#: The parts of an email, as they appear in template file names.
PARTS = ("subject", "txt", "html")


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedEmail:
    """A rendered reminder: a one-line subject, a plain-text body and an HTML body."""

    subject: str
    text: str
    html: str


# --------------------------------------------------------------------------- money and locales


@lru_cache(maxsize=1)
def _currencies() -> frozenset[str]:
    return frozenset(list_currencies())


def is_known_currency(code: str) -> bool:
    """Whether ``code`` is an upper-case ISO 4217 code known to Babel/CLDR (e.g. "USD")."""
    return isinstance(code, str) and len(code) == 3 and code.isascii() and code.isupper() and code in _currencies()


def _require_currency(currency: str) -> int:
    """The currency's ISO 4217 minor-unit digits (:func:`~oncebeat.reminders.money.minor_digits`)."""
    if not is_known_currency(currency):
        raise ValueError(f"unknown currency {currency!r}: use an upper-case ISO 4217 code such as 'USD', 'EUR' or "
                         "'JPY'")
    return minor_digits(currency)


@lru_cache(maxsize=256)
def _parse_locale(value: str) -> Locale:
    try:
        return Locale.parse(value.strip().replace("-", "_"))
    except (UnknownLocaleError, ValueError, TypeError):
        return Locale.parse(FALLBACK_LOCALE)


def resolve_locale(value: str | None) -> Locale:
    """The Babel locale for ``value`` ("de_DE", "de-DE", "fr"), or ``en_US`` when it is missing or unknown."""
    if not isinstance(value, str) or not value.strip():
        return _parse_locale(FALLBACK_LOCALE)
    return _parse_locale(value)


def format_money(amount_minor: int, currency: str, locale: str) -> str:
    """Format an amount in minor units for a locale: (123450, "EUR", "de_DE") -> "1.234,50\xa0€".

    The conversion uses the currency's ISO 4217 minor unit and ``Decimal``; the digits shown are CLDR's unless
    they would drop a minor unit the amount has ((849150, "HUF", "en_US") -> "HUF8,491.50", (849100, …) ->
    "HUF8,491"). Babel's output is kept as is, including its non-breaking spaces. An unknown
    locale falls back to ``en_US``; an unknown currency raises ``ValueError``.
    """
    return _format_money(amount_minor, currency, resolve_locale(locale))


def _format_money(amount_minor: int, currency: str, locale: Locale) -> str:
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int):
        raise TypeError(f"amount_minor must be an int of minor units, got {type(amount_minor).__name__}")
    digits = _require_currency(currency)
    shown = get_currency_precision(currency)  # CLDR's display digits: HUF 0 although ISO 4217 (and storage) says 2
    cldr = shown >= digits or amount_minor % 10 ** (digits - shown) == 0
    # Babel once per shape (currency, locale, sign, digit count), then only the digits change (money_shapes).
    return shaped(amount_minor, currency, locale, cldr, lambda: _babel_money(amount_minor, currency, locale))


def _babel_money(amount_minor: int, currency: str, locale: Locale) -> str:
    digits = minor_digits(currency)
    # Babel computes in the current decimal context: make it wide enough to stay exact.
    shown = get_currency_precision(currency)
    with localcontext(Context(prec=max(28, len(str(abs(amount_minor))) + 8))):
        value = Decimal(amount_minor).scaleb(-digits)
        if shown >= digits or amount_minor % 10 ** (digits - shown) == 0:
            return format_currency(value, currency, locale=locale)
        pattern = locale.currency_formats.get("standard")
        if pattern is None:  # pragma: no cover - every CLDR locale has a standard currency pattern
            return format_currency(value, currency, locale=locale, currency_digits=False, decimal_quantization=False)
        exact = copy.copy(pattern)
        exact.frac_prec = (digits, digits)  # all of the amount's minor units, never CLDR's rounding
        return str(exact.apply(value, locale, currency=currency, currency_digits=False))


_AMOUNT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def minor_units(amount: str | Decimal, currency: str) -> int:
    """Integer minor units of a decimal amount: ("12.50", "USD") -> 1250, ("1200", "JPY") -> 1200.

    ``amount`` is a plain decimal string (no thousands separators, no
    exponent), a ``Decimal`` or an ``int``. Raises ``ValueError`` for an
    unknown currency, a malformed or non-finite amount, or an amount with
    more (non-zero) decimals than the currency allows ("12.505" USD,
    "100.5" JPY); trailing zeros are fine ("100.00" JPY -> 100). Floats are
    refused with ``TypeError``.
    """
    digits = _require_currency(currency)
    if isinstance(amount, bool) or isinstance(amount, float):
        raise TypeError(f"amount must be a decimal string or Decimal, not {type(amount).__name__} (floats lose cents)")
    if isinstance(amount, str):
        text = amount.strip()
        if not _AMOUNT.fullmatch(text):
            raise ValueError(f"{amount!r} is not a decimal amount; write e.g. '1234.50' (no thousands separators)")
        value = Decimal(text)
    elif isinstance(amount, Decimal):
        value = amount
    elif isinstance(amount, int):
        value = Decimal(amount)
    else:
        raise TypeError(f"amount must be a decimal string or Decimal, not {type(amount).__name__}")
    if not value.is_finite():
        raise ValueError(f"{amount!r} is not a finite amount")
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    with localcontext(Context(prec=len(digit_tuple) + max(0, exponent) + digits + 4)):
        scaled = value.scaleb(digits)
        whole = scaled.to_integral_value()
        if whole != scaled:
            raise ValueError(f"{amount} has more decimals than {currency} allows ({digits})")
    return int(whole)


# --------------------------------------------------------------------------- templates


def template_kind(stage: int) -> str:
    """The template set of a stage: "courtesy" (<= 0), "first" (1-6), "second" (7-29), "final" (>= 30)."""
    if stage <= 0:
        return "courtesy"
    if stage < 7:
        return "first"
    if stage < 30:
        return "second"
    return "final"


def template_names(stage: int, part: str) -> list[str]:
    """Template names tried for ``part`` ("subject", "txt", "html") of ``stage``, most specific first."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    return [f"reminder_stage_{stage}.{part}.j2", f"reminder_{template_kind(stage)}.{part}.j2"]


#: No-break spaces: never a line break, never collapsed (``str.split()`` would split at the first three).
NO_BREAK = "\u00a0\u202f\u2007\u2060"
_BREAKING_SPACES = re.compile(f"[^\\S{NO_BREAK}]+")
#: Where ``_wrap`` may break a line: runs of ASCII whitespace, exactly textwrap's own ``_whitespace``.
_ASCII_SPACE = "\t\n\x0b\x0c\r "
_WRAP_POINTS = re.compile(f"[{_ASCII_SPACE}]+")


#: Every character of the Unicode categories Cc (C0, DEL, C1), Zl (U+2028) and Zp (U+2029): one regex instead of a
#: ``unicodedata.category`` call per character (``tests/unit/test_render.py`` checks it against every code point).
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(value: str) -> str:
    """Collapse line breaks, control characters and whitespace runs into single spaces (no-break spaces stay)."""
    return _BREAKING_SPACES.sub(" ", _CONTROL_OR_BREAK.sub(" ", str(value))).strip(" ")


@lru_cache(maxsize=4096)
def _long_date(day: date, locale: Locale) -> str:
    """``day`` in ``locale``'s long format, its spaces no-break (e.g. ``20.\u00a0Februar\u00a02026``); kept per
    (day, locale): a send renders two or three dates and a run repeats the same few dozen (Babel: ~20 µs each)."""
    return _unbreakable(format_date(day, format="long", locale=locale))


def _unbreakable(value: str) -> str:
    """``value`` (a formatted amount or date) with its ordinary spaces made no-break (U+00A0): one word."""
    return value.replace(" ", "\u00a0")


def _tidy_body(value: str) -> str:
    """Unix newlines, no trailing spaces, at most one blank line in a row, one final newline."""
    lines = [line.rstrip() for line in value.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def _days(t: NullTranslations, n: int) -> str:
    return t.ngettext("%(num)d day", "%(num)d days", n) % {"num": n}


def _status_text(t: NullTranslations, days_past_due: int) -> str:
    if days_past_due > 0:
        return t.ngettext("is %(num)d day past due", "is %(num)d days past due", days_past_due) % {
            "num": days_past_due}
    if days_past_due == 0:
        return t.gettext("is due today")
    return t.ngettext("is due in %(num)d day", "is due in %(num)d days", -days_past_due) % {"num": -days_past_due}


def _stage_label(t: NullTranslations, stage: int) -> str:
    if stage == 0:
        return t.gettext("on the due date")
    if stage < 0:
        return t.ngettext("%(num)d day before due", "%(num)d days before due", -stage) % {"num": -stage}
    return t.ngettext("%(num)d day past due", "%(num)d days past due", stage) % {"num": stage}


def _wrap(value: str, width: int = 72) -> str:
    """Wrap one paragraph of plain text at ``width`` columns, breaking only at ASCII whitespace.

    Never at a no-break space (U+00A0, U+202F, U+2007), a word joiner (U+2060) or a hyphen, so an amount
    ("72\u202f202,29\xa0€") or a date made unbreakable stays on one line; a word longer than ``width`` gets a
    line of its own. The result equals ``textwrap.fill(…, break_long_words=False, break_on_hyphens=False)``
    on the text with its ASCII whitespace runs collapsed (textwrap also breaks at ASCII whitespace only;
    ``tests/unit/test_render.py`` checks the equality), at a tenth of its cost: this runs for every paragraph
    of every reminder. (``str.split()`` is not an option: it splits at U+00A0, U+202F and U+2007.)
    """
    lines: list[str] = []
    line = ""
    for word in _WRAP_POINTS.split(str(value).strip(_ASCII_SPACE)):
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line = f"{line} {word}"
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return "\n".join(lines)


class _TransAtCompile(InternationalizationExtension):
    """Jinja's i18n extension, except that a ``{% trans %}`` block without plural or context is translated
    once, when its template is compiled, instead of on every render.

    A :class:`Renderer` keeps one environment per language, so such a block's translation is a constant of
    the compiled template. What runs per render is what Jinja's newstyle ``gettext`` did after the lookup:
    ``Markup(text) % variables`` under autoescape (the variables are escaped), ``text % variables``
    otherwise — the same output without a catalog lookup, a context call and a wrapper per string.
    ``ngettext``/``pgettext`` blocks and ``_()`` calls keep the runtime path.
    """

    def _make_node(self, singular: str, plural: str | None, context: str | None, variables: dict[str, nodes.Expr],
                   plural_expr: nodes.Expr | None, vars_referenced: bool, num_called_num: bool) -> nodes.Output:
        gettext = getattr(self.environment, "oncebeat_gettext", None)
        if gettext is None or plural_expr is not None or context is not None:
            return super()._make_node(singular, plural, context, variables, plural_expr, vars_referenced,
                                      num_called_num)
        text = nodes.MarkSafeIfAutoescape(nodes.Const(gettext(singular)))
        pairs = [nodes.Pair(nodes.Const(key), value) for key, value in variables.items()]
        return nodes.Output([nodes.Mod(text, nodes.Dict(pairs))])  # newstyle: always a format, even with {}


class Renderer:
    """Renders reminder emails from the built-in templates, overridden by files in ``templates``."""

    def __init__(self, templates: Path | None = None, *, company: str = "Example Co",
                 fallback_locale: str = DEFAULT_FALLBACK_LOCALE, skeletons: bool = True) -> None:
        """``fallback_locale``: the policy's ``[reminders] fallback_locale``, the locale of every email whose
        customer's language has no catalog. ``skeletons``: fill each part from its shape's skeleton
        (:mod:`.render_skeleton`, the same bytes at a fraction of the CPU); False renders every part with Jinja
        (the reference the tests compare with). Raises ``ConfigError`` for a missing folder or a fallback locale
        without a catalog."""
        try:
            self.fallback: EmailLocale = _fallback(fallback_locale)
        except ValueError as exc:
            raise ConfigError(f"fallback locale {fallback_locale!r} {exc}. Use a locale of English, German, French "
                              f"or Spanish, e.g. {DEFAULT_FALLBACK_LOCALE!r} ([reminders] fallback_locale).") from None
        self.fallback_locale = str(self.fallback.locale)
        loaders = []
        if templates is not None:
            templates = Path(templates).expanduser()
            if not templates.is_dir():
                raise ConfigError(
                    f"templates folder {str(templates)!r} does not exist. "
                    "Create it, or leave [reminders] templates unset to use the built-in templates."
                )
            loaders.append(FileSystemLoader(str(templates)))
        loaders.append(FileSystemLoader(str(BUILTIN_TEMPLATES)))
        loader = ChoiceLoader(loaders)
        self._options: dict[str, Any] = {
            "loader": loader,
            "undefined": StrictUndefined,
            "trim_blocks": True,
            "lstrip_blocks": True,
            "keep_trailing_newline": True,
            "auto_reload": False,  # read once per process: a changed template file takes effect at a restart
            "extensions": [_TransAtCompile],
        }
        self.templates = templates
        self.company = _one_line(company)
        self._envs: dict[tuple[str, bool], Environment] = {}
        # Compiled templates per (stage, part, language): looked up once, not per reminder (Jinja would
        # otherwise resolve the name through the loaders and stat the file on every render). A Renderer
        # therefore keeps the templates it first loaded (and Jinja, with ``auto_reload=False``, never stats
        # them again); a changed file is read by a new Renderer: ``oncebeat worker`` builds one at start-up, so an
        # operator restarts the workers to pick up an edited template.
        self._templates: dict[tuple[int, str, str], Template] = {}
        # Skeletons (render_skeleton): per (language, part, template name) the plan of its shapes, None when the
        # template is always rendered by Jinja; the sentinel renders use environments whose ``wrap`` marks.
        self._plans: dict[tuple[str, str, str], Plan | None] = {}
        self._probe_envs: dict[tuple[str, bool], Environment] = {}
        self._skeletons = skeletons

    def _env(self, part: str, language: str = "en", *, probe: bool = False) -> Environment:
        """The Jinja environment of ``part`` in ``language``: HTML autoescapes, subject and text do not.
        ``probe``: the twin whose ``wrap`` filter marks paragraphs (:func:`.render_skeleton.probe_wrap`)."""
        autoescape = part == "html"
        envs = self._probe_envs if probe else self._envs
        env = envs.get((language, autoescape))
        if env is None:
            env = Environment(autoescape=autoescape, **self._options)
            env.filters["wrap"] = probe_wrap if probe else _wrap
            catalog = translations(language)
            env.install_gettext_translations(catalog, newstyle=True)  # type: ignore[attr-defined]
            env.extend(oncebeat_gettext=catalog.gettext)  # {% trans %} blocks translated at compile time
            envs[(language, autoescape)] = env
        return env

    def _template(self, stage: int, part: str, language: str = "en") -> Template:
        cached = self._templates.get((stage, part, language))
        if cached is not None:
            return cached
        names = template_names(stage, part)
        try:
            tmpl = self._env(part, language).select_template(names)
        except TemplateError as exc:
            where = getattr(exc, "filename", None) or getattr(exc, "name", None) or " or ".join(names)
            raise ConfigError(f"template {where}: {exc}. Fix the template file.") from exc
        self._templates[(stage, part, language)] = tmpl
        return tmpl

    def template_path(self, stage: int, part: str) -> str:
        """The file that renders ``part`` of ``stage`` (a user file or a built-in one)."""
        tmpl = self._template(stage, part)
        return tmpl.filename or tmpl.name or ""

    def _render(self, stage: int, part: str, context: dict[str, Any]) -> str:
        language = context["language"]
        tmpl = self._template(stage, part, language)
        name = tmpl.name or ""
        where = (language, part, name)
        if not self._skeletons:
            return self._jinja(tmpl, context)
        if where in self._plans:
            plan = self._plans[where]
        else:
            plan = self._plans[where] = analyse(self._env(part, language), name, context) if name else None
        if plan is None:
            return self._jinja(tmpl, context)
        return plan.render(context, lambda c: self._jinja(tmpl, c),
                           lambda c: self._jinja(self._env(part, language, probe=True).get_template(name), c), _wrap)

    @staticmethod
    def _jinja(tmpl: Template, context: dict[str, Any]) -> str:
        try:
            return tmpl.render(context)
        except TemplateError as exc:
            raise ConfigError(f"template {tmpl.filename or tmpl.name}: {exc}. Fix the template (see the variables in "
                              "oncebeat.reminders.render).") from exc

    def skeleton_counts(self) -> dict[str, int]:
        """Renders of template parts so far: ``hits`` (filled from a skeleton), ``misses`` (a new shape: Jinja
        plus one sentinel render), ``slow`` (Jinja only: a template or shape the skeletons do not cover)."""
        plans = [plan for plan in self._plans.values() if plan is not None]
        return {"hits": sum(p.hits for p in plans), "misses": sum(p.misses for p in plans),
                "slow": sum(p.slow for p in plans)}

    def render(
        self,
        *,
        invoice_number: str,
        customer_name: str,
        customer_locale: str,
        currency: str,
        amount_due: int,
        due_on: date,
        issued_on: date,
        stage: int,
        days_past_due: int,
        promise_missed: date | None = None,
        payment_url: str | None = None,
        late_fee: int = 0,
    ) -> RenderedEmail:
        """Render the reminder of ``stage`` for one invoice; ``days_past_due`` is negative before the due date.

        ``promise_missed``: the date the customer had promised to pay by, when this is the first reminder after
        that promise passed unpaid (templates: ``promise_missed`` True, ``promise_date`` the localised date).
        ``payment_url``: the invoice's https pay-now link (checked on import), shown as a button and a plain link;
        the templates fall back to "how to pay" words without it.
        ``late_fee``: the stage's late fee in minor units of ``currency`` (:mod:`.notices.fees`; 0: none), shown
        with the total it makes.
        """
        for name, value in (("stage", stage), ("days_past_due", days_past_due), ("amount_due", amount_due),
                            ("late_fee", late_fee)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        chosen = email_locale(customer_locale, self.fallback_locale)
        loc, language = chosen.locale, chosen.language
        t = translations(language)
        context: dict[str, Any] = {
            "company": self.company,
            "customer_name": _one_line(customer_name),
            "invoice_number": _one_line(invoice_number),
            "currency": currency,
            "amount": _unbreakable(_format_money(amount_due, currency, loc)),
            "amount_due": amount_due,
            "due_on": due_on,
            "issued_on": issued_on,
            "due_date": _long_date(due_on, loc),
            "issued_date": _long_date(issued_on, loc),
            "stage": stage,
            "stage_label": _stage_label(t, stage),
            "kind": template_kind(stage),
            "days_past_due": days_past_due,
            "days_overdue": max(0, days_past_due),
            "days_until_due": max(0, -days_past_due),
            "days_text": _days(t, abs(days_past_due)),
            "status_text": _status_text(t, days_past_due),
            "locale": str(loc),
            "language": language,
            "promise_missed": promise_missed is not None,
            "promise_date": _long_date(promise_missed, loc)
            if promise_missed is not None else "",
            "payment_url": payment_url or "",
            "late_fee_minor": late_fee,
            "late_fee": _unbreakable(_format_money(late_fee, currency, loc)) if late_fee else "",
            "total_with_fee": _unbreakable(_format_money(amount_due + late_fee, currency, loc)) if late_fee else "",
        }
        subject = _one_line(self._render(stage, "subject", context))
        if not subject:
            raise ConfigError(f"template {self.template_path(stage, 'subject')}: renders an empty subject. Fix the "
                              "template.")
        context["subject"] = subject
        text = _tidy_body(self._render(stage, "txt", context))
        html = _tidy_body(self._render(stage, "html", context))
        return RenderedEmail(subject=subject, text=text, html=html)
