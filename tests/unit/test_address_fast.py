"""The address check's ASCII fast path gives email-validator's verdict on every input.

``address_problem`` accepts a plain ASCII address without calling email-validator (``_plainly_valid``); anything
the fast path does not vouch for goes to the validator. Every address below is judged both ways: the fast path
may only say "valid" where the validator does, and ``address_problem`` must equal the validator-only check.
"""

from __future__ import annotations

import itertools

import pytest

from oncebeat.mail.addresses import _UNSAFE_HEADER_CHARS, _address_problem, _plainly_valid, _validator_problem

HAND = [
    "a@example.com", "A@EXAMPLE.COM", "zoe.muller@example.co.uk", "o'brien+tag@example.org", "x@a.b.c.d.example",
    "!#$%&'*+/=?^_`{|}~-@example.com", "a.b.c@example.com", ".a@example.com", "a.@example.com", "a..b@example.com",
    "a@example", "a@test", "a@x.test", "a@x.TEST", "a@localhost", "a@x.localhost", "a@x.LOCAL", "a@local",
    "a@x.invalid", "a@x.onion", "a@1.0.0.127.in-addr.arpa", "a@x.arpa", "a@example.com.", "a@.example.com",
    "a@example..com", "a@-example.com", "a@example-.com", "a@exa-mple.com", "a@exa--mple.com", "a@ab--cd.com",
    "a@xn--bcher-kva.example", "a@xn--zzzz.com", "a@xn--.com", "a@example.123", "a@example.c0m", "a@example.1com",
    "a@123.com", "a@exa_mple.com", "a@[127.0.0.1]", '"a b"@example.com', '"a"@example.com', "a b@example.com",
    "a@exam ple.com", "@example.com", "a@", "a", "", "a@@example.com", "a@b@example.com", "jürgen@example.com",
    "zoe@bücher.example", "a@例え.jp", "a=?x@example.com", "a=b?c@example.com", "a\t@example.com", "a@example.com ",
    " a@example.com", "a@example.com\n", "a(b)@example.com", "a,b@example.com", "a;b@example.com", "a<b>@example.com",
    "a\\b@example.com", "a[b]@example.com", "a:b@example.com", "a@e.x", "a@e.x-", "a@e.-x", "a@e.x-y", "a@e.-",
    "a@e.co-", "a@a.b-c", "a@com-.org", "\u0430@example.com", "a@exаmple.com", "a@example.\u0441om",
    "a@e.xn--p1ai", "a@e.XN--P1AI", "postmaster@example.com", "a@sub.example.museum", "a@e.q1", "a@e.1q",
]
LOCALS = ["a", "a" * 63, "a" * 64, "a" * 65, "a." * 31 + "a", "x+y", "_", "-", "~", "a.b", "A-Z", "0"]
LABELS = ["a" * 61, "a" * 62, "a" * 63, "a" * 64, "b", "a1", "1a", "1", "a-1", "a-b-c"]
TLDS = ["com", "c", "co", "c1", "1c", "123", "a" * 62, "a" * 63, "a" * 64, "test", "local", "ab-c", "-ab", "ab-"]


def _generated() -> list[str]:
    out = [f"{local}@{label}.{tld}" for local, label, tld in itertools.product(LOCALS, LABELS, TLDS)]
    for n in range(240, 260):  # around the 254-character and 253-octet limits
        domain = ".".join(["a" * 60] * 4)[: n - 2].rstrip(".") + "m"
        out.append(f"a@{domain}")
        out.append(f"{'b' * 64}@{domain[:n - 66].rstrip('.')}m")
    return out


@pytest.mark.parametrize("address", HAND + _generated())
def test_the_fast_path_gives_the_validators_verdict(address: str) -> None:
    expected = _validator_problem(address)
    if _plainly_valid(address):
        assert expected is None, f"fast path accepts {address!r}, the validator says {expected}"
    _address_problem.cache_clear()
    guarded = "=?" in address.rpartition("@")[0] or _UNSAFE_HEADER_CHARS.search(address)
    if not guarded:
        assert _address_problem(address) == expected


def test_the_fast_path_takes_the_common_addresses() -> None:
    """Not a no-op: the addresses of ordinary customer data are decided without the validator."""
    for address in ["zoe.muller@example.co.uk", "c17850@example.com", "O'Brien+tag@Sub.Example.ORG", "a@x.test"]:
        assert _plainly_valid(address), address


def test_the_special_use_names_are_email_validators() -> None:
    from email_validator import SPECIAL_USE_DOMAIN_NAMES

    from oncebeat.mail.addresses import _SPECIAL_USE

    assert set(_SPECIAL_USE) == set(SPECIAL_USE_DOMAIN_NAMES) - {"test"}
