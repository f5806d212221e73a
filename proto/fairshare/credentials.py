"""Principals and their secrets: the credentials file of salted hashes, and checking tokens.

A client proves who it is with a token ``PRINCIPAL:SECRET`` (a gRPC bearer token, or HTTP basic
auth with the principal as user name and the secret as password). A daemon started with
``--credentials FILE`` checks it against the file, which holds no secret, only a salted hash per
principal (Mesos's ``--credentials``, Prometheus's ``basic_auth_users``), TOML or JSON::

    [[credentials]]
    principal = "batch"
    secret_hash = "scrypt$16384$8$1$<salt, base64>$<hash, base64>"

``fairshare credential PRINCIPAL`` mints a secret, writes the token to a file of its own (mode
0600) and adds the hash to the credentials file.

Invariants:
- secrets are never stored, logged or put in an error message; hashes are scrypt (stdlib
  ``hashlib.scrypt``) with a random 16-byte salt, compared in constant time;
- a principal is 1 to 128 characters ``[A-Za-z0-9_.@-]``, starting with a letter or digit;
  principals are unique in a file; a malformed file raises ``CredentialsError`` naming the file
  and the entry (a daemon does not start);
- checking a token costs one scrypt only the first time that token is seen: verified and refused
  tokens are remembered by their SHA-256 (bounded, least recently used first out), so a client's
  every call is a dictionary lookup, and a flood of one wrong token costs one hash;
- refusing a token of an unknown principal costs what refusing a wrong secret costs: the secret is
  hashed against a dummy hash of the same parameters (``kdf_runs`` counts every scrypt), so the
  time of a refusal does not tell which principals exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import tomllib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "PRINCIPAL_RE",
    "Credentials",
    "CredentialsError",
    "entry_toml",
    "hash_secret",
    "new_secret",
    "split_token",
    "verify_secret",
]

PRINCIPAL_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,127}$")
_SCRYPT_N: Final = 1 << 14
_SCRYPT_R: Final = 8
_SCRYPT_P: Final = 1
_HASH_BYTES: Final = 32
_CACHE: Final = 4096
_DUMMY_HASH: Final = (
    f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}$"
    f"{base64.b64encode(bytes(16)).decode()}${base64.b64encode(bytes(_HASH_BYTES)).decode()}"
)
"""What a secret of an unknown principal is hashed against (matches no secret in practice)."""


class CredentialsError(ValueError):
    """A credentials file that cannot be used (the message names the file and why)."""


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_secret(secret: str, salt: bytes | None = None) -> str:
    """The salted scrypt hash of ``secret`` as one string (what the credentials file holds)."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.scrypt(
        secret.encode("utf-8"), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=_HASH_BYTES
    )
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def _parse_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("secret_hash must look like scrypt$N$r$p$SALT$HASH")
    n, r, p = (int(part) for part in parts[1:4])
    if n < 2 or n & (n - 1) or n > 1 << 20 or not 1 <= r <= 32 or not 1 <= p <= 16:
        raise ValueError("secret_hash has scrypt parameters out of range")
    salt = base64.b64decode(parts[4], validate=True)
    digest = base64.b64decode(parts[5], validate=True)
    if len(salt) < 8 or len(digest) < 16:
        raise ValueError("secret_hash has a salt or hash that is too short")
    return n, r, p, salt, digest


def verify_secret(secret: str, encoded: str) -> bool:
    """True when ``secret`` hashes to ``encoded`` (constant-time comparison)."""
    n, r, p, salt, digest = _parse_hash(encoded)
    candidate = hashlib.scrypt(
        secret.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(digest), maxmem=1 << 27
    )
    return hmac.compare_digest(candidate, digest)


def split_token(token: str) -> tuple[str, str] | None:
    """``(principal, secret)`` of a token ``PRINCIPAL:SECRET``, or None if malformed."""
    principal, sep, secret = token.partition(":")
    if not sep or not secret or not PRINCIPAL_RE.match(principal):
        return None
    return principal, secret


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: str
    secret_hash: str


class Credentials:
    """The principals a daemon knows, and the check of their tokens."""

    def __init__(self, entries: dict[str, str], source: str = "(memory)") -> None:
        self._hashes = dict(entries)
        self.source = source
        self._verified: OrderedDict[bytes, str] = OrderedDict()
        self._refused: OrderedDict[bytes, None] = OrderedDict()
        self.kdf_runs = 0
        """How many scrypt hashes ``check`` computed (one per token not seen before)."""

    @property
    def principals(self) -> frozenset[str]:
        """Every principal of the file."""
        return frozenset(self._hashes)

    def hashes(self) -> dict[str, str]:
        """Principal -> salted hash, as in the file (no secret: the file holds none)."""
        return dict(self._hashes)

    @classmethod
    def load(cls, path: Path) -> Credentials:
        """Read a credentials file (``CredentialsError`` naming the file and entry if bad)."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CredentialsError(f"credentials file {path}: cannot read it: {error}") from None
        try:
            document: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
            raise CredentialsError(f"credentials file {path}: not valid: {error}") from None
        raw = document.get("credentials") if isinstance(document, dict) else None
        if not isinstance(raw, list):
            raise CredentialsError(
                f"credentials file {path}: expected a list 'credentials' of entries with"
                " principal and secret_hash"
            )
        entries: dict[str, str] = {}
        for number, item in enumerate(raw, start=1):
            where = f"credentials file {path}, entry {number}"
            if not isinstance(item, dict) or set(item) != {"principal", "secret_hash"}:
                raise CredentialsError(f"{where}: expected exactly principal and secret_hash")
            principal, encoded = item["principal"], item["secret_hash"]
            if not isinstance(principal, str) or not PRINCIPAL_RE.match(principal):
                raise CredentialsError(
                    f"{where}: principal {principal!r} must be 1-128 of [A-Za-z0-9_.@-]"
                )
            if principal in entries:
                raise CredentialsError(f"{where}: principal {principal!r} is given twice")
            try:
                _parse_hash(str(encoded))
            except ValueError as error:
                raise CredentialsError(f"{where} ({principal}): {error}") from None
            entries[principal] = str(encoded)
        return cls(entries, str(path))

    def cached(self, token: str) -> str | bool | None:
        """The principal of a token seen before, False if it was refused, None if never seen."""
        key = hashlib.sha256(token.encode("utf-8")).digest()
        principal = self._verified.get(key)
        if principal is not None:
            self._verified.move_to_end(key)
            return principal
        return False if key in self._refused else None

    def check(self, token: str) -> str | None:
        """The principal a token proves, or None; remembers the verdict (thread-safe enough for
        one writer: the daemons call it from one worker at a time)."""
        key = hashlib.sha256(token.encode("utf-8")).digest()
        split = split_token(token)
        principal = None
        if split is not None:
            known = split[0] in self._hashes
            self.kdf_runs += 1
            try:  # an unknown principal's secret is hashed too: the same work, the same time
                matches = verify_secret(split[1], self._hashes.get(split[0], _DUMMY_HASH))
            except ValueError:
                matches = False
            principal = split[0] if known and matches else None
        if principal is None:
            self._refused[key] = None
            while len(self._refused) > _CACHE:
                self._refused.popitem(last=False)
            return None
        self._verified[key] = principal
        while len(self._verified) > _CACHE:
            self._verified.popitem(last=False)
        return principal


def entry_toml(principal: str, secret_hash: str) -> str:
    """One TOML entry of a credentials file."""
    return f'[[credentials]]\nprincipal = "{principal}"\nsecret_hash = "{secret_hash}"\n'
