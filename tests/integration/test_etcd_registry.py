"""The HA masters' registry in a real etcd (``master.registry.etcd_store``,
docs/architecture.md §5):
what one term writes, the next term reads back; a write of a term that is no longer the leader's
is refused (fenced), changes nothing, and tells the leadership to step down; a registry that
etcd lost is never silently recreated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fairshare.etcd import leader_key
from fairshare.master_target import EtcdTarget
from fairshare.resources import ResourceVector

from master.core.quota import Quota
from master.ha.etcd_thread import EtcdThread
from master.model import AgentSpec, FrameworkInfo
from master.registry import (
    SCHEMA_VERSION,
    UNREACHABLE,
    AgentEntry,
    RegistryError,
    RegistryWriteError,
)
from master.registry.entries import AgentDrain
from master.registry.etcd_store import EtcdRegistry, RegistryFenced

SPEC = AgentSpec("host-1", 5051, ResourceVector.parse("cpus:4;mem:1024"), (("rack", "r1"),))
FRAMEWORK = FrameworkInfo(
    framework_id="fw-1", name="batch", role="analytics", weight=2.0, failover_timeout=30.0
)


@pytest.fixture
def etcd(etcd_url: str) -> Iterator[EtcdThread]:
    thread = EtcdThread(EtcdTarget.parse(etcd_url), timeout=2.0)
    try:
        yield thread
    finally:
        thread.stop()


def take_leadership(etcd: EtcdThread, value: bytes) -> int:
    """Put the leader key afresh (a new term) and return its create revision (the epoch)."""
    key = leader_key(etcd.client.target)

    async def put() -> int:
        await etcd.client.call(lambda client: client.delete(key))
        await etcd.client.call(lambda client: client.put(key, value))
        found: Any = await etcd.client.call(lambda client: client.get(key))
        return int(found.create_revision)

    return etcd.run(put(), 10)


def work_dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return path


def registry(
    etcd: EtcdThread, epoch: int, fenced: list[str] | None = None, key: bytes | None = None
) -> EtcdRegistry:
    return EtcdRegistry(
        etcd.client.target,
        etcd.client,
        etcd.run,
        epoch,
        2.0,
        on_fenced=None if fenced is None else fenced.append,
        key=key,
    )


def test_the_next_term_reads_what_the_last_wrote(etcd: EtcdThread, tmp_path: Path) -> None:
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    first.admit_agent(AgentEntry("ag-1", SPEC, 100.0))
    first.set_agent_state("ag-1", UNREACHABLE)
    first.put_framework(FRAMEWORK, 101.0)
    first.set_weight("role", "analytics", 3.0)

    second = registry(etcd, take_leadership(etcd, b"two"))
    second.load(work_dir(tmp_path, "m2"))
    assert second.cluster_id == first.cluster_id
    assert second.agents == first.agents and second.agents["ag-1"].state == UNREACHABLE
    assert second.frameworks == first.frameworks
    assert second.role_weights == {"analytics": 3.0}


def test_a_deposed_leaders_write_is_refused_and_changes_nothing(
    etcd: EtcdThread, tmp_path: Path
) -> None:
    fenced: list[str] = []
    old = registry(etcd, take_leadership(etcd, b"old"), fenced)
    old.load(work_dir(tmp_path, "old"))
    old.admit_agent(AgentEntry("ag-1", SPEC, 100.0))

    new_epoch = take_leadership(etcd, b"new")  # another master won a later term
    with pytest.raises(RegistryFenced):
        old.admit_agent(AgentEntry("ag-2", SPEC, 101.0))
    assert fenced and "no longer leads" in fenced[0]
    assert "ag-2" not in old.agents  # the mirror did not change either

    new = registry(etcd, new_epoch)
    new.load(work_dir(tmp_path, "new"))
    assert set(new.agents) == {"ag-1"}


def test_a_registry_etcd_lost_is_not_recreated(etcd: EtcdThread, tmp_path: Path) -> None:
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    prefix = etcd.client.target.key("registry", "")

    async def wipe() -> None:
        await etcd.client.call(lambda client: client.delete_prefix(prefix))

    etcd.run(wipe(), 10)
    again = registry(etcd, take_leadership(etcd, b"two"))
    with pytest.raises(RegistryError, match="holds no registry"):
        again.load(work_dir(tmp_path, "m1"))  # this work dir knew the cluster


def test_a_closed_registry_writes_nothing_and_does_not_call_fenced(
    etcd: EtcdThread, tmp_path: Path
) -> None:
    fenced: list[str] = []
    ended = registry(etcd, take_leadership(etcd, b"one"), fenced)
    ended.load(work_dir(tmp_path, "m1"))
    ended.close()  # its term ended; its runtime may still try a write
    with pytest.raises(RegistryWriteError, match="closed"):
        ended.admit_agent(AgentEntry("ag-late", SPEC, 100.0))
    assert not fenced and "ag-late" not in ended.agents


QUOTA = Quota(ResourceVector.parse("cpus:16;mem:65536"), ResourceVector.parse("cpus:32"))


def test_quotas_are_read_back_by_the_next_term(etcd: EtcdThread, tmp_path: Path) -> None:
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    first.set_quota("eng", QUOTA)
    first.set_quota("eng/dev", Quota(ResourceVector.parse("cpus:4"), None))
    first.set_quota("sci", Quota(ResourceVector(), ResourceVector.parse("gpus:1")))
    first.set_quota("sci", None)

    second = registry(etcd, take_leadership(etcd, b"two"))
    second.load(work_dir(tmp_path, "m2"))
    assert second.quotas == {"eng": QUOTA, "eng/dev": Quota(ResourceVector.parse("cpus:4"), None)}
    assert second.quotas == first.quotas


def test_dynamic_reservations_are_read_back_by_the_next_term(
    etcd: EtcdThread, tmp_path: Path
) -> None:
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    reserved = {"eng": ResourceVector.parse("cpus:2"), "eng/ml": ResourceVector.parse("gpus:1")}
    first.set_reservations("ag-1", reserved)
    first.set_reservations("ag-2", {"sci": ResourceVector.parse("cpus:1")})
    first.set_reservations("ag-2", {})
    second = registry(etcd, take_leadership(etcd, b"two"))
    second.load(work_dir(tmp_path, "m2"))
    assert second.reservations == {"ag-1": reserved} == first.reservations


def test_drains_are_read_back_by_the_next_term(etcd: EtcdThread, tmp_path: Path) -> None:
    """Issue 24, item 11: a drain (state, start, deadline) survives a failover; reactivating
    ends it for the next term too."""
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    first.admit_agent(AgentEntry("ag-1", SPEC, 100.0))
    first.admit_agent(AgentEntry("ag-2", SPEC, 100.0))
    first.set_agent_drain("ag-1", AgentDrain("DRAINING", 1000.0, 1060.0))
    first.set_agent_drain("ag-2", AgentDrain("DRAINED", 1000.0))
    second = registry(etcd, take_leadership(etcd, b"two"))
    second.load(work_dir(tmp_path, "m2"))
    assert second.agents == first.agents
    assert second.agents["ag-1"].drain == AgentDrain("DRAINING", 1000.0, 1060.0)
    assert not second.agents["ag-1"].active
    second.set_agents_active(["ag-1"], True)
    third = registry(etcd, take_leadership(etcd, b"three"))
    third.load(work_dir(tmp_path, "m3"))
    assert third.agents["ag-1"].drain is None and third.agents["ag-1"].active
    assert third.agents["ag-2"].drain == AgentDrain("DRAINED", 1000.0)


def test_a_schema_2_registry_loads_unchanged_and_its_meta_is_upgraded(
    etcd: EtcdThread, tmp_path: Path
) -> None:
    first = registry(etcd, take_leadership(etcd, b"one"))
    first.load(work_dir(tmp_path, "m1"))
    first.put_framework(FRAMEWORK, 101.0)
    first.set_weight("role", "analytics", 3.0)
    meta_key = etcd.client.target.key("registry", "meta")

    async def meta_version(value: int | None = None) -> int:
        found: Any = await etcd.client.call(lambda client: client.get(meta_key))
        meta = json.loads(bytes(found.value))
        if value is not None:  # what a master of schema 2 wrote
            meta["schema_version"] = value
            encoded = json.dumps(meta).encode()
            await etcd.client.call(lambda client: client.put(meta_key, encoded))
        return int(meta["schema_version"])

    etcd.run(meta_version(2), 10)
    second = registry(etcd, take_leadership(etcd, b"two"))
    second.load(work_dir(tmp_path, "m1"))
    assert second.frameworks == first.frameworks and second.role_weights == {"analytics": 3.0}
    assert second.quotas == {}
    assert etcd.run(meta_version(), 10) == SCHEMA_VERSION == 5
    assert second.reservations == {}
    second.set_quota("eng", QUOTA)
    third = registry(etcd, take_leadership(etcd, b"three"))
    third.load(work_dir(tmp_path, "m3"))
    assert third.quotas == {"eng": QUOTA}


def test_signed_rows_load_and_rows_forged_in_etcd_do_not(
    etcd: EtcdThread, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 23, finding 2: with ``--registry-key`` every row carries a signature; a row
    written into etcd by anyone else (no signature, a wrong one, a signed value moved to
    another key) is not loaded, and a master with another key refuses the registry."""
    key = b"k" * 32
    first = registry(etcd, take_leadership(etcd, b"one"), key=key)
    first.load(work_dir(tmp_path, "m1"))
    first.admit_agent(AgentEntry("ag-1", SPEC, 100.0, principal="alice"))
    first.set_weight("role", "analytics", 3.0)

    target = etcd.client.target
    agent_key = target.key("registry", "agents", "ag-1")

    async def forge() -> None:
        signed: Any = await etcd.client.call(lambda c: c.get(agent_key))
        row = json.loads(signed.value)
        await etcd.client.call(
            lambda c: c.put(target.key("registry", "agents", "ag-2"), signed.value)
        )
        row["principal"] = "mallory"
        await etcd.client.call(
            lambda c: c.put(target.key("registry", "agents", "ag-3"), json.dumps(row).encode())
        )
        for name, weight in (("ops", {"weight": 50.0}), ("eng", {"weight": 60.0, "mac": "00"})):
            forged = json.dumps(weight).encode()
            await etcd.client.call(
                lambda c, n=name, v=forged: c.put(target.key("registry", "weights", "role", n), v)
            )

    etcd.run(forge(), 10)
    second = registry(etcd, take_leadership(etcd, b"two"), key=key)
    with caplog.at_level("WARNING", logger="fairshare.master"):
        second.load(work_dir(tmp_path, "m1"))
    assert set(second.agents) == {"ag-1"} and second.agents["ag-1"].principal == "alice"
    assert second.role_weights == {"analytics": 3.0}
    quarantined = [
        r.getMessage() for r in caplog.records if "registry.row.quarantined" in r.getMessage()
    ]
    assert len(quarantined) == 4, quarantined

    other = registry(etcd, take_leadership(etcd, b"three"), key=b"x" * 32)
    with pytest.raises(RegistryError, match="meta row has no valid signature"):
        other.load(work_dir(tmp_path, "m1"))
