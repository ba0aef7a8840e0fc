"""Password hashes: the standard library's scrypt, a memory-hard KDF.

A stored hash is ``scrypt$<n>$<r>$<p>$<salt>$<key>`` (salt and key in urlsafe base64), so
the cost parameters can be raised later while old hashes still verify. Hashing takes about
50 ms and 16 MiB; callers on the event loop run it in a thread.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

from determined.common import errors

N, R, P = 2**14, 8, 1
KEY_BYTES = 32
MIN_LENGTH = 8
# Bounds the work one request can ask of the KDF.
MAX_LENGTH = 1024


def check_strength(password: str) -> None:
    """Refuse passwords that are too short (or absurdly long), saying what is expected."""
    if len(password) < MIN_LENGTH:
        raise errors.InvalidArgument(f"password: must be at least {MIN_LENGTH} characters")
    if len(password) > MAX_LENGTH:
        raise errors.InvalidArgument(f"password: must be at most {MAX_LENGTH} characters")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024, dklen=KEY_BYTES
    )


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    key = _derive(password, salt, N, R, P)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored``; False for any malformed stored hash."""
    if len(password) > MAX_LENGTH:
        return False
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = _unb64(key)
        actual = _derive(password, _unb64(salt), int(n), int(r), int(p))
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(actual, expected)


@functools.cache
def dummy_hash() -> str:
    """Verified against when a login names no such user, so that a refusal takes as long
    either way and does not reveal which names exist."""
    return hash_password(secrets.token_urlsafe(16))


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """What the store keeps of a session token: a leaked database holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()
