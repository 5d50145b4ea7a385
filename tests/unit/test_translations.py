"""Reminder emails speak the customer's language: English, German, French and Spanish catalogs, complete and current."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from oncebeat.reminders.render import Renderer
from oncebeat.reminders.translations import LANGUAGES, SOURCE_LANGUAGE, catalog_path, language_of, translations

ROOT = Path(__file__).resolve().parents[2]
TRANSLATED = [lang for lang in LANGUAGES if lang != SOURCE_LANGUAGE]
LOCALE_OF = {"en": "en_US", "de": "de_DE", "fr": "fr_FR", "es": "es_ES"}
STAGES = [(-3, -3), (0, 0), (1, 1), (7, 16), (14, 14), (30, 45)]
_PLACEHOLDER = re.compile(r"%\(\w+\)[sd]")


def _source_messages() -> set[str | tuple[str, str]]:
    """Every message the templates ask for, extracted as pybabel would with the project's own map (babel.cfg)."""
    with (ROOT / "babel.cfg").open(encoding="utf-8") as fp:
        method_map, options = parse_mapping_cfg(fp)
    found: set[str | tuple[str, str]] = set()
    for _, _, message, _, _ in extract_from_dir(str(ROOT), method_map, options_map=options):
        found.add(message if isinstance(message, str) else (message[0], message[1]))
    return found


def _render(language: str, stage: int, days: int, name: str = "Ada Lovelace") -> list[str]:
    email = Renderer().render(invoice_number="INV-2026-0042", customer_name=name, customer_locale=LOCALE_OF[language],
                              currency="EUR", amount_due=123450, due_on=date(2026, 3, 1), issued_on=date(2026, 2, 1),
                              stage=stage, days_past_due=days)
    return [email.subject, email.text, email.html]


def _english_fragments() -> set[str]:
    """Runs of two or more English words from every source message (placeholders and tags removed)."""
    fragments = set()
    for message in _source_messages():
        for text in ([message] if isinstance(message, str) else list(message)):
            for piece in _PLACEHOLDER.split(re.sub(r"<[^>]+>", "|", text)):
                for chunk in re.split(r"[|,.;:()]", piece):
                    if len(chunk.split()) >= 2:
                        fragments.add(" ".join(chunk.split()))
    return fragments


@pytest.mark.parametrize("language", TRANSLATED)
def test_each_catalog_translates_every_message_of_the_templates(language: str) -> None:
    with catalog_path(language).open("rb") as fp:
        catalog = read_po(fp, locale=language)
    assert not catalog.fuzzy
    in_catalog = {m.id if isinstance(m.id, str) else (m.id[0], m.id[1]) for m in catalog if m.id}
    assert in_catalog == _source_messages(), "run pybabel extract/update (README, Development)"
    for message in catalog:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        assert all(strings) and not message.fuzzy, f"{language}: {message.id!r} is not translated"
        if isinstance(message.id, tuple):
            assert len(strings) == catalog.num_plurals, f"{language}: {message.id[0]!r} needs every plural form"
        for string in strings:  # a translation keeps exactly the placeholders of its message
            source = message.id if isinstance(message.id, str) else message.id[0]
            assert sorted(_PLACEHOLDER.findall(string)) == sorted(_PLACEHOLDER.findall(source)), string


@pytest.mark.parametrize("language", TRANSLATED)
@pytest.mark.parametrize(("stage", "days"), STAGES)
def test_every_stage_renders_in_the_customers_language_with_no_english_left(language: str, stage: int,
                                                                             days: int) -> None:
    english = _english_fragments()
    for part in _render(language, stage, days):
        left = sorted(f for f in english if f in part)
        assert left == [], f"untranslated in {language} stage {stage}: {left}"


def test_the_same_reminder_reads_in_each_language() -> None:
    subjects = {lang: _render(lang, 7, 16)[0] for lang in LANGUAGES}
    assert subjects == {
        "en": "Invoice INV-2026-0042 is 16 days past due",
        "de": "Rechnung INV-2026-0042 ist seit 16 Tagen überfällig",
        "fr": "La facture INV-2026-0042 est en retard de 16 jours",
        "es": "La factura INV-2026-0042 tiene 16 días de retraso",
    }
    assert "Guten Tag Ada Lovelace," in _render("de", 1, 1)[1]
    assert "Sehr geehrte Kundin, sehr geehrter Kunde," in _render("de", 1, 1, name="")[1]
    assert '<html lang="fr">' in _render("fr", 30, 45)[2]


def test_plural_forms_follow_each_language() -> None:
    assert "ist seit 1 Tag überfällig" in _render("de", 1, 1)[0]
    assert "est en retard de 1 jour" in _render("fr", 1, 1)[0]
    assert "vence en 3 días" in _render("es", -3, -3)[0]


def test_html_translations_escape_customer_values() -> None:
    html = _render("fr", 7, 16, name="Eve <script>alert(1)</script>")[2]
    assert "<script>" not in html and "Eve &lt;script&gt;" in html


@pytest.mark.parametrize(("locale", "language"), [
    ("de_DE", "de"), ("de-AT", "de"), ("fr_CA", "fr"), ("es_MX", "es"), ("en_GB", "en"),
    ("pt_BR", "en"), ("ja_JP", "en"), ("", "en"), (None, "en"), ("not a locale", "en")])
def test_the_customer_locale_picks_the_language_and_others_fall_back_to_english(locale: str | None,
                                                                                 language: str) -> None:
    assert language_of(locale) == language


def test_a_customer_in_another_language_gets_words_amounts_and_dates_of_the_fallback_locale() -> None:
    """One language per email: no English sentence around "1 de março de 2026" (issue 21, item 7)."""
    email = Renderer().render(invoice_number="INV-1", customer_name="Ana", customer_locale="pt_BR", currency="BRL",
                              amount_due=123450, due_on=date(2026, 3, 1), issued_on=date(2026, 2, 1), stage=7,
                              days_past_due=7)
    assert email.subject == "Invoice INV-1 is 7 days past due"
    assert "R$1,234.50" in email.text and "March\xa01,\xa02026" in email.text
    assert "março" not in email.text + email.html and "1.234,50" not in email.text + email.html


def test_an_unshipped_language_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no catalog for language 'pt'"):
        translations("pt")


def test_building_the_package_compiles_every_catalog(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True)
    built = tmp_path / "oncebeat" / "reminders" / "locale"
    for language in TRANSLATED:
        mo = built / language / "LC_MESSAGES" / "oncebeat.mo"
        assert mo.is_file() and mo.stat().st_size > 1000, f"{language} not compiled"


def test_make_translations_changes_no_byte_of_unchanged_catalogs(tmp_path: Path) -> None:
    """`make translations` on unchanged sources leaves every catalog as it is (no dates, headers or re-wrapping)."""

    for name in ("Makefile", "babel.cfg"):
        shutil.copy(ROOT / name, tmp_path / name)
    app = Path("src/oncebeat/reminders")
    (tmp_path / app).mkdir(parents=True)
    shutil.copy(ROOT / app / "render.py", tmp_path / app / "render.py")
    for folder in ("templates", "locale", "notices/templates"):  # every source babel.cfg names, and the catalogs
        shutil.copytree(ROOT / app / folder, tmp_path / app / folder)
    before = {p: p.read_bytes() for p in (tmp_path / app / "locale").rglob("*.po*")}
    assert len(before) >= 4
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(["make", "translations", f"BIN={bin_dir}", "-o", f"{bin_dir}/.installed"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    changed = [str(p.relative_to(tmp_path)) for p, data in before.items() if p.read_bytes() != data]
    assert changed == [], changed
