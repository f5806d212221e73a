"""The security settings of ``fairshare master``: TLS (the certificate flags are the kernel's
``SERVER_TLS_SETTINGS``, the agent's too; the client CA ``--tls-ca`` is the master's own),
authentication and authorization (docs/security.md).

Invariants: the files are only named here; ``master.config.check_security`` checks that they fit
together and ``master.security`` reads them before the master serves.
"""

from __future__ import annotations

from typing import Final

from fairshare.setting_tables import SERVER_TLS_SETTINGS
from fairshare.settings import Setting, boolean, file_path

__all__ = ["SECURITY_SETTINGS"]

SECURITY_SETTINGS: Final = (
    *SERVER_TLS_SETTINGS,
    Setting(
        "tls_ca",
        file_path,
        None,
        "CA bundle (PEM) that signs client certificates: mutual TLS, a certificate's common name"
        " is its principal (every client must present one; with --credentials a token may name the"
        " principal instead)",
        metavar="FILE",
    ),
    Setting(
        "credentials",
        file_path,
        None,
        "credentials file (TOML or JSON: principals and salted hashes of their secrets, made by"
        " 'fairshare credential'): bearer tokens and HTTP basic auth are accepted; needs TLS",
        metavar="FILE",
    ),
    Setting(
        "acls",
        file_path,
        None,
        "ACL file (TOML or JSON, docs/security.md): who may register frameworks (roles, weight"
        " cap) and agents, tear down, kill, set weights, maintain agents, view state",
        metavar="FILE",
    ),
    Setting(
        "allow_insecure",
        boolean,
        False,
        "serve a --host other than loopback without TLS and authentication (anyone who reaches"
        " the ports then controls the cluster)",
        switch=True,
    ),
)
"""TLS, authentication and authorization of the master."""
