"""Tuning of the SDK's connection: reconnection backoff, deadlines, heartbeat watchdog, and how
it authenticates (``security``: the kernel's ``ClientSecurity``, TLS and a certificate or token).

Invariants: frozen value types without I/O; the defaults suit production, tests shorten them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fairshare.backoff import Backoff
from fairshare.settings import (
    CLIENT_SECURITY_SETTINGS,
    ETCD_SECURITY_SETTINGS,
    SettingsError,
    client_security,
)
from fairshare.transport import INSECURE, ClientSecurity

from framework_sdk.delivery import DEFAULT_DELIVERY_MEMORY

__all__ = ["ENVIRONMENT_VARIABLES", "Backoff", "ClientOptions", "security_from_environment"]

_SECURITY_SETTINGS: Final = (*CLIENT_SECURITY_SETTINGS, *ETCD_SECURITY_SETTINGS)
ENVIRONMENT_VARIABLES: Final = tuple(
    f"FAIRSHARE_{setting.name.upper()}" for setting in _SECURITY_SETTINGS
)
"""The variables a client's security is read from: FAIRSHARE_TLS_CA, FAIRSHARE_TLS_CERT,
FAIRSHARE_TLS_KEY, FAIRSHARE_TOKEN_FILE and FAIRSHARE_TLS_SERVER_NAME, and for finding the
leader in etcd FAIRSHARE_ETCD_TLS_CA, ..._CERT, ..._KEY, FAIRSHARE_ETCD_USER with
FAIRSHARE_ETCD_PASSWORD_FILE or FAIRSHARE_ETCD_PASSWORD (the commands' too)."""


def security_from_environment(environ: Mapping[str, str] | None = None) -> ClientSecurity:
    """The ``ClientSecurity`` the ``FAIRSHARE_TLS_*`` variables (``ENVIRONMENT_VARIABLES``)
    describe, as the ``fairshare`` commands read them; ``INSECURE`` when none is set. Raises
    ``SettingsError`` naming the variable when one is unusable (a file that is not there, a
    certificate without its key)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in _SECURITY_SETTINGS:
        name = f"FAIRSHARE_{setting.name.upper()}"
        raw = environ.get(name, "")
        if not raw.strip():
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as error:
            raise SettingsError(f"{name}={raw!r}: {error}") from None
    if not values:
        return INSECURE
    try:
        return client_security(values)
    except SettingsError as error:
        variables = ", ".join(f"FAIRSHARE_{key.upper()}" for key in values)
        raise SettingsError(f"{variables}: {error}") from None


DEFAULT_BACKOFF: Final = Backoff()
"""Reconnections: 0.5 s doubling up to 15 s, jittered (``fairshare.backoff``)."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Tuning of a ``SchedulerClient``; the defaults suit production (``security`` aside: a
    secured master needs ``ClientSecurity(ca=..., token=...)`` or a certificate)."""

    implicit_acknowledgements: bool = True
    call_timeout: float = 10.0
    """Deadline of every unary call, seconds."""
    subscribe_timeout: float = 10.0
    """How long to wait for the SUBSCRIBED event after opening the stream, seconds."""
    missed_heartbeats: int = 5
    """Heartbeat intervals without any message after which the connection counts as lost."""
    backoff: Backoff = DEFAULT_BACKOFF
    reconcile_on_resubscribe: bool = True
    delivery_memory: int = DEFAULT_DELIVERY_MEMORY
    """How many status updates (task id, uuid) the client remembers to drop the copies the
    master re-sends (``framework_sdk.delivery``); a copy older than that is delivered again."""
    seed: int | None = None
    """Seed of the backoff jitter (None: random)."""
    registration_timeout: float | None = 60.0
    """How long a client that never subscribed keeps trying before it gives up with an error
    (``ErrorEvent`` UNAVAILABLE: the driver's ``error`` callback); None: forever. Once it has
    subscribed, it reconnects forever."""
    security: ClientSecurity = field(default_factory=lambda: security_from_environment())
    """TLS (the CA bundle that signed the master's certificate), and this framework's identity:
    a client certificate or a token ``PRINCIPAL:SECRET`` (``fairshare.transport.read_token``).
    Default: what the ``FAIRSHARE_TLS_*`` variables say, as for the ``fairshare`` commands
    (``security_from_environment``); plaintext when none is set."""
