"""Task log credentials: the master grants a read, each agent checks it (task_logs.proto).

Nobody's own secret travels to an agent: to read a task's output, ``fairshare logs`` asks the
master (``OperatorService.GrantLogAccess``, authenticated and authorized there) for a *grant*,
and hands each agent the grant with that agent's *signature* of it.

- The master draws a random secret of its own (``new_secret``, kept in memory for its term) and
  gives each agent, when it registers, the agent's *log key*: ``agent_key(secret, agent_id)``
  (HMAC-SHA256 of the agent id; ``AgentRegistered.log_key``). A key opens nothing but that
  agent's log service, so an agent (a rogue one included) can forge nothing for another.
- A ``Grant`` names the principal it was issued to (``""``: anonymous, a master without
  authentication), one task id, the frameworks whose sandboxes of that task it covers (``ANY``
  for a principal that may read every framework's logs), and when it expires (wall clock,
  ``GRANT_TTL`` after issue). ``Grant.encode`` is its text: URL-safe base64 of a canonical JSON
  document, at most ``MAX_GRANT_BYTES``.
- ``sign(key, grant_text)`` is the signature for the agent of ``key``: HMAC-SHA256 over a
  domain-separated message, URL-safe base64. ``verify(key, grant_text, signature, now)`` is the
  agent's check: the signature (compared in constant time), the shape, then the expiry, allowing
  ``CLOCK_SKEW`` between the master's clock and the agent's; ``CredentialError`` says which
  failed.

Invariants: pure (standard library, no I/O); a grant verifies only under the key it was signed
with, so a credential is worthless at another agent, and it is no bearer token at the master (it
has no ``PRINCIPAL:SECRET`` shape and is checked against no credentials file); a grant's
signature covers every byte of its text, so nothing in it can be changed; expiry is checked at
the start of a read only (a ``--follow`` stream opened in time may go on).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANY",
    "CLOCK_SKEW",
    "GRANT_TTL",
    "KEY_BYTES",
    "MAX_GRANT_BYTES",
    "CredentialError",
    "Grant",
    "agent_key",
    "new_secret",
    "sign",
    "verify",
]

GRANT_TTL: Final = 60.0
"""Seconds a grant holds after the master issued it."""
CLOCK_SKEW: Final = 30.0
"""Seconds an agent's clock may be behind the master's and still take a grant as unexpired."""
KEY_BYTES: Final = 32
MAX_GRANT_BYTES: Final = 32_768
"""The longest grant text an agent reads (64 framework ids of 256 characters fit)."""
ANY: Final = ("*",)
"""``Grant.frameworks`` of a grant that covers every framework's sandbox of the task."""
_KEY_CONTEXT: Final = b"fairshare agent log key v1\n"
_SIGN_CONTEXT: Final = b"fairshare log grant v1\n"
_VERSION: Final = 1


class CredentialError(ValueError):
    """A credential an agent must refuse; the message says why (never a key)."""


def new_secret() -> bytes:
    """A fresh master secret (``KEY_BYTES`` random bytes)."""
    return os.urandom(KEY_BYTES)


def agent_key(secret: bytes, agent_id: str) -> bytes:
    """The log key of agent ``agent_id`` under the master's ``secret``."""
    return hmac.new(secret, _KEY_CONTEXT + agent_id.encode("utf-8"), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Grant:
    """What a credential allows: ``principal`` may read task ``task_id``'s logs in the sandboxes
    of ``frameworks`` (``ANY``: of every framework) until ``expires_at`` (wall clock)."""

    principal: str
    task_id: str
    frameworks: tuple[str, ...]
    expires_at: float

    @property
    def any_framework(self) -> bool:
        """True when the grant covers every framework's sandbox of the task."""
        return self.frameworks == ANY

    def covers(self, framework_id: str) -> bool:
        """True when the grant covers the task's sandbox in ``framework_id``."""
        return self.any_framework or framework_id in self.frameworks

    def encode(self) -> str:
        """The grant's text (what the master signs and the agents verify)."""
        document = {
            "v": _VERSION,
            "p": self.principal,
            "t": self.task_id,
            "f": list(self.frameworks),
            "x": int(self.expires_at),
        }
        return _b64(json.dumps(document, separators=(",", ":"), sort_keys=True).encode())

    @classmethod
    def decode(cls, text: str) -> Grant:
        """The grant of ``text`` (``CredentialError`` if it is not one)."""
        if len(text) > MAX_GRANT_BYTES:
            raise CredentialError(f"the grant is longer than {MAX_GRANT_BYTES} bytes")
        try:
            document = json.loads(_unb64(text))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise CredentialError("the grant is not readable") from None
        if not isinstance(document, dict) or document.get("v") != _VERSION:
            raise CredentialError("the grant is not of a version this agent reads")
        principal, task_id = document.get("p"), document.get("t")
        frameworks, expires = document.get("f"), document.get("x")
        if (
            not isinstance(principal, str)
            or not isinstance(task_id, str)
            or not task_id
            or not isinstance(frameworks, list)
            or not frameworks
            or not all(isinstance(f, str) and f for f in frameworks)
            or not isinstance(expires, int)
            or isinstance(expires, bool)
        ):
            raise CredentialError("the grant is malformed")
        return cls(principal, task_id, tuple(frameworks), float(expires))


def sign(key: bytes, grant_text: str) -> str:
    """The signature of ``grant_text`` for the agent whose log key is ``key``."""
    return _b64(hmac.new(key, _SIGN_CONTEXT + grant_text.encode("ascii"), hashlib.sha256).digest())


def verify(key: bytes, grant_text: str, signature: str, now: float) -> Grant:
    """The grant, if ``signature`` is the signature of ``grant_text`` under ``key`` and it has
    not expired at ``now`` (allowing ``CLOCK_SKEW``); ``CredentialError`` otherwise."""
    if not grant_text or not signature:
        raise CredentialError("the credential has no grant or no signature")
    if len(grant_text) > MAX_GRANT_BYTES or not (grant_text.isascii() and signature.isascii()):
        raise CredentialError("the credential is not valid on this agent")
    if not hmac.compare_digest(sign(key, grant_text), signature):
        raise CredentialError("the credential is not valid on this agent (not signed for it)")
    grant = Grant.decode(grant_text)
    if now > grant.expires_at + CLOCK_SKEW:
        raise CredentialError(f"the credential expired {now - grant.expires_at:.0f} s ago")
    return grant
