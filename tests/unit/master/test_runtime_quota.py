"""``OperatorCalls.set_quota`` / ``quotas`` without gRPC: every check before the registry write,
the write before the core changes, ``force`` rescinding offers and killing nothing, the ACL's
``update_quota``, and quotas recovered from the registry after a restart.

Runtimes are built with ``validate=True`` and long timers (``scenario`` of the cycle tests), so
only the calls under test change anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_runtime_cycle import R, agent, framework, offers_of, scenario, settle, spec
from test_runtime_recovery import CONFIG

from master.acl import parse
from master.core import KillTask, LaunchTasks
from master.core.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from master.core.quota import Quota
from master.model import RescindEvent
from master.registry import SqliteRegistry
from master.runtime import MasterRuntime, Unavailable
from master.runtime.authority import Authority


def quotas_of(runtime: MasterRuntime) -> tuple[dict[str, Quota], dict[str, Quota]]:
    """The quotas in the registry and in the core (always equal)."""
    return dict(runtime.state.registry.quotas), dict(runtime.state.core.quotas)


def test_set_list_and_clear_a_quota_durably() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent(runtime, "cpus:12;mem:16384")
        eng = Quota(R("cpus:16;mem:65536"), R("cpus:32"))
        view, rescinded = runtime.operator.set_quota("eng", eng)
        assert view is not None and (view.role, view.quota, rescinded) == ("eng", eng, 0)
        dev = Quota(R("cpus:4"), None)
        runtime.operator.set_quota("eng/dev", dev)
        runtime.operator.set_quota("sci", Quota(R(""), R("cpus:2")))
        expected = {"eng": eng, "eng/dev": dev, "sci": Quota(R(""), R("cpus:2"))}
        assert quotas_of(runtime) == (expected, expected)
        table = runtime.operator.quotas()
        assert [v.role for v in table.quotas] == ["eng", "eng/dev", "sci"]
        # eng/dev's guarantee is within eng's: only the top-level guarantees add up
        assert table.guaranteed == R("cpus:16;mem:65536") and table.total == R("cpus:12;mem:16384")
        assert table.overcommitted
        assert runtime.operator.set_quota("eng/dev", Quota()) == (None, 0)
        assert runtime.operator.set_quota("eng", Quota(R("cpus:8"), None))[0] is not None
        assert not runtime.operator.quotas().overcommitted
        assert set(quotas_of(runtime)[0]) == {"eng", "sci"}

    scenario(test)


@pytest.mark.parametrize(
    ("role", "quota", "says"),
    [
        ("eng", Quota(R("cpus:8"), R("cpus:4")), "above its limit"),
        ("eng/dev", Quota(R("cpus:32"), None), "its sub-roles guarantee cpus:32"),
        ("eng/dev", Quota(R(""), R("cpus:64")), "above its parent 'eng'"),
        ("", Quota(R("cpus:1"), None), "role is empty"),
        ("eng//dev", Quota(R("cpus:1"), None), "empty segment"),
    ],
)
def test_a_quota_that_breaks_the_rules_changes_nothing(role: str, quota: Quota, says: str) -> None:
    async def test(runtime: MasterRuntime) -> None:
        runtime.operator.set_quota("eng", Quota(R("cpus:16"), R("cpus:32")))
        before, writes = quotas_of(runtime), runtime.state.registry.writes
        with pytest.raises(InvalidArgument, match=says):
            runtime.operator.set_quota(role, quota)
        assert quotas_of(runtime) == before and runtime.state.registry.writes == writes

    scenario(test)


def test_a_limit_below_use_needs_force_which_rescinds_offers_and_kills_nothing() -> None:
    async def test(runtime: MasterRuntime) -> None:
        _, commands = agent(runtime, "cpus:8;mem:8192")
        fw, events = framework(runtime, "etl", role="eng/dev")
        await settle()
        (offer,) = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t1", "cpus:3;mem:128")], 0.0)
        assert any(isinstance(c, LaunchTasks) for c in commands.drain())
        await settle()
        (rest,) = offers_of(events)  # the rest of the agent, offered again
        writes = runtime.state.registry.writes
        with pytest.raises(FailedPrecondition, match=r"cpus:8 > 2\).*force"):
            runtime.operator.set_quota("eng", Quota(R(""), R("cpus:2")))
        assert quotas_of(runtime) == ({}, {}) and runtime.state.registry.writes == writes
        assert not [e for e in events.drain() if isinstance(e, RescindEvent)]

        view, rescinded = runtime.operator.set_quota("eng", Quota(R(""), R("cpus:2")), force=True)
        assert rescinded == 1 and view is not None and view.consumed == R("cpus:3;mem:128")
        rescinds = [e for e in events.drain() if isinstance(e, RescindEvent)]
        assert [r.offer_id for r in rescinds] == [rest.offer_id]
        await settle()  # the run that follows offers eng no cpus (over its limit), memory only
        assert [o.resources for o in offers_of(events)] == [R("mem:8064")]
        assert not [c for c in commands.drain() if isinstance(c, KillTask)]
        assert [t.launch.task_id for t in runtime.operator.snapshot().tasks] == ["t1"]

    scenario(test)


def test_force_is_not_needed_when_the_role_holds_no_more_than_the_limit() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent(runtime, "cpus:8;mem:8192")
        _, events = framework(runtime, "etl", role="eng")
        await settle()
        assert offers_of(events)
        view, rescinded = runtime.operator.set_quota("eng", Quota(R(""), R("gpus:1")))
        assert view is not None and rescinded == 0  # a resource it holds none of

    scenario(test)


def test_update_quota_follows_the_acl_with_subtree_patterns() -> None:
    async def test(runtime: MasterRuntime) -> None:
        acl = parse(
            {
                "update_quota": [{"principals": ["eng-lead"], "roles": ["eng/*"]}],
                "view_state": [{"principals": "ANY"}],
            },
            "acls.toml",
        )
        runtime.state.authority = Authority(acl, authenticated=True)
        quota = Quota(R("cpus:2"), None)
        assert runtime.operator.set_quota("eng/dev", quota, principal="eng-lead")[0] is not None
        assert runtime.operator.set_quota("eng/dev/ci", quota, principal="eng-lead")[0] is not None
        for role, principal in (("eng", "eng-lead"), ("sci", "eng-lead"), ("eng/dev", "mallory")):
            with pytest.raises(PermissionDenied, match="update_quota"):
                runtime.operator.set_quota(role, quota, principal=principal)
        assert set(quotas_of(runtime)[0]) == {"eng/dev", "eng/dev/ci"}
        assert len(runtime.operator.quotas("anyone").quotas) == 2

    scenario(test)


def test_a_failed_registry_write_changes_nothing() -> None:
    async def test(runtime: MasterRuntime) -> None:
        registry = runtime.state.registry
        assert isinstance(registry, SqliteRegistry)
        registry._db.execute("PRAGMA query_only = ON")  # every write now fails
        with pytest.raises(Unavailable, match="nothing was changed"):
            runtime.operator.set_quota("eng", Quota(R("cpus:2"), None))
        assert quotas_of(runtime) == ({}, {})
        registry._db.execute("PRAGMA query_only = OFF")

    scenario(test)


def test_quotas_are_recovered_after_a_restart(tmp_path: Path) -> None:
    quotas = {
        "eng": Quota(R("cpus:16;mem:65536"), R("cpus:32")),
        "eng/dev": Quota(R("cpus:8"), R("cpus:16")),
        "eng/dev/ci": Quota(R("cpus:2"), None),
        "sci": Quota(R(""), R("cpus:4")),
    }

    async def main() -> None:
        runtime = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        await runtime.start()
        for role in ("eng", "eng/dev", "eng/dev/ci", "sci", "gone"):
            runtime.operator.set_quota(role, quotas.get(role, Quota(R("cpus:1"), None)))
        runtime.operator.set_quota("gone", Quota())
        await runtime.stop()
        runtime.state.registry.close()

        again = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        again.recovery.recover()
        assert quotas_of(again) == (quotas, quotas)
        assert [v.role for v in again.operator.quotas().quotas] == list(quotas)
        again.state.registry.close()

    asyncio.run(main())
