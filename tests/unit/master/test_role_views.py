"""The role tree in every operator view, from one runtime with roles ``eng`` (one framework of its
own), ``eng/dev`` and ``sci``: the snapshot, GetState, ``fairshare status`` (JSON and table),
``fairshare roles``, the HTTP API (``/api/v1/roles``, ``/api/v1/state``, with its permission
rules) and the metrics. Every view shows the same numbers: the core's ``role_shares`` and the
sums over each subtree's frameworks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web import Application
from fairshare import cli
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import operator_pb2
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import client_commands.roles as roles_command
from client_commands.status_document import render_table, state_to_dict
from master.acl import parse
from master.core import CoreConfig, TaskLaunch
from master.metrics import MAX_FRAMEWORK_SERIES, MasterCollector, build_registry, sampler
from master.model import AgentSpec, Demand, FrameworkInfo, OffersEvent, StatusUpdate
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.authority import Authority
from master.runtime.views import ClusterSnapshot, redact
from master.service.state import state_to_pb
from master.service.state_documents import WIRE_DOCUMENTS
from master.web.documents import roles_document
from master.web.events import RecentEvents
from master.web.history import ShareHistory
from master.web.routes import WebApi

R = ResourceVector.parse
MIB = 1048576
# name, role, task shape, tasks to run
TENANTS = (
    ("lead", "eng", "cpus:1;mem:1024", 1),
    ("ci", "eng/dev", "cpus:1;mem:1024", 2),
    ("lab", "sci", "cpus:2;mem:1024", 1),
)


def config(hierarchy: str = "") -> RuntimeConfig:
    return RuntimeConfig(
        core=CoreConfig(validate=True, hierarchy=hierarchy),
        allocation_interval=60.0,
        heartbeat_interval=60.0,
        allocation_batch=0.0,
    )


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def tenants(runtime: MasterRuntime) -> None:
    """One agent of cpus:12;mem:12288, ``TENANTS`` running their tasks, ``eng`` weighing 2."""
    session = runtime.agents.register(AgentSpec("h1", 0, R("cpus:12;mem:12288")))
    runtime.operator.set_weight("eng", None, 2.0, False)
    subscribed = []
    for name, role, task, count in TENANTS:
        spec = FrameworkInfo(name=name, role=role)
        result = runtime.frameworks.subscribe(
            spec, Demand(task_resources=R(task), max_tasks=count), False
        )
        subscribed.append((result, task, count))
    await settle()
    for result, task, count in subscribed:
        offers = [o for e in result.channel.drain() if isinstance(e, OffersEvent) for o in e.offers]
        launches = [TaskLaunch(f"t{n}", f"t{n}", R(task)) for n in range(count)]
        runtime.frameworks.accept(result.framework_id, [offers[0].offer_id], launches, 60.0)
        updates = [
            (
                result.framework_id,
                StatusUpdate(launch.task_id, session.agent_id, TaskState.RUNNING, source="AGENT"),
                TaskState.RUNNING,
            )
            for launch in launches
        ]
        runtime.agents.update_statuses(session.agent_id, session.channel, updates)
    await settle()


def observe(test: Callable[[MasterRuntime], Any], hierarchy: str = "") -> Any:
    """``test(runtime)`` on a runtime running ``tenants``; returns what it returns."""

    async def main() -> Any:
        runtime = MasterRuntime(config(hierarchy))
        await runtime.start()
        try:
            await tenants(runtime)
            return test(runtime)
        finally:
            await runtime.stop()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    """The snapshot, GetState, the core's shares and a scrape, taken in one step."""

    def take(runtime: MasterRuntime) -> dict[str, Any]:
        registry = build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {})))
        families = text_string_to_metric_families(generate_latest(registry).decode())
        samples = [s for family in families for s in family.samples if "role" in s.labels]
        snapshot = runtime.operator.snapshot()
        return {
            "snapshot": snapshot,
            "state": state_to_pb(snapshot),
            "shares": runtime.state.core.role_shares(),
            "samples": samples,
        }

    return dict(observe(take))


