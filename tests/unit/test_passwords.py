"""Password hashes and tokens, checked against the standard library's scrypt and SHA-256
(the reference implementations) rather than against the module itself."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from determined.common import errors
from pydet.master.auth import passwords


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_stored_hash_is_scrypt_of_the_password_with_its_salt() -> None:
    stored = passwords.hash_password("correct horse battery")
    scheme, n, r, p, salt, key = stored.split("$")
    assert (scheme, int(n), int(r), int(p)) == ("scrypt", 2**14, 8, 1)
    expected = hashlib.scrypt(
        b"correct horse battery", salt=_unb64(salt), n=int(n), r=int(r), p=int(p), dklen=32
    )
    assert _unb64(key) == expected
    assert "correct horse battery" not in stored


def test_the_right_password_verifies_and_a_wrong_one_does_not() -> None:
    stored = passwords.hash_password("correct horse battery")
    assert passwords.verify_password("correct horse battery", stored)
    assert not passwords.verify_password("correct horse batterY", stored)
    assert not passwords.verify_password("", stored)


def test_the_same_password_hashes_differently_each_time() -> None:
    first, second = (passwords.hash_password("same password") for _ in range(2))
    assert first != second
    assert passwords.verify_password("same password", first)
    assert passwords.verify_password("same password", second)


def test_hashes_made_with_other_cost_parameters_still_verify() -> None:
    # Costs can be raised later: a hash records the ones it was made with.
    salt = b"0123456789abcdef"
    key = hashlib.scrypt(b"older password", salt=salt, n=2**10, r=4, p=2, dklen=32)
    stored = "scrypt$1024$4$2${}${}".format(
        base64.urlsafe_b64encode(salt).decode().rstrip("="),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
    )
    assert passwords.verify_password("older password", stored)
    assert not passwords.verify_password("newer password", stored)


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "plain-text-password",
        "bcrypt$10$8$1$c2FsdA$a2V5",
        "scrypt$16384$8$1$c2FsdA",
        "scrypt$n$8$1$c2FsdA$a2V5",
        "scrypt$16384$8$1$!!!$a2V5",
        # An absurd cost must be refused, not attempted.
        "scrypt$1073741824$8$1$c2FsdA$a2V5",
        "scrypt$3$8$1$c2FsdA$a2V5",
    ],
)
def test_a_malformed_stored_hash_never_verifies_and_never_raises(stored: str) -> None:
    assert passwords.verify_password("anything at all", stored) is False


def test_an_overlong_password_is_refused_without_running_the_kdf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = passwords.hash_password("x" * passwords.MAX_LENGTH)

    def forbidden(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("the KDF ran for an overlong password")

    monkeypatch.setattr(passwords, "_derive", forbidden)
    assert not passwords.verify_password("x" * (passwords.MAX_LENGTH + 1), stored)


def test_strength_rules_say_what_is_expected() -> None:
    with pytest.raises(errors.InvalidArgument, match="at least 8 characters"):
        passwords.check_strength("short")
    with pytest.raises(errors.InvalidArgument, match="at most 1024 characters"):
        passwords.check_strength("x" * 1025)
    passwords.check_strength("12345678")
    passwords.check_strength("x" * 1024)


def test_the_dummy_hash_is_a_real_hash_that_no_guess_matches() -> None:
    dummy = passwords.dummy_hash()
    assert dummy is passwords.dummy_hash()  # made once
    assert dummy.startswith("scrypt$")
    for guess in ("", "admin", "password", "12345678"):
        assert not passwords.verify_password(guess, dummy)


def test_tokens_are_long_random_and_url_safe() -> None:
    tokens = {passwords.new_token() for _ in range(100)}
    assert len(tokens) == 100
    for token in tokens:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)


def test_the_store_keeps_a_sha256_digest_of_a_token_not_the_token() -> None:
    token = passwords.new_token()
    digest = passwords.token_digest(token)
    assert digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in digest
    assert passwords.token_digest(token + "x") != digest
