"""Agent drains in the registry (issue 24, item 11): durable in SQLite (and a schema 4 file
upgraded to hold them), ended by reactivation, each change one write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fairshare.resources import ResourceVector

from master.model import AgentSpec
from master.registry import REGISTRY_FILE, AgentEntry, SqliteRegistry
from master.registry.entries import AgentDrain, drain_from_json, drain_to_json

SPEC = AgentSpec("h1", 0, ResourceVector.parse("cpus:4;mem:4096"))
DRAINING = AgentDrain("DRAINING", 1000.0, 1060.0)


def test_a_drain_is_read_back_and_reactivation_ends_it(tmp_path: Path) -> None:
    registry = SqliteRegistry.open(tmp_path)
    registry.admit_agent(AgentEntry("ag-1", SPEC, 100.0))
    registry.admit_agent(AgentEntry("ag-2", SPEC, 100.0))
    registry.set_agent_drain("ag-1", DRAINING)
    writes = registry.writes
    registry.set_agent_drain("ag-1", DRAINING)  # the same drain: nothing written
    assert registry.writes == writes
    registry.set_agent_drain("ag-2", AgentDrain("DRAINED", 1000.0))
    assert registry.draining == {"ag-1"}  # the drain timer's index: DRAINED is done
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    assert reopened.draining == {"ag-1"}  # rebuilt as the rows are read back
    assert reopened.agents["ag-1"].drain == DRAINING and not reopened.agents["ag-1"].active
    assert reopened.agents["ag-2"].drain == AgentDrain("DRAINED", 1000.0, None)
    reopened.set_agents_active(["ag-1", "ag-2"], True)
    assert not reopened.draining
    reopened.close()
    ended = SqliteRegistry.open(tmp_path)
    assert all(e.drain is None and e.active for e in ended.agents.values())


def test_a_schema_4_registry_is_upgraded_with_no_drain(tmp_path: Path) -> None:
    registry = SqliteRegistry.open(tmp_path)
    registry.admit_agent(AgentEntry("ag-1", SPEC, 100.0))
    registry.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:  # what a master of schema 4 left
        db.execute("ALTER TABLE agents DROP COLUMN drain")
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    upgraded = SqliteRegistry.open(tmp_path)
    assert upgraded.agents["ag-1"].drain is None
    upgraded.set_agent_drain("ag-1", DRAINING)
    upgraded.close()
    assert SqliteRegistry.open(tmp_path).agents["ag-1"].drain == DRAINING


def test_the_json_form_round_trips() -> None:
    for drain in (DRAINING, AgentDrain("DRAINED", 5.0)):
        assert drain_from_json(drain_to_json(drain)) == drain
