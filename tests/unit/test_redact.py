"""One redaction for every URL: passwords in the userinfo (even unencoded), secret parameters, and pieces seen before."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from oncebeat.redact import RedactingFilter, forget_secrets, redact_url, remember_secrets


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://app:S3cret@db.example.test/app", "postgresql://app:***@db.example.test/app"),
    ("postgresql://app:pa/ss@db.example.test/app", "postgresql://app:***@db.example.test/app"),
    ("smtp://bob:p@ss#w?rd@mail.example.test:587", "smtp://bob:***@mail.example.test:587"),
    ("postgresql://app@db.example.test/app?password=S3cret&sslmode=require",
     "postgresql://app@db.example.test/app?password=***&sslmode=require"),
    ("postgresql:///app?sslpassword=S3cret&passfile=/run/S3cret.pgpass",
     "postgresql:///app?sslpassword=***&passfile=***"),
    ("sqlite:///x.db?key=S3cret&token=S3cret", "sqlite:///x.db?key=***&token=***"),
    ("host=db.example.test password='S 3 cret' user=app", "host=db.example.test password=*** user=app"),
    ("bob:S3cret@mail.example.test", "bob:***@mail.example.test"),
])
def test_passwords_in_every_url_shape_are_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_pieces_of_a_remembered_password_are_masked_in_a_driver_message() -> None:
    remember_secrets("postgresql://app:pw@S3cretHost@127.0.0.1:5432/app")
    assert redact_url("failed to resolve host 'S3cretHost@127.0.0.1'") == "failed to resolve host '***@127.0.0.1'"
    remember_secrets("smtp://bob:p%40ss%2FWord@127.0.0.1")
    assert "ss" not in redact_url("login p@ss/Word refused").replace("***", "")


def test_text_without_secrets_is_left_alone() -> None:
    text = "effect key=reminder:7 done for ana@example.test on postgresql://app@db.example.test/app"
    assert redact_url(text) == text


def test_the_logging_filter_masks_messages_and_tracebacks() -> None:
    remember_secrets("postgresql://app:Zq7Secret@db.example.test/app")
    try:
        raise RuntimeError("connect failed for Zq7Secret")
    except RuntimeError:
        import sys

        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "url %s", ("postgresql://app:Zq7Secret@h/db",),
                                   sys.exc_info())
    RedactingFilter().filter(record)
    assert "Zq7Secret" not in record.getMessage() and "Zq7Secret" not in (record.exc_text or "")


@pytest.mark.parametrize("char", ["#", "/", "?", "@", " ", '"', "'"])
def test_an_smtp_url_whose_password_needs_encoding_is_refused_by_name(char: str) -> None:
    from oncebeat.errors import ConfigError
    from oncebeat.mail.smtp import parse_smtp_url

    with pytest.raises(ConfigError) as caught:
        parse_smtp_url(f"smtp+starttls://app:Mark{char}er9Secret@127.0.0.1:587")
    message = str(caught.value)
    assert "percent-encode them" in message and char in message
    assert "Mark" not in message and "er9Secret" not in message


def test_an_encoded_password_is_fine() -> None:
    from oncebeat.redact import unencoded_password

    assert unencoded_password("postgresql://app:p%40ss%2Fw@db.example.test/app") is None
    assert unencoded_password("postgresql://db.example.test/app?password=x/y") is None


def test_the_userinfo_mask_is_the_pattern_s_substitution_tried_only_where_it_can_differ() -> None:
    # _mask_userinfo is linear (the plain sub took 32 s on 64 KiB of '=' and a ':'); it must mask exactly the same
    import random

    from oncebeat import redact

    rnd = random.Random(21)
    alphabet = [*":/@ '\"(=<>a\tb", "://", "u:p@", "x@h", "=u:", "(a:", "<a:"]
    for _ in range(20_000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
        expected = redact._USERINFO.sub(lambda m: f"{m.group('head')}{redact.MASK}@", text)
        assert redact._mask_userinfo(text) == expected, text


def test_a_non_blank_text_never_redacts_to_a_blank_one() -> None:
    remember_secrets("postgresql://app:S3cretPw@db.example.test/app")
    assert redact_url("S3cretPw") == "***"
    assert redact_url("postgresql://app:S3cretPw@db.example.test/app\n") == "postgresql://app:***@db.example.test/app\n"
    assert redact_url("") == ""


@pytest.mark.parametrize(("url", "clean"), [
    ("sqlite:///oncebeat.db\n", "sqlite:///oncebeat.db"),
    ("  postgresql://app:S3cret@db.example.test/app?schema=x\r\n", "postgresql://app:S3cret@db.example.test/app?schema=x"),
    ("sqlite:///my folder/oncebeat.db", "sqlite:///my folder/oncebeat.db"),
])
def test_database_urls_lose_surrounding_whitespace(url: str, clean: str) -> None:
    from oncebeat.store import clean_database_url

    assert clean_database_url(url) == clean


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://app:S3cret@db.example.test/app?schema=x#frag", "has a '#fragment'"),
    ("sqlite:///oncebeat.db#x", "has a '#fragment'"),
    ("postgresql://app:S3cret@db.example.test/app\nhost=evil", "control character U+000A inside it"),
    ("   \n", "DATABASE_URL is empty"),
])
def test_a_fragment_or_a_second_line_in_a_database_url_is_refused_clearly(url: str, message: str) -> None:
    from oncebeat.errors import StoreError
    from oncebeat.store import clean_database_url

    with pytest.raises(StoreError, match=message.replace("'", ".").replace("+", ".")) as caught:
        clean_database_url(url)
    assert "S3cret" not in str(caught.value)


def test_a_hash_in_a_password_gets_the_encoding_advice_not_the_fragment_one() -> None:
    from oncebeat.store import clean_database_url

    url = "postgresql://app:pa#ss@db.example.test/app"
    assert clean_database_url(url) == url  # the store's own check then names '#' as %23
