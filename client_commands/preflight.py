"""What ``fairshare run`` checks against the cluster before it waits, so it never waits silently.

Pure functions over the status document (``client_commands.status_document.state_to_dict``: the
master's GetState, which lists every agent with the resources it advertises):

- ``unknown_names``: resource names of a task shape that no agent advertises and that are not
  one of the usual four (``cpus``, ``mem``, ``disk``, ``gpus``), with the names the cluster
  knows: ``cpu:1`` is a typo to refuse at once (an agent may advertise custom resources, such
  as ``fpgas``: those are known once it registered);
- ``unplaceable``: why no agent could ever run the shape, Nomad-style (``no agent has
  mem:99999999; the largest has mem:16384``), or None when one agent is big enough;
- ``why_nothing_runs``: what a run that got no task running in time tells its user (the shape
  that fits no agent, or the room the agents have free now).

Agents removed for good (``GONE``) are left out; the others count, deactivated ones too (they
come back) and a note says when only deactivated or unreachable agents are big enough.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fairshare.resources import ResourceVector

__all__ = ["USUAL_NAMES", "known_names", "unknown_names", "unplaceable", "why_nothing_runs"]

USUAL_NAMES: Final = ("cpus", "mem", "disk", "gpus")
"""Names accepted even before any agent advertised them."""


def _agents(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [a for a in document.get("agents", ()) if a.get("state") != "GONE"]


def _vector(quantities: Mapping[str, float]) -> ResourceVector:
    return ResourceVector(dict(quantities))


def known_names(document: Mapping[str, Any]) -> list[str]:
    """The usual names and every name an agent advertises, sorted."""
    names = set(USUAL_NAMES)
    for agent in _agents(document):
        names.update(agent["resources"]["total"])
    return sorted(names)


def unknown_names(shape: ResourceVector, document: Mapping[str, Any]) -> str | None:
    """Why ``shape`` names a resource nobody has (listing the known names), or None."""
    known = known_names(document)
    unknown = sorted(name for name in shape if name not in known)
    if not unknown:
        return None
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            hints.append(close[0])
    agents = len(_agents(document))
    whose = f"those the {agents} agent(s) advertise" if agents else "no agent registered yet"
    said = ", ".join(repr(name) for name in unknown)
    meant = f" (did you mean {', '.join(hints)}?)" if hints else ""
    plural = "s" if len(unknown) > 1 else ""
    return (
        f"unknown resource name{plural} {said}{meant}; the known names are"
        f" {', '.join(known)} (the usual four, and {whose})"
    )


def _largest(name: str, agents: Sequence[Mapping[str, Any]]) -> float:
    return max((float(a["resources"]["total"].get(name, 0.0)) for a in agents), default=0.0)


def _quantity(name: str, value: float) -> str:
    return str(ResourceVector({name: value})) if value else f"no {name}"


def unplaceable(shape: ResourceVector, document: Mapping[str, Any]) -> str | None:
    """Why no agent could ever run one task of ``shape`` (by what the agents have in all, free
    or not), or None when one could (or none registered yet: nothing to say)."""
    agents = _agents(document)
    if not agents:
        return None
    totals = [_vector(a["resources"]["total"]) for a in agents]
    if any(shape.fits_in(total) for total in totals):
        return None
    too_big = [name for name in shape if shape[name] > _largest(name, agents)]
    if too_big:
        wanted = " or ".join(_quantity(name, shape[name]) for name in too_big)
        largest = [_quantity(name, _largest(name, agents)) for name in too_big]
        if len(largest) == 1:
            return f"no agent has {wanted}; the largest has {largest[0]}"
        return f"no agent has {wanted}; the most any agent has: {', '.join(largest)}"
    best = max(totals, key=lambda total: sum(1 for name in shape if shape[name] <= total[name]))
    return (
        f"no agent has {shape} in one machine (each resource is on some agent, not all on"
        f" one); the closest has {best}"
    )


def why_nothing_runs(shape: ResourceVector, document: Mapping[str, Any]) -> str:
    """Why no task of ``shape`` runs now: it fits no agent, or the agents have no room free."""
    problem = unplaceable(shape, document)
    if problem is not None:
        return problem
    agents = _agents(document)
    if not agents:
        return "no agent has registered with the master"
    active = [a for a in agents if a.get("state") == "ACTIVE"]
    if not active:
        states = sorted({str(a.get("state")) for a in agents})
        return f"no agent is ACTIVE (they are {', '.join(states)})"
    frees = [_vector(a["resources"]["free"]) for a in active]
    if any(shape.fits_in(free) for free in frees):
        return (
            f"an agent has room for {shape} but no offer was taken yet (the master offers the"
            " frameworks of lowest share first: fairshare status)"
        )
    most = max(frees, key=lambda free: sum(min(free[n] / shape[n], 1.0) for n in shape))
    return (
        f"no agent has {shape} free now (the most free: {most or 'nothing'}); the cluster is in"
        " use: fairshare status shows by whom"
    )
