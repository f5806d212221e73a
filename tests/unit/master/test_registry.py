"""The master's durable registry (``master.registry``): what it keeps across a reopen, and the
files it refuses to use (missing, corrupt, another cluster's, newer schema)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fairshare.resources import ResourceVector

from master.core.quota import Quota
from master.model import AgentSpec, FrameworkInfo
from master.registry import (
    MARKER_FILE,
    REGISTRY_FILE,
    SCHEMA_VERSION,
    UNREACHABLE,
    AgentEntry,
    RegistryError,
    RegistryWriteError,
    SqliteRegistry,
)

SPEC = AgentSpec("host-1", 5051, ResourceVector.parse("cpus:4;mem:1024;gpus:1"), (("rack", "r1"),))
FRAMEWORK = FrameworkInfo(
    framework_id="fw-1",
    name="batch",
    role="analytics",
    weight=2.0,
    failover_timeout=30.0,
    capabilities=frozenset({"PARTITION_AWARE"}),
)


def filled(work_dir: Path) -> SqliteRegistry:
    registry = SqliteRegistry.open(work_dir)
    registry.admit_agent(AgentEntry("ag-1", SPEC, 100.0))
    registry.admit_agent(AgentEntry("ag-2", SPEC, 101.0))
    registry.set_agent_state("ag-2", UNREACHABLE)
    registry.set_agents_active(["ag-1"], False)
    registry.put_framework(FRAMEWORK, 102.0)
    registry.put_framework(FrameworkInfo(framework_id="fw-2", name="gone"), 103.0)
    registry.set_weight("role", "analytics", 3.0)
    registry.set_weight("framework", "fw-1", 4.0)
    registry.set_weight("framework", "fw-2", 5.0)
    registry.set_weight("role", "dropped", 6.0)
    registry.set_weight("role", "dropped", None)
    registry.remove_framework("fw-2")  # its weight goes with it
    return registry


def test_everything_written_is_read_back_after_a_reopen(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    weights = (registry.role_weights, registry.framework_weights)
    assert weights == ({"analytics": 3.0}, {"fw-1": 4.0})
    mirror = (registry.agents, registry.frameworks, weights, registry.cluster_id)
    assert registry.writes == 12
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    reopened_weights = (reopened.role_weights, reopened.framework_weights)
    assert (reopened.agents, reopened.frameworks, reopened_weights) == mirror[:3]
    assert reopened.cluster_id == mirror[3]
    assert reopened.agents["ag-1"].spec == SPEC and not reopened.agents["ag-1"].active
    assert reopened.agents["ag-2"].state == UNREACHABLE
    assert reopened.frameworks["fw-1"].spec == FRAMEWORK
    assert reopened.frameworks["fw-2"].removed
    assert (tmp_path / MARKER_FILE).read_text().strip() == reopened.cluster_id


def test_a_fresh_work_dir_gets_a_new_registry(tmp_path: Path) -> None:
    first = SqliteRegistry.open(tmp_path / "a")
    second = SqliteRegistry.open(tmp_path / "b")
    assert first.cluster_id != second.cluster_id
    assert not first.agents and not first.frameworks
    assert not list((tmp_path / "a").glob("*.new*"))  # built aside, then renamed


def test_a_missing_registry_is_never_recreated(tmp_path: Path) -> None:
    filled(tmp_path).close()
    (tmp_path / REGISTRY_FILE).unlink()
    with pytest.raises(RegistryError, match=r"is missing, but .*cluster\.id says cluster"):
        SqliteRegistry.open(tmp_path)
    assert not (tmp_path / REGISTRY_FILE).exists()


def test_a_corrupt_registry_is_refused(tmp_path: Path) -> None:
    filled(tmp_path).close()
    (tmp_path / REGISTRY_FILE).write_bytes(b"\x00garbage" * 512)
    with pytest.raises(RegistryError, match="corrupt"):
        SqliteRegistry.open(tmp_path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    filled(tmp_path).close()
    newer = SCHEMA_VERSION + 1
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:
        db.execute(f"UPDATE meta SET value = '{newer}' WHERE key = 'schema_version'")
    with pytest.raises(
        RegistryError, match=f"schema version {newer}, newer than this master's {SCHEMA_VERSION}"
    ):
        SqliteRegistry.open(tmp_path)


def test_another_clusters_registry_is_refused(tmp_path: Path) -> None:
    filled(tmp_path).close()
    (tmp_path / MARKER_FILE).write_text("someone-else\n")
    with pytest.raises(RegistryError, match="another cluster's registry"):
        SqliteRegistry.open(tmp_path)


def test_a_row_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    filled(tmp_path).close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:
        db.execute("UPDATE agents SET state = 'SLEEPING' WHERE agent_id = 'ag-1'")
    with pytest.raises(RegistryError, match="invalid row"):
        SqliteRegistry.open(tmp_path)


def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    before = dict(registry.frameworks)
    registry._db.execute("PRAGMA query_only = ON")  # every write now fails
    with pytest.raises(RegistryWriteError):
        registry.put_framework(FrameworkInfo(framework_id="fw-3", name="new"), 104.0)
    with pytest.raises(RegistryWriteError):
        registry.remove_framework("fw-1")
    assert registry.frameworks == before
    registry._db.execute("PRAGMA query_only = OFF")
    registry.close()
    assert SqliteRegistry.open(tmp_path).frameworks == before


# -- quotas (schema 3) ----------------------------------------------------------------------------

QUOTAS = {
    "eng": Quota(ResourceVector.parse("cpus:16;mem:65536"), ResourceVector.parse("cpus:32")),
    "eng/dev": Quota(ResourceVector.parse("cpus:0.5"), None),
    "*": Quota(ResourceVector(), ResourceVector.parse("gpus:1")),
}


def test_quotas_are_read_back_and_a_cleared_one_is_gone(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    for role, quota in QUOTAS.items():
        registry.set_quota(role, quota)
    registry.set_quota("sci", Quota(ResourceVector.parse("cpus:1"), None))
    registry.set_quota("sci", None)
    writes = registry.writes
    registry.set_quota("never-set", Quota())  # clearing what is not there writes nothing
    assert registry.quotas == QUOTAS and registry.writes == writes
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    assert reopened.quotas == QUOTAS
    assert reopened.role_weights == {"analytics": 3.0}


def test_a_schema_2_registry_is_upgraded_in_place_and_loads_unchanged(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    mirror = (registry.agents, registry.frameworks, registry.role_weights, registry.cluster_id)
    registry.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:  # what a master of schema 2 left
        db.execute("DROP TABLE quotas")
        db.execute("DROP TABLE reservations")
        db.execute("ALTER TABLE agents DROP COLUMN drain")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    upgraded = SqliteRegistry.open(tmp_path)
    loaded = (upgraded.agents, upgraded.frameworks, upgraded.role_weights, upgraded.cluster_id)
    assert loaded == mirror and upgraded.quotas == {}
    upgraded.set_quota("eng", QUOTAS["eng"])
    upgraded.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(version) == SCHEMA_VERSION == 5
    assert SqliteRegistry.open(tmp_path).quotas == {"eng": QUOTAS["eng"]}


def test_a_schema_3_registry_gets_the_reservations_table(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    registry.set_quota("eng", QUOTAS["eng"])
    registry.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:  # what a master of schema 3 left
        db.execute("DROP TABLE reservations")
        db.execute("ALTER TABLE agents DROP COLUMN drain")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    upgraded = SqliteRegistry.open(tmp_path)
    assert upgraded.quotas == {"eng": QUOTAS["eng"]} and upgraded.reservations == {}
    upgraded.set_reservations("ag-1", {"eng": ResourceVector.parse("cpus:1")})
    upgraded.close()
    assert SqliteRegistry.open(tmp_path).reservations == {
        "ag-1": {"eng": ResourceVector.parse("cpus:1")}
    }


def test_dynamic_reservations_are_read_back_whole_and_forgotten_with_their_agent(
    tmp_path: Path,
) -> None:
    registry = filled(tmp_path)
    reserved = {
        "eng": ResourceVector.parse("cpus:2;mem:512"),
        "eng/ml": ResourceVector.parse("gpus:1"),
    }
    registry.set_reservations("ag-1", reserved)
    registry.set_reservations("ag-2", {"sci": ResourceVector.parse("cpus:1")})
    registry.set_reservations("ag-2", {})
    writes = registry.writes
    registry.set_reservations("ag-3", {})  # nothing to clear: nothing written
    assert registry.writes == writes
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    assert reopened.reservations == {"ag-1": reserved}
    reopened.set_agent_state("ag-1", UNREACHABLE)
    forgotten, _ = reopened.collect_garbage(1e12, 0.0, 0, 1e12, 100)
    assert "ag-1" in forgotten and reopened.reservations == {}
    reopened.close()
    assert SqliteRegistry.open(tmp_path).reservations == {}


def test_a_reservations_row_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    registry.set_reservations("ag-1", {"eng": ResourceVector.parse("cpus:1")})
    registry.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:
        db.execute("""UPDATE reservations SET reserved = '{"eng": {"cpus": 1.5}}'""")
    with pytest.raises(RegistryError, match="invalid row"):
        SqliteRegistry.open(tmp_path)


def test_a_quota_row_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    registry = filled(tmp_path)
    registry.set_quota("eng", QUOTAS["eng"])
    registry.close()
    with sqlite3.connect(tmp_path / REGISTRY_FILE) as db:
        db.execute("""UPDATE quotas SET quota = '{"guarantee": {"cpus": -1}, "limit": null}'""")
    with pytest.raises(RegistryError, match="invalid row"):
        SqliteRegistry.open(tmp_path)
