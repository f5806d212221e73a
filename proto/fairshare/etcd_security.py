"""How a fairshare process authenticates to etcd and verifies it (docs/security.md, "etcd").

The same settings serve the masters (``--registry etcd://...``) and every client that reads
the leader from etcd (agents, the SDK, the commands: ``--master etcd://...``):

- ``--etcd-tls-ca``: the CA bundle that signed etcd's server certificates: talk to etcd over
  TLS and check who it is;
- ``--etcd-tls-cert``/``--etcd-tls-key``: this process's client certificate (etcd's
  ``--client-cert-auth``; etcd takes its common name as the etcd user when no password is
  given);
- ``--etcd-user`` with its password from ``--etcd-password-file`` or the variable
  ``FAIRSHARE_ETCD_PASSWORD`` (never a flag: a command line is visible to every local user):
  etcd's user authentication.

Invariants: an ``EtcdSecurity`` is checked when made (``ValueError`` saying what is missing): a
client certificate comes with its key; a password or a client certificate needs TLS (never sent
in plaintext); a user comes with its password. ``describe`` never shows the password. Nothing
here does I/O but ``read_password``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["PASSWORD_VARIABLE", "PLAIN_ETCD", "EtcdSecurity", "read_password"]

PASSWORD_VARIABLE: Final = "FAIRSHARE_ETCD_PASSWORD"
MAX_PASSWORD_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class EtcdSecurity:
    """What a process trusts (``ca``) and presents (``cert``/``key``, ``user``/``password``)
    to etcd."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("an etcd client certificate needs its key, and a key its certificate")
        if (self.user is None) != (self.password is None):
            raise ValueError(
                "etcd authentication needs both a user (--etcd-user) and its password"
                f" (--etcd-password-file or {PASSWORD_VARIABLE})"
            )
        if self.ca is None and (self.cert is not None or self.password is not None):
            raise ValueError(
                "etcd credentials need TLS: give the CA bundle that signed etcd's certificate"
                " (--etcd-tls-ca); a password or certificate is never sent in plaintext"
            )

    @property
    def tls(self) -> bool:
        """True when etcd is reached over TLS."""
        return self.ca is not None

    def describe(self) -> str:
        """``tls=on cert=on user=NAME`` for log lines (never the password)."""
        return (
            f"tls={'on' if self.tls else 'off'} cert={'on' if self.cert else 'off'}"
            f" user={self.user or '-'}"
        )


PLAIN_ETCD: Final = EtcdSecurity()
"""etcd without TLS or authentication (an open etcd: docs/security.md says what it allows)."""


def read_password(path: Path) -> str:
    """The first line of ``path`` (``ValueError`` when it cannot be read or is empty)."""
    try:
        data = path.read_bytes()[: MAX_PASSWORD_BYTES + 1]
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_PASSWORD_BYTES:
        raise ValueError(f"{path} is longer than {MAX_PASSWORD_BYTES} bytes: not a password file")
    try:
        password = data.decode("utf-8").splitlines()[0] if data.strip() else ""
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    if not password:
        raise ValueError(f"{path} is empty")
    return password
