"""What ``fairshare run`` says before it waits (issue 24, item 3): unknown resource names with
the known ones, and why a shape fits no agent, Nomad-style."""

from __future__ import annotations

from typing import Any

from client_commands.preflight import known_names, unknown_names, unplaceable, why_nothing_runs
from framework_sdk import ResourceVector


def agent(total: str, free: str | None = None, state: str = "ACTIVE") -> dict[str, Any]:
    vector = ResourceVector.parse(total)
    return {
        "state": state,
        "resources": {
            "total": vector.to_dict(),
            "free": ResourceVector.parse(free or total).to_dict(),
        },
    }


def cluster(*agents: dict[str, Any]) -> dict[str, Any]:
    return {"agents": list(agents)}


def shape(text: str) -> ResourceVector:
    return ResourceVector.parse(text)


def test_a_typo_is_refused_with_the_known_names_and_a_guess() -> None:
    document = cluster(agent("cpus:8;mem:16384"), agent("cpus:4;mem:8192;fpgas:2"))
    assert known_names(document) == ["cpus", "disk", "fpgas", "gpus", "mem"]
    said = unknown_names(shape("cpu:1"), document)
    assert said is not None
    assert "unknown resource name 'cpu' (did you mean cpus?)" in said
    assert "cpus, disk, fpgas, gpus, mem" in said and "2 agent(s)" in said
    assert unknown_names(shape("fpgas:1;cpus:1"), document) is None  # a custom one, advertised
    assert unknown_names(shape("gpus:1"), document) is None  # usual, even if nobody has it


def test_gone_agents_advertise_nothing_and_without_agents_the_usual_names_stand() -> None:
    document = cluster(agent("cpus:1;mem:1;fpgas:1", state="GONE"))
    assert "no agent registered yet" in (unknown_names(shape("fpgas:1"), document) or "")
    assert unknown_names(shape("cpus:1;mem:1"), cluster()) is None


def test_a_shape_larger_than_every_agent_is_said_as_nomad_does() -> None:
    document = cluster(agent("cpus:8;mem:16384"), agent("cpus:16;mem:4096"))
    assert unplaceable(shape("cpus:1;mem:99999999"), document) == (
        "no agent has mem:99999999; the largest has mem:16384"
    )
    assert unplaceable(shape("cpus:32;mem:99999999"), document) == (
        "no agent has cpus:32 or mem:99999999; the most any agent has: cpus:16, mem:16384"
    )
    assert unplaceable(shape("gpus:1"), document) == "no agent has gpus:1; the largest has no gpus"
    split = unplaceable(shape("cpus:16;mem:16384"), document)  # each fits somewhere, not both
    assert split is not None and split.startswith("no agent has cpus:16;mem:16384 in one machine")
    assert unplaceable(shape("cpus:8;mem:16384"), document) is None
    assert unplaceable(shape("cpus:99"), cluster()) is None  # no agent yet: nothing to say


def test_why_nothing_runs_names_the_room_left_when_the_shape_fits_in_principle() -> None:
    busy = cluster(agent("cpus:4;mem:4096", free="cpus:0.5;mem:512"))
    said = why_nothing_runs(shape("cpus:1;mem:128"), busy)
    assert said.startswith("no agent has cpus:1;mem:128 free now (the most free: cpus:0.5;mem:512)")
    assert why_nothing_runs(shape("cpus:1"), cluster()) == "no agent has registered with the master"
    away = cluster(agent("cpus:4;mem:4096", state="UNREACHABLE"))
    assert why_nothing_runs(shape("cpus:1"), away) == "no agent is ACTIVE (they are UNREACHABLE)"
