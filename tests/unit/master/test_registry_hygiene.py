"""The registry's hygiene (issue 13): garbage collection of agents and frameworks that left,
a file deleted or replaced under a running master, a work dir that cannot be written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fairshare.resources import ResourceVector

from master.model import AgentSpec, FrameworkInfo
from master.registry import (
    MARKER_FILE,
    REGISTRY_FILE,
    UNREACHABLE,
    AgentEntry,
    RegistryError,
    RegistryWriteError,
    SqliteRegistry,
)

SPEC = AgentSpec("host", 5051, ResourceVector.parse("cpus:1;mem:64"), ())
DAY = 86_400.0


def _left(registry: SqliteRegistry, count: int, at: float) -> None:
    for index in range(count):
        registry.admit_agent(AgentEntry(f"ag-{at}-{index}", SPEC, at))
        registry.clock = lambda: at
        registry.set_agent_state(f"ag-{at}-{index}", UNREACHABLE)
        registry.put_framework(FrameworkInfo(framework_id=f"fw-{at}-{index}", name="x"), at)
        registry.remove_framework(f"fw-{at}-{index}")


def test_garbage_collection_forgets_by_age_then_by_count_oldest_first(tmp_path: Path) -> None:
    registry = SqliteRegistry.open(tmp_path)
    registry.admit_agent(AgentEntry("ag-live", SPEC, 0.0))
    registry.put_framework(FrameworkInfo(framework_id="fw-live", name="live"), 0.0)
    _left(registry, 3, 1 * DAY)
    _left(registry, 3, 10 * DAY)
    agents, frameworks = registry.collect_garbage(12 * DAY, 5 * DAY, 2, 5 * DAY, 2)
    assert len(agents) == 4 and len(frameworks) == 4  # the three old ones, then one by count
    assert "ag-live" in registry.agents and "fw-live" in registry.frameworks
    assert len([a for a in registry.agents.values() if a.state == UNREACHABLE]) == 2
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)  # durable
    assert len(reopened.agents) == 3 and len(reopened.frameworks) == 3
    assert reopened.collect_garbage(12 * DAY, 5 * DAY, 2, 5 * DAY, 2) == ([], [])


@pytest.mark.parametrize("what", ["deleted", "replaced", "marker deleted"])
def test_a_file_deleted_or_replaced_under_the_master_fails_the_next_write(
    tmp_path: Path, what: str
) -> None:
    registry = SqliteRegistry.open(tmp_path)
    registry.admit_agent(AgentEntry("ag-1", SPEC, 0.0))
    path = tmp_path / (MARKER_FILE if what == "marker deleted" else REGISTRY_FILE)
    if what == "replaced":
        copy = tmp_path / "copy"
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)
    else:
        path.unlink()
    with pytest.raises(RegistryWriteError, match=r"vanished|replaced") as caught:
        registry.admit_agent(AgentEntry("ag-2", SPEC, 0.0))
    assert "restore" in str(caught.value)
    assert "ag-2" not in registry.agents  # nothing acknowledged that would be lost


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only directories")
def test_a_work_dir_that_cannot_be_written_stops_the_open(tmp_path: Path) -> None:
    SqliteRegistry.open(tmp_path).close()
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(RegistryError, match="cannot be written"):
            SqliteRegistry.open(tmp_path)
    finally:
        tmp_path.chmod(0o700)
