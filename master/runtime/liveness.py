"""``Liveness``: when each agent is due to be heard from, and which agents are late
(docs/architecture.md §4).

Agents talk to the master over one stream each (agent.proto); any message on it counts as
hearing from the agent, and an agent sends a heartbeat when it has sent nothing else for the
heartbeat interval. The interval scales with the cluster so that liveness costs the master a
bounded rate of messages whatever the number of agents:

    interval = max(base, agents / HEARTBEAT_BUDGET)        (the high-water mark: never shrinks)
    timeout  = max(agent_timeout, MISSED_HEARTBEATS * interval)

``base`` is min(5 s, agent_timeout / 3), so in clusters up to 2,500 agents the interval is the
base and the timeout ``--agent-timeout`` exactly; 10,000 agents heartbeat every 20 s (500
messages per second in all) and are late after 60 s of silence. Because the interval only grows
while the master runs, no agent is ever told an interval longer than a third of the timeout.

An agent whose stream ended is due ``agent_timeout`` after that (or earlier, when its open-stream
deadline comes first): a peer that went away is not given the longer large-cluster timeout.

Data structure: insertion-ordered dicts. ``_open`` maps agent id -> when it was last heard;
``heard`` moves the agent to its end, so it is sorted by that time, and an agent is late once
``last heard + timeout`` (the timeout of now: an interval that grew since counts for everyone
at once) has passed. ``_closed`` maps agent id -> when its stream ended plus ``agent_timeout``,
sorted the same way. ``late`` reads the late agents off the fronts: O(1) per agent heard and
O(late + 1) per check, no scan over all agents. Pure: no clock (``now`` is passed in), no I/O.

Invariants: an agent is in ``_open`` while it has a live registration (whatever its stream), in
``_closed`` too while its stream is closed; agents recovering after a master restart are in
neither until they reregister, or until the recovery ends without them (then ``expire`` puts
them in ``_due``: late at once); agents marked unreachable are in none (``forget``); ``late``
never returns an agent twice in one call.
"""

from __future__ import annotations

import math

__all__ = [
    "HEARTBEAT_BUDGET",
    "MISSED_HEARTBEATS",
    "REREGISTRATION_RATE",
    "Liveness",
    "base_interval",
    "reconnect_jitter",
]

HEARTBEAT_BUDGET = 500.0
"""Agent heartbeats per second the master plans for (the interval grows to keep to it)."""
MISSED_HEARTBEATS = 3
"""Heartbeat intervals an agent with an open stream may miss before it is late."""


def base_interval(agent_timeout: float) -> float:
    """The heartbeat interval of small clusters: min(5 s, agent_timeout / 3)."""
    return min(5.0, agent_timeout / MISSED_HEARTBEATS)


class Liveness:
    """Deadlines of the live agents, ordered, and the heartbeat interval they were told."""

    __slots__ = ("_closed", "_due", "_open", "agent_timeout", "interval")

    def __init__(self, agent_timeout: float, interval: float | None = None) -> None:
        self.agent_timeout = agent_timeout
        self.interval = base_interval(agent_timeout) if interval is None else interval
        self._open: dict[str, float] = {}
        self._closed: dict[str, float] = {}
        self._due: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._open

    @property
    def timeout(self) -> float:
        """How long an agent with an open stream may stay silent."""
        return max(self.agent_timeout, MISSED_HEARTBEATS * self.interval)

    def resize(self, agents: int) -> bool:
        """Grow the interval for ``agents`` agents; True if it grew by a quarter or more since
        the last growth (worth telling the connected agents)."""
        wanted = agents / HEARTBEAT_BUDGET
        if wanted < self.interval * 1.25:
            return False
        self.interval = wanted
        return True

    def heard(self, agent_id: str, now: float) -> None:
        """The agent sent something (or its stream just opened)."""
        self._due.pop(agent_id, None)
        self._closed.pop(agent_id, None)
        self._open.pop(agent_id, None)
        self._open[agent_id] = now

    def stream_closed(self, agent_id: str, now: float) -> None:
        """The agent's stream ended: it is due ``agent_timeout`` from now at the latest."""
        if agent_id in self._open and agent_id not in self._closed:
            self._closed[agent_id] = now + self.agent_timeout

    def expire(self, agent_id: str) -> None:
        """Make the agent late now (a recovering agent that did not come back in time)."""
        self._due[agent_id] = None

    def forget(self, agent_id: str) -> None:
        """The agent left the pool (unreachable, or known only from the registry)."""
        self._open.pop(agent_id, None)
        self._closed.pop(agent_id, None)
        self._due.pop(agent_id, None)

    def late(self, now: float, limit: int | None = None) -> list[str]:
        """Agents past their deadline, oldest first, at most ``limit``; they stay tracked until
        ``forget``."""
        most = math.inf if limit is None else limit
        found: dict[str, None] = {}
        for agent_id in self._due:
            if len(found) >= most:
                return list(found)
            found[agent_id] = None
        heard_by = now - self.timeout
        for agent_id, heard in self._open.items():
            if heard > heard_by or len(found) >= most:
                break
            found[agent_id] = None
        for agent_id, deadline in self._closed.items():
            if deadline > now or len(found) >= most:
                break
            found[agent_id] = None
        return list(found)

    def next_deadline(self) -> float | None:
        """The earliest deadline (None when no agent is tracked); -inf when one is due now."""
        if self._due:
            return -math.inf
        firsts = [next(iter(self._open.values())) + self.timeout] if self._open else []
        firsts += [next(iter(self._closed.values()))] if self._closed else []
        return min(firsts) if firsts else None


REREGISTRATION_RATE = 5000.0
"""Agent (re)registrations per second the master plans for when it sizes reconnect jitter."""


def reconnect_jitter(agents: int) -> float:
    """How long a fleet of ``agents`` spreads its reconnections over (agent.proto's
    ``reconnect_jitter``): at most ``REREGISTRATION_RATE`` of them per second."""
    return agents / REREGISTRATION_RATE