def test_the_snapshot_lists_the_tree_in_pre_order_with_subtree_sums(seen: dict[str, Any]) -> None:
    snapshot: ClusterSnapshot = seen["snapshot"]
    assert snapshot.hierarchy == "hdrf"
    by_path = {view.path: view for view in snapshot.roles}
    assert [view.path for view in snapshot.roles] == ["eng", "eng/dev", "sci"]
    eng, dev, sci = by_path["eng"], by_path["eng/dev"], by_path["sci"]
    assert (eng.weight, dev.weight, sci.weight) == (2.0, 1.0, 1.0)
    assert (eng.frameworks, eng.subtree_frameworks, eng.running_tasks) == (1, 2, 3)
    assert (dev.frameworks, dev.subtree_frameworks, dev.running_tasks) == (1, 1, 2)
    assert (sci.frameworks, sci.subtree_frameworks, sci.running_tasks) == (1, 1, 1)
    assert eng.allocated == R("cpus:3;mem:3072") and dev.allocated == R("cpus:2;mem:2048")
    assert sci.allocated == R("cpus:2;mem:1024")
    for view in snapshot.roles:  # the core's numbers, and what the subtree holds
        share = seen["shares"][view.path]
        assert (view.share, view.weighted_share) == (share.share, share.weighted_share)
        assert view.dominant_resource == share.dominant_resource
        assert view.weighted_share == pytest.approx(view.share / view.weight)
        for resource, fraction in share.held.items():
            held = view.allocated.millis(resource) / snapshot.total.millis(resource)
            assert fraction == pytest.approx(held)
    assert set(seen["shares"]) == set(by_path)
    assert sci.share == pytest.approx(2 / 12) and sci.dominant_resource == "cpus"
    assert redact(snapshot, "someone else").roles == snapshot.roles  # figures, no ids


def test_get_state_carries_the_roles(seen: dict[str, Any]) -> None:
    snapshot: ClusterSnapshot = seen["snapshot"]
    state: operator_pb2.GetStateResponse = seen["state"]
    assert state.hierarchy == "hdrf"
    assert [role.path for role in state.roles] == ["eng", "eng/dev", "sci"]
    for role, view in zip(state.roles, snapshot.roles, strict=True):
        assert (role.weight, role.share, role.weighted_share) == (
            view.weight,
            view.share,
            view.weighted_share,
        )
        assert role.dominant_resource == view.dominant_resource
        assert {i.name: i.millis for i in role.allocated.items} == dict(
            view.allocated.millis_items()
        )
        assert (role.frameworks, role.subtree_frameworks, role.running_tasks) == (
            view.frameworks,
            view.subtree_frameworks,
            view.running_tasks,
        )


def test_status_json_the_http_api_and_fairshare_roles_agree(seen: dict[str, Any]) -> None:
    snapshot: ClusterSnapshot = seen["snapshot"]
    status = state_to_dict(seen["state"])
    assert status["hierarchy"] == "hdrf"
    assert status["roles"] == WIRE_DOCUMENTS.state(snapshot)["roles"]
    assert status["roles"] == roles_document(snapshot, WIRE_DOCUMENTS)["roles"]
    assert roles_command.roles_document(seen["state"], None) == {
        "hierarchy": "hdrf",
        "roles": status["roles"],
    }
    eng, dev, sci = status["roles"]
    assert eng == {
        "role": "eng",
        "parent": None,
        "depth": 0,
        "weight": 2.0,
        "share": eng["share"],
        "weighted_share": eng["share"] / 2.0,
        "dominant_resource": eng["dominant_resource"],
        "allocated": {"cpus": 3.0, "mem": 3072.0},
        "frameworks": 1,
        "subtree_frameworks": 2,
        "running_tasks": 3,
        "guarantee": {},
        "limit": None,
        "below_guarantee": False,
    }
    assert (dev["parent"], dev["depth"], sci["parent"], sci["depth"]) == ("eng", 1, None, 0)
    totals = roles_document(snapshot, WIRE_DOCUMENTS)["totals"]
    assert totals == {
        "roles": 3,
        "frameworks": 3,
        "running_tasks": 4,
        "allocated": {"cpus": 5.0, "mem": 4096.0},
    }
    assert (
        json.loads(json.dumps(roles_document(snapshot, WIRE_DOCUMENTS)))["roles"] == status["roles"]
    )


