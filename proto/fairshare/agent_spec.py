"""``AgentSpec``: who an agent is and what it offers, as it registers (the wire's ``AgentInfo``).

One definition for the agent (what it registers and checkpoints) and the master (what it
admits, keeps in its registry and allocates); ``fairshare.wire`` style conversions live at each
side's boundary.

Invariants: immutable; ``resources`` are what the agent offers in all; ``attributes`` are
``(name, value)`` pairs in the order given; ``reservations`` are static reservations
``(role path, resources)`` within ``resources`` (``--reserve``); pure (no wire API).
"""

from __future__ import annotations

from dataclasses import dataclass

from fairshare.resources import ResourceVector

__all__ = ["AgentSpec"]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """What an agent registers with (``AgentInfo``)."""

    hostname: str
    port: int
    resources: ResourceVector
    attributes: tuple[tuple[str, str], ...] = ()
    version: str = ""
    reservations: tuple[tuple[str, ResourceVector], ...] = ()
