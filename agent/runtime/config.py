"""The runtime's settings: its own (``RuntimeConfig``) and the ones the master sends
(``MasterSettings``: the heartbeat interval and the reconnect jitter).

Invariants: a duration the master sends is clamped to [0, ``MAX_HEARTBEAT_INTERVAL``] or
[0, ``MAX_RECONNECT_JITTER``] (a malformed one counts as 0, a heartbeat interval of 0 as the
agent's default); ``MasterSettings`` holds what the master said last (``AgentRegistered`` or
``AgentSettings``), and hands the jitter to the ``Reconnection`` it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fairshare.transport import INSECURE, ClientSecurity
from fairshare.wire import WireRangeError, seconds_from_duration
from google.protobuf.duration_pb2 import Duration

from agent.runtime.reconnect import Reconnection

__all__ = ["MAX_HEARTBEAT_INTERVAL", "MAX_RECONNECT_JITTER", "MasterSettings", "RuntimeConfig"]

MAX_HEARTBEAT_INTERVAL: Final = 3600.0
"""The longest heartbeat interval the agent accepts from a master (longer ones are clamped)."""
MAX_RECONNECT_JITTER: Final = 600.0
"""The longest reconnect jitter the agent accepts from a master (longer ones are clamped)."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Timing and retry settings of the runtime (seconds)."""

    master: str
    security: ClientSecurity = INSECURE  # TLS and the agent's identity to the master
    status_retry_initial: float = 1.0
    status_retry_max: float = 60.0
    reconnect_initial: float = 0.25
    reconnect_max: float = 10.0
    rpc_timeout: float = 10.0
    drain_timeout: float = 3.0
    default_heartbeat_interval: float = 5.0
    kill_tasks_on_shutdown: bool = True


def _seconds(message: Duration, most: float) -> float:
    """A duration the master sent, in [0, ``most``] (malformed ones count as 0)."""
    try:
        return min(seconds_from_duration(message, "duration"), most)
    except WireRangeError:
        return 0.0


class MasterSettings:
    """The heartbeat interval and reconnect jitter, as the master last said."""

    def __init__(self, default_heartbeat_interval: float, reconnection: Reconnection) -> None:
        self._default = default_heartbeat_interval
        self._reconnection = reconnection
        self.heartbeat_interval = default_heartbeat_interval

    def apply(self, heartbeat: Duration, jitter: Duration) -> None:
        """What the master sent in ``AgentRegistered`` or ``AgentSettings``."""
        seconds = _seconds(heartbeat, MAX_HEARTBEAT_INTERVAL)
        self.heartbeat_interval = seconds if seconds > 0 else self._default
        self._reconnection.jitter = _seconds(jitter, MAX_RECONNECT_JITTER)
