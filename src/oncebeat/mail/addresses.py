"""The one address rule for imports and sends: :func:`address_problem` (email-validator, with an ASCII fast path).

A plain ASCII address (most customer data) is decided by one regular expression and a few comparisons; anything
else goes to ``email-validator``. Both give the same verdict on every input: the fast path only ever accepts
what the validator accepts (``tests/unit/test_address_fast.py`` compares them on a corpus of tricky addresses).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["address_problem"]

# Every character str.splitlines() splits on, plus the other C0 controls
# (except TAB) and DEL: none of them belongs in a header value.
_UNSAFE_HEADER_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]+")


def address_problem(addr_spec: str) -> str | None:
    """Why ``addr_spec`` can never be delivered to, or ``None``: the one rule for imports and sends.

    Syntax only (no DNS): ``email-validator`` with deliverability checks off and quoted local parts,
    domain literals and special-use domains refused, except ``.test`` (RFC 6761), which development and
    test data use with a local sink. On top, a local part holding ``=?`` (an RFC 2047 encoded-word)
    or a control character is refused (see :mod:`oncebeat.mail.message`, CVE-2024-6923). Refused, for example:
    ``"a,b"@example.test``, ``bob@-example-.test``, ``bob@exa_mple.test``, a local part over 64
    characters, an address over 254.

    Args:
        addr_spec: A bare address such as ``zoe@example.com`` (no display name).

    Returns:
        str | None: A short reason (``"the part after the @-sign contains invalid characters: '_'"``),
        or ``None`` when the address is fine.
    """
    return _address_problem(addr_spec)


@lru_cache(maxsize=4096)  # a pure function of the text; a send checks its recipient twice (service, builder)
def _address_problem(addr_spec: str) -> str | None:
    local = addr_spec.rpartition("@")[0]
    if "=?" in local or _UNSAFE_HEADER_CHARS.search(addr_spec):
        return "its local part holds an RFC 2047 encoded-word ('=?') or a control character"
    if _plainly_valid(addr_spec):  # ~2 µs against ~25 µs for email-validator, the same verdict
        return None  # (tests/unit/test_address_fast.py compares both on a corpus of tricky addresses)
    return _validator_problem(addr_spec)


# A plain ASCII address that email-validator accepts with the options below: a dot-atom local part, a host name of
# two labels or more of letters, digits and single hyphens (no "--": Punycode and the "ab--" rule stay with the
# validator), a top-level label ending with a letter, within the length limits, not a special-use name. Anything
# else (non-ASCII, quoting, literals, "_", lengths near a limit) goes to the validator.
_PLAIN_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_PLAIN_ADDRESS = re.compile(rf"(?P<local>{_PLAIN_ATEXT}(?:\.{_PLAIN_ATEXT})*)@"
                            r"(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
                            r"[A-Za-z0-9-]{0,61}[A-Za-z])")
#: email-validator's ``SPECIAL_USE_DOMAIN_NAMES`` without ``test`` (``test_environment=True`` allows it): kept here so
#: that the fast path never imports email-validator (~0.1 s); a unit test checks the copy against the package's.
_SPECIAL_USE = ("arpa", "invalid", "local", "localhost", "onion")


def _plainly_valid(addr_spec: str) -> bool:
    """Whether ``addr_spec`` is a plain ASCII address that :func:`_validator_problem` accepts (False: ask it)."""
    m = _PLAIN_ADDRESS.fullmatch(addr_spec)
    if m is None or len(addr_spec) > 254 or len(m["local"]) > 64 or "--" in m["domain"]:
        return False
    domain = m["domain"].lower()
    if len(domain) > 253 or domain.startswith("-") or ".-" in domain:
        return False
    return not any(domain == d or domain.endswith("." + d) for d in _SPECIAL_USE)


def _validator_problem(addr_spec: str) -> str | None:
    """email-validator's verdict on ``addr_spec`` with the options :func:`address_problem` states."""
    from email_validator import EmailNotValidError, validate_email  # here: imported by the few processes that need it

    try:
        validate_email(addr_spec, check_deliverability=False, test_environment=True, allow_quoted_local=False,
                       allow_domain_literal=False)
    except EmailNotValidError as exc:
        reason = str(exc).rstrip(".")
        return reason[:1].lower() + reason[1:]
    return None
