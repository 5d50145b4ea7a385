"""An import's per-cell checks take a plain-ASCII shortcut and still give exactly the verdicts they gave (issue 27).

``text_reason`` (every text cell) and ``email_reason`` (every address) answer a value made only of U+0020-U+007E
without looking at each character's Unicode category, and ``foreign_digits`` (every date and amount) an ASCII
one. Compared here with the loops they skip, over every ASCII character alone and inside text, white space and
control characters of every kind, format characters (bidi controls, joiners, the BOM), NUL and random mixtures.
"""

from __future__ import annotations

import random
import unicodedata
from email.utils import parseaddr

from oncebeat.mail.addresses import address_problem
from oncebeat.reminders.conversions import foreign_digits, format_character, text_reason
from oncebeat.reminders.sources.values import email_reason
from oncebeat.textsafe import BIDI_CONTROLS


def _old_text_reason(value: str, *, allow_joiners: bool = False) -> str | None:
    for i, ch in enumerate(value, start=1):
        if ch == "\x00":
            return f"contains a NUL byte at character {i}; remove it (the export may be UTF-16 or binary)"
        if unicodedata.category(ch) == "Cc" and ch not in "\t":
            return f"contains the control character U+{ord(ch):04X} at character {i}; remove it"
    found = None if value.isascii() else format_character(value, allow_joiners=allow_joiners)
    if found:
        position, name = found
        kind = "a bidirectional control" if value[position - 1] in BIDI_CONTROLS else "an invisible format character"
        return (f"contains {kind} ({name}) at character {position}, which changes how the text is shown or "
                "compared; remove it")
    return None


def _old_email_reason(value: str) -> str | None:
    if any(ch.isspace() for ch in value):
        return "is not a valid email address (it contains a space)"
    if value.count("@") != 1:
        return "is not a valid email address (it needs exactly one @)"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return "is not a valid email address (it contains a control character)"
    _, addr = parseaddr(value)
    local, _, domain = value.partition("@")
    if addr != value or not local or not domain:
        return "is not a valid email address (use a bare address like name@example.com)"
    if "." not in domain or domain.startswith(".") or domain.endswith(".") or ".." in domain:
        return "is not a valid email address (the domain needs a dot, like example.com)"
    problem = address_problem(value)
    return f"is not a deliverable email address ({problem})" if problem else None


SPECIAL = ["\x00", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x7f", "\x85", "\xa0", "\u2028", "\u2029",
           "\u200b", "\u200c", "\u200d", "\u202e", "\u2066", "\ufeff", "\u3000", "é", "ß", "名", "🙂", "١"]


def _corpus() -> list[str]:
    rng = random.Random(27)
    ascii_chars = [chr(i) for i in range(128)]
    values = ["", "Customer 1", "ana.lima@example.test", "a b@example.test", "bob@example", "x@@y.test",
              "<bob@example.test>", "Bob <bob@example.test>", "bob@exa_mple.test", "\"a,b\"@example.test"]
    values += ascii_chars + [f"ana{c}lima@example.test" for c in ascii_chars + SPECIAL]
    values += [f"Name {c} end" for c in ascii_chars + SPECIAL]
    pool = ascii_chars + SPECIAL + list("abcdefghijklmnopqrstuvwxyz@.-_ ")
    domains = ["example.test", "example.com", "ex ample.com", "exa\tmple.com"]
    for _ in range(4000):
        values.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 30))))
        values.append(f"{rng.choice(['c', 'ana.lima', 'x+y'])}{rng.randint(0, 99)}@"
                      f"{rng.choice(domains)}")
    return values


def test_text_reason_gives_the_verdict_of_the_character_loop_for_every_value() -> None:
    for value in _corpus():
        for joiners in (False, True):
            assert text_reason(value, allow_joiners=joiners) == _old_text_reason(value, allow_joiners=joiners), \
                repr(value)


def test_email_reason_gives_the_verdict_of_the_character_loops_for_every_value() -> None:
    for value in _corpus():
        assert email_reason(value) == _old_email_reason(value), repr(value)


def _old_foreign_digits(value: str) -> str:
    return "".join(ch for ch in value if not ch.isascii() and unicodedata.category(ch) == "Nd")


def test_foreign_digits_finds_the_digits_the_character_loop_found() -> None:
    for value in [*_corpus(), "١٠", "2026-0١-31", "１２", "12.50", "\u0966\u0967", "٣.٥٠"]:
        assert foreign_digits(value) == _old_foreign_digits(value), repr(value)