def test_the_status_table_shows_the_tree_indented(seen: dict[str, Any]) -> None:
    lines = render_table(state_to_dict(seen["state"])).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ROLE "))
    assert lines[start].split() == [
        "ROLE", "WEIGHT", "SHARE", "WEIGHTED", "DOMINANT", "FRAMEWORKS", "OWN", "RUNNING",
        "ALLOCATED", "GUARANTEE", "LIMIT",
    ]  # fmt: skip
    eng, dev, sci = lines[start + 1 : start + 4]
    assert eng.startswith("eng ") and dev.startswith("  eng/dev ") and sci.startswith("sci ")
    assert eng.split()[1] == "2" and eng.split()[5:9] == ["2", "1", "3", "cpus:3;mem:3072"]
    assert lines[start + 4].startswith("hierarchy hdrf: ")


def test_the_metrics_show_each_role(seen: dict[str, Any]) -> None:
    snapshot: ClusterSnapshot = seen["snapshot"]
    values = {
        (s.name, s.labels["role"], s.labels.get("resource")): s.value for s in seen["samples"]
    }
    for view in snapshot.roles:
        assert values[("fairshare_role_share", view.path, None)] == view.weighted_share
        assert values[("fairshare_role_weight", view.path, None)] == view.weight
    assert values[("fairshare_role_allocated", "eng", "cpus")] == 3.0
    assert values[("fairshare_role_allocated", "eng", "mem")] == 3072 * MIB
    assert values[("fairshare_role_allocated", "sci", "mem")] == 1024 * MIB
    assert {k[1] for k in values} == {"eng", "eng/dev", "sci"}


def test_flat_reports_what_each_role_holds() -> None:
    def shares(runtime: MasterRuntime) -> dict[str, tuple[float, float]]:
        snapshot = runtime.operator.snapshot()
        assert snapshot.hierarchy == "flat"
        return {view.path: (view.share, view.weighted_share) for view in snapshot.roles}

    got = observe(shares, "flat")
    assert got["eng"] == pytest.approx((3 / 12, 3 / 24))  # cpus 3 of 12 and mem 3 of 12, / 2
    assert got["sci"] == pytest.approx((2 / 12, 2 / 12))


# -- fairshare roles ----------------------------------------------------------------------------


