"""The dashboard's actions and added documents on the master's HTTP port (issue 24, item 10):
``POST /api/v1/maintenance`` authorized by the runtime's ``Authority`` with ``maintain_agents``
exactly as the gRPC calls (refusals counted, no ``view_state`` needed nor enough) and safe from
cross-site requests; ``/api/v1/logs`` granted exactly as ``GrantLogAccess``; ``/api/v1/completed``
keeping ended tasks and removed frameworks for the full view only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from fairshare.credentials import Credentials, hash_secret
from fairshare.metrics_server import HttpSecurity, build_registry, serve_http
from fairshare.resources import ResourceVector
from fairshare.rpc_guard import Authenticator
from fairshare.task_states import TaskState
from test_runtime_cycle import offers_of, report, running, settle, spec

from master.acl import parse
from master.core import CoreConfig
from master.metrics import MasterCollector, sampler
from master.model import AgentSpec, FrameworkInfo
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.log_grants import LogGrant
from master.service.state_documents import WIRE_DOCUMENTS
from master.web.completed import CompletedHistory, EventFanout
from master.web.events import RecentEvents
from master.web.history import ShareHistory
from master.web.maintenance import MAINTENANCE_PATH, REQUEST_HEADER
from master.web.routes import WebApi

ACL = parse(
    {
        "permissive": False,
        "register_agents": [{"principals": "ANY"}],
        "register_frameworks": [{"principals": "ANY", "roles": "ANY"}],
        "maintain_agents": [{"principals": ["ops", "maint"]}],
        "teardown_frameworks": [{"principals": ["ops"], "framework_principals": "ANY"}],
        "view_logs": [{"principals": ["auditor"], "framework_principals": ["batch"]}],
        "view_state": [
            {"principals": ["ops"], "level": "full"},
            {"principals": ["viewer", "auditor", "batch"], "level": "redacted"},
        ],
    },
    "acls.toml",
)
WHO = ("ops", "maint", "viewer", "auditor", "batch", "nobody")
JSON = {"Content-Type": "application/json", REQUEST_HEADER: "dashboard"}


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}:s-{who}"}


@asynccontextmanager
async def cluster() -> AsyncIterator[tuple[MasterRuntime, CompletedHistory, list[Any], Any]]:
    """A runtime with one agent (port 7), its HTTP port with authentication, and a session:
    yields (runtime, completed, log reads asked, request(method, path, who, **kw))."""
    completed = CompletedHistory(max_tasks=2)
    events = RecentEvents()
    runtime = MasterRuntime(
        RuntimeConfig(
            core=CoreConfig(validate=True),
            allocation_interval=60.0,
            heartbeat_interval=60.0,
            allocation_batch=0.0,
            acl=ACL,
            authenticated=True,
            events=EventFanout((events, completed)),
        )
    )
    await runtime.start()
    reads: list[Any] = []

    async def read_logs(granted: LogGrant, *args: Any) -> bytes:
        reads.append((granted, *args))
        return b"hello\n"

    api = WebApi(
        runtime.operator.snapshot,
        events,
        ShareHistory(),
        lambda: runtime.state.authority,
        completed=completed,
        operator=lambda: runtime.operator,
        read_logs=read_logs,
        documents=WIRE_DOCUMENTS,
    )
    credentials = Credentials({who: hash_secret(f"s-{who}") for who in WHO})
    server = await serve_http(
        build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {}))),
        "127.0.0.1",
        0,
        lambda: {"status": "SERVING", "daemon": "master"},
        api.add_routes,
        security=HttpSecurity(authenticator=Authenticator(credentials)),
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def call(method: str, path: str, who: str, **kw: Any) -> tuple[int, Any]:
                headers = {**bearer(who), **kw.pop("headers", {})}
                url = f"http://{server.address}{path}"
                async with session.request(method, url, headers=headers, **kw) as got:
                    if got.content_type == "application/json":
                        return got.status, await got.json()
                    return got.status, await got.text()

            yield runtime, completed, reads, call
    finally:
        await server.close()
        await runtime.stop()


def batch_framework(runtime: MasterRuntime) -> tuple[str, Any]:
    """A framework registered by principal ``batch``: (its id, its event channel)."""
    spec = FrameworkInfo(name="batch", principal="batch")
    result = runtime.frameworks.subscribe(spec, None, False, "batch")
    return result.framework_id, result.channel


def run(test: Callable[..., Any]) -> None:
    async def main() -> None:
        async with cluster() as parts:
            await test(*parts)

    asyncio.run(main())


def test_maintenance_is_authorized_like_the_grpc_call_and_refused_cross_site() -> None:
    async def test(runtime: MasterRuntime, _c: Any, _r: Any, call: Any) -> None:
        session = runtime.agents.register(AgentSpec("h1", 7, ResourceVector.parse("cpus:4")))
        agent_id = session.agent_id
        active = lambda: runtime.state.core.agents[agent_id].active  # noqa: E731
        body = {"action": "deactivate", "agent_ids": [agent_id]}
        authority = runtime.state.authority
        # refused by the ACL: 403 with its reason, counted, nothing changed (view_state is
        # neither needed nor enough: "viewer" sees the state, "maint" does not)
        denied = authority.denied
        status, answer = await call("POST", MAINTENANCE_PATH, "viewer", json=body, headers=JSON)
        assert status == 403 and "maintain_agents" in answer["error"], answer
        assert authority.denied == denied + 1 and active()
        # cross-site shapes: no state change on GET, without the header, a form, a foreign origin
        assert (await call("GET", MAINTENANCE_PATH, "ops"))[0] == 405
        no_header = {"Content-Type": "application/json"}
        status, answer = await call("POST", MAINTENANCE_PATH, "ops", json=body, headers=no_header)
        assert status == 403 and REQUEST_HEADER in answer["error"]
        form = {REQUEST_HEADER: "x", "Content-Type": "application/x-www-form-urlencoded"}
        status, _ = await call(
            "POST", MAINTENANCE_PATH, "ops", data="action=deactivate", headers=form
        )
        assert status == 415
        foreign = {**JSON, "Origin": "http://evil.example"}
        assert (await call("POST", MAINTENANCE_PATH, "ops", json=body, headers=foreign))[0] == 403
        # bad bodies name the field
        for bad, field in (
            ({"action": "explode", "agent_ids": [agent_id]}, "action"),
            ({"action": "deactivate", "agent_ids": []}, "agent_ids"),
            ({"action": "deactivate", "agent_ids": [agent_id], "x": 1}, "x"),
        ):
            status, answer = await call("POST", MAINTENANCE_PATH, "ops", json=bad, headers=JSON)
            assert status == 400 and answer["error"].startswith(field), answer
        bad = {"action": "deactivate", "agent_ids": ["nope"]}
        assert (await call("POST", MAINTENANCE_PATH, "ops", json=bad, headers=JSON))[0] == 404
        assert active()
        # allowed: "maint" has maintain_agents and no view_state, as for the gRPC call
        status, answer = await call("POST", MAINTENANCE_PATH, "maint", json=body, headers=JSON)
        assert status == 200 and answer == body and not active()
        assert runtime.operator.snapshot().agents[0].state == "DEACTIVATED"
        again = {"action": "reactivate", "agent_ids": [agent_id]}
        status, _ = await call("POST", MAINTENANCE_PATH, "ops", json=again, headers=JSON)
        assert status == 200 and active()
        # drain: refused like the gRPC DrainAgent, then the agent (running nothing) is DRAINED
        drain = {"action": "drain", "agent_ids": [agent_id]}
        denied = authority.denied
        status, _ = await call("POST", MAINTENANCE_PATH, "viewer", json=drain, headers=JSON)
        assert status == 403 and authority.denied == denied + 1 and active()
        status, answer = await call("POST", MAINTENANCE_PATH, "maint", json=drain, headers=JSON)
        assert status == 200 and answer == drain and not active()
        for _ in range(200):  # the drain timer runs every 0.5 s: bounded at 10 s
            if runtime.operator.snapshot().agents[0].state == "DRAINED":
                break
            await asyncio.sleep(0.05)
        assert runtime.operator.snapshot().agents[0].state == "DRAINED"
        status, _ = await call("POST", MAINTENANCE_PATH, "ops", json=again, headers=JSON)
        assert status == 200 and active()

    run(test)


def test_logs_are_granted_exactly_as_grant_log_access() -> None:
    async def test(runtime: MasterRuntime, _c: Any, reads: list[Any], call: Any) -> None:
        session = runtime.agents.register(AgentSpec("h1", 7, ResourceVector.parse("cpus:4")))
        fw, events = batch_framework(runtime)
        await settle()
        (offer,) = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t1", "cpus:1")], None, "batch")
        path = f"/api/v1/logs?task_id=t1&framework_id={fw}&tail=5"
        denied = runtime.state.authority.denied
        status, answer = await call("GET", path, "viewer")  # a redacted view is not enough
        assert status == 403 and "may not read the logs" in answer["error"], answer
        assert runtime.state.authority.denied == denied + 1 and reads == []
        assert (await call("GET", path, "nobody"))[0] == 403
        for who in ("batch", "auditor", "ops"):  # its owner, view_logs, the full view
            assert await call("GET", path, who) == (200, "hello\n"), who
        granted, task_id, framework_id, stderr, tail = reads[-1]
        assert (task_id, framework_id, stderr, tail) == ("t1", fw, False, 5)
        assert [a.agent_id for a in granted.agents] == [session.agent_id]
        assert (await call("GET", "/api/v1/logs?task_id=t1&file=x", "ops"))[0] == 400
        assert (await call("GET", "/api/v1/logs", "ops"))[0] == 400

    run(test)


def test_completed_keeps_ended_tasks_and_removed_frameworks_for_the_full_view() -> None:
    async def test(runtime: MasterRuntime, completed: Any, _r: Any, call: Any) -> None:
        session = runtime.agents.register(AgentSpec("h1", 7, ResourceVector.parse("cpus:4")))
        agent_id = session.agent_id
        fw, events = batch_framework(runtime)
        await settle()
        (offer,) = offers_of(events)
        tasks = [spec(f"t{n}", "cpus:1") for n in range(3)]
        runtime.frameworks.accept(fw, [offer.offer_id], tasks, None, "batch")
        for n, state in enumerate((TaskState.FINISHED, TaskState.FAILED, TaskState.FINISHED)):
            report(runtime, agent_id, fw, running(f"t{n}", agent_id, state=state), state)
        runtime.operator.teardown_framework(fw, "ops")
        status, document = await call("GET", "/api/v1/completed", "ops")
        assert status == 200 and document["max_tasks"] == 2  # the cap: the oldest dropped
        assert [(t["task_id"], t["state"]) for t in document["tasks"]] == [
            ("t2", "FINISHED"),
            ("t1", "FAILED"),
        ]
        newest = document["tasks"][0]
        assert (
            newest["resources"] == "cpus:1" and newest["ended_at"] and newest["source"] == "AGENT"
        )
        (removed,) = document["frameworks"]
        assert (removed["framework_id"], removed["name"]) == (fw, "batch")
        assert removed["reason"] == "torn down by the operator"
        assert await call("GET", "/api/v1/completed", "viewer") == (
            200,
            {"tasks": [], "frameworks": []},
        )
        status, recent = await call("GET", "/api/v1/events", "ops")
        assert "task.ended" not in [e["event"] for e in recent["events"]]

    run(test)
