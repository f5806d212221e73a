"""Caps on what agents may report: per agent, per agent principal, and how many resource names
the cluster knows (docs/security.md, "Limits").

A fake agent with 4e15 cpus would shrink every framework's cpu share to nothing; fifty agents
of one principal, each at the per-agent cap, would do the same; a stream of agents each
reporting new resource names would grow every per-resource metric without end. So:

- ``ResourceCap``: the most of each resource one agent (``--max-agent-resources``) or all the
  agents of one principal (``--max-principal-resources``) may report. Its ``named`` part caps the
  names it lists; ``other`` caps every name it does not list (written ``*:QUANTITY``), so no
  name is uncapped;
- ``check_agent`` and ``check_principal``: INVALID_ARGUMENT naming the resource, the quantity and
  the flag (an agent too big to be any machine is malformed, not a quota matter);
- ``check_names``: RESOURCE_EXHAUSTED when an agent would bring the cluster past
  ``--max-resource-names`` distinct resource names (agents already known keep theirs).

Invariants: pure functions of their arguments (no state, no I/O); quantities are compared as
exact millis; a cap's ``other`` is at least one milli.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from fairshare.resources import ResourceError, ResourceVector

from master.core.errors import InvalidArgument, ResourceExhausted

__all__ = [
    "DEFAULT_MAX_AGENT_RESOURCES",
    "DEFAULT_MAX_PRINCIPAL_RESOURCES",
    "DEFAULT_MAX_RESOURCE_NAMES",
    "OTHER",
    "ResourceCap",
    "check_agent",
    "check_names",
    "check_principal",
    "quantity",
]

OTHER: Final = "*"
"""How a cap names every resource it does not list (``*:1000000``)."""


def quantity(millis: int) -> str:
    """Millis as a quantity the flags read back (``100000``, ``0.5``)."""
    whole, rest = divmod(millis, 1000)
    return str(whole) if not rest else f"{millis / 1000:.3f}".rstrip("0")


@dataclass(frozen=True, slots=True)
class ResourceCap:
    """The most of each resource: ``named`` for the names it lists, ``other_millis`` for every
    other name."""

    named: ResourceVector
    other_millis: int

    def millis(self, name: str) -> int:
        """The cap of ``name`` in millis."""
        return self.named.millis(name) if name in self.named else self.other_millis

    def text(self, name: str) -> str:
        """The cap of ``name`` as the flag writes it (``cpus:100000``, ``*:1e+06``)."""
        key = name if name in self.named else OTHER
        return f"{key}:{quantity(self.millis(name))}"

    @classmethod
    def parse(cls, text: str) -> ResourceCap:
        """``cpus:8;mem:16384;*:1000`` as a cap (``ValueError`` naming the bad part); without a
        ``*`` entry every other name is capped at the largest listed quantity."""
        parts = [part.strip() for part in text.split(";") if part.strip()]
        others = [part for part in parts if part.split(":", 1)[0].strip() == OTHER]
        if len(others) > 1:
            raise ValueError(f"{OTHER!r} is given twice")
        named_text = ";".join(part for part in parts if part not in others)
        try:
            named = ResourceVector.parse(named_text) if named_text else ResourceVector()
            quantity = others[0].split(":", 1)[1] if others and ":" in others[0] else ""
            other = ResourceVector.parse(f"other:{quantity}") if others else None
        except ResourceError as error:
            raise ValueError(str(error).replace("'other'", repr(OTHER))) from None
        if other is not None:
            other_millis = other.millis("other") if "other" in other else 0
        else:
            other_millis = max((millis for _, millis in named.millis_items()), default=0)
        if other_millis <= 0:
            raise ValueError(f"give a positive cap for other names ('{OTHER}:QUANTITY')")
        return cls(named, other_millis)

    def __str__(self) -> str:
        other = f"{OTHER}:{quantity(self.other_millis)}"
        return f"{self.named};{other}" if self.named else other


DEFAULT_MAX_AGENT_RESOURCES: Final = ResourceCap.parse(
    "cpus:100000;mem:1073741824;disk:1099511627776;gpus:10000;*:1000000"
)
"""The most one agent may report: 100,000 cpus, 1 PiB of memory and 1 EiB of disk (in MiB),
10,000 gpus, a million of any other resource; far above any machine (the largest have ~2,000
cpus and 32 TiB)."""
DEFAULT_MAX_PRINCIPAL_RESOURCES: Final = ResourceCap.parse(
    "cpus:10000000;mem:107374182400;disk:109951162777600;gpus:1000000;*:100000000"
)
"""The most all agents of one principal may report together: a hundred agents at the
per-agent cap (10 million cpus; clusters of one principal for every agent fit easily). An
operator whose agents use one principal each lowers it to what one tenant's machines can be."""
DEFAULT_MAX_RESOURCE_NAMES: Final = 256
"""Distinct resource names over all agents (clusters use a handful: cpus, mem, disk, gpus,
a few custom ones)."""


def _refuse(what: str, name: str, millis: int, cap: ResourceCap, flag: str) -> InvalidArgument:
    return InvalidArgument(
        f"agent_info.resources: {name}:{quantity(millis)} is more than {what} may have"
        f" ({flag} {cap.text(name)})"
    )


def check_agent(resources: ResourceVector, cap: ResourceCap) -> None:
    """INVALID_ARGUMENT naming the first resource of one agent above ``cap``."""
    for name, millis in resources.millis_items():
        if millis > cap.millis(name):
            raise _refuse("one agent", name, millis, cap, "--max-agent-resources")


def check_principal(
    principal: str,
    others: Mapping[str, int],
    resources: ResourceVector,
    cap: ResourceCap,
) -> None:
    """INVALID_ARGUMENT naming the first resource that ``resources`` (one agent's) would bring
    ``principal``'s agents past ``cap``; ``others`` are the millis its other agents report."""
    for name, millis in resources.millis_items():
        total = others.get(name, 0) + millis
        if total > cap.millis(name):
            who = f"the agents of principal {principal!r}" if principal else "anonymous agents"
            raise InvalidArgument(
                f"agent_info.resources: {name}:{quantity(millis)} would bring {who} to"
                f" {quantity(total)}, more than they may have together"
                f" (--max-principal-resources {cap.text(name)})"
            )


def check_names(resources: ResourceVector, known: Collection[str], most: int) -> None:
    """RESOURCE_EXHAUSTED when the names of ``resources`` not in ``known`` (the names the
    cluster's agents report) would make more than ``most`` distinct names."""
    new = sorted(name for name in resources if name not in known)
    if new and len(known) + len(new) > most:
        raise ResourceExhausted(
            f"agent_info.resources: the cluster knows {len(known)} resource names, at most"
            f" {most} (--max-resource-names); refused new names {', '.join(new[:5])}"
        )