def test_fairshare_roles_prints_the_tree_or_json(
    seen: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(roles_command, "call_master", lambda master, call: seen["state"])
    assert cli.main(["roles", "--master", "127.0.0.1:1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["eng", "eng/dev", "sci"]
    assert lines[2].startswith("  eng/dev") and lines[4].startswith("hierarchy hdrf")
    assert cli.main(["roles", "--master", "127.0.0.1:1", "--json", "--role", "eng"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [role["role"] for role in document["roles"]] == ["eng", "eng/dev"]
    assert document["roles"] == state_to_dict(seen["state"])["roles"][:2]
    assert cli.main(["roles", "--master", "127.0.0.1:1", "--role", "ml"]) == 0
    out = capsys.readouterr().out
    assert "(no roles: no framework is registered in role ml or below it)" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--role", " "], "fairshare roles: --role: the role is empty"),
        (["--role", "eng//dev"], "fairshare roles: --role 'eng//dev' has an empty segment"),
        (["--role", "eng/*"], "fairshare roles: --role 'eng/*'"),
        (["--master", "nohost"], "--master 'nohost'"),
    ],
)
def test_fairshare_roles_bad_input_exits_2_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["roles", "--master", "127.0.0.1:1", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err and "Traceback" not in err


def test_fairshare_roles_says_when_no_master_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["roles", "--master", "127.0.0.1:1"]) == 1
    assert "fairshare roles: no master answers at 127.0.0.1:1" in capsys.readouterr().err


# -- /api/v1/roles ------------------------------------------------------------------------------


def http_get(api: WebApi, path: str) -> tuple[int, Any]:
    async def main() -> tuple[int, Any]:
        app = Application()
        api.add_routes(app)
        async with TestClient(TestServer(app)) as client:
            answer = await client.get(path)
            return answer.status, await answer.json()

    return asyncio.run(main())


def test_api_roles_follows_the_view_rules(seen: dict[str, Any]) -> None:
    snapshot: ClusterSnapshot = seen["snapshot"]
    full = WebApi(lambda: snapshot, RecentEvents(), ShareHistory(), documents=WIRE_DOCUMENTS)
    status, document = http_get(full, "/api/v1/roles")
    assert status == 200 and document == json.loads(
        json.dumps(roles_document(snapshot, WIRE_DOCUMENTS))
    )
    assert document["hierarchy"] == "hdrf" and document["total"] == {"cpus": 12.0, "mem": 12288.0}
    status, state = http_get(full, "/api/v1/state")
    assert status == 200 and state["roles"] == document["roles"]

    closed = Authority(parse({"permissive": False}, "acls.toml"))
    refused = WebApi(
        lambda: snapshot, RecentEvents(), ShareHistory(), lambda: closed, documents=WIRE_DOCUMENTS
    )
    status, answer = http_get(refused, "/api/v1/roles")
    assert status == 403 and "lets anonymous callers view_state" in answer["error"]
    assert closed.denied == 1
    rule = {"view_state": [{"principals": "ANY", "level": "redacted"}]}
    viewer = Authority(parse(rule, "acls.toml"))
    redacted = WebApi(
        lambda: snapshot, RecentEvents(), ShareHistory(), lambda: viewer, documents=WIRE_DOCUMENTS
    )
    status, answer = http_get(redacted, "/api/v1/roles")
    assert status == 200 and answer == document  # the tree names no framework
    status, state = http_get(redacted, "/api/v1/state")
    assert status == 200 and state == json.loads(
        json.dumps(WIRE_DOCUMENTS.state(redact(snapshot, None)))
    )
    assert state != json.loads(json.dumps(WIRE_DOCUMENTS.state(snapshot)))  # agents without ids
    following = WebApi(
        lambda: snapshot,
        RecentEvents(),
        ShareHistory(),
        follower=lambda: {"leader": "m1:5050", "dashboard": None},
        documents=WIRE_DOCUMENTS,
    )
    assert http_get(following, "/api/v1/roles")[0] == 503


# -- the bound on series ------------------------------------------------------------------------


def test_role_series_are_bounded() -> None:
    """Whatever roles clients use, at most MAX_FRAMEWORK_SERIES roles get series."""

    async def main() -> None:
        runtime = MasterRuntime(config())
        await runtime.start()
        try:
            for n in range(MAX_FRAMEWORK_SERIES + 5):
                runtime.frameworks.subscribe(FrameworkInfo(name=f"fw{n}", role=f"r{n}"), None, True)
            registry = build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {})))
            text = generate_latest(registry).decode()
            families = {f.name: f for f in text_string_to_metric_families(text)}
            for name in ("fairshare_role_share", "fairshare_role_weight"):
                assert len(families[name].samples) == MAX_FRAMEWORK_SERIES, name
            assert len(runtime.operator.snapshot().roles) == MAX_FRAMEWORK_SERIES + 5
        finally:
            await runtime.stop()

    asyncio.run(main())
