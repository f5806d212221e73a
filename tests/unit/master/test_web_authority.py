"""The HTTP port's permission checks go through the runtime's ``Authority`` (master.web.routes):
one ``view_state`` check per request, each refusal counted in ``Authority.denied`` beside the
gRPC ones, and the answers as before (403 bodies, redacted views, 503 on a follower)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from fairshare.credentials import Credentials, hash_secret
from fairshare.metrics_server import HttpSecurity, build_registry, serve_http
from fairshare.resources import ResourceVector
from fairshare.rpc_guard import Authenticator

from master.acl import Acl, Rule, parse
from master.core import CoreConfig, PermissionDenied
from master.metrics import MasterCollector, sampler
from master.model import AgentSpec
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.authority import Authority
from master.runtime.events import NO_EVENTS, EventSink
from master.service.state_documents import WIRE_DOCUMENTS
from master.web.events import RecentEvents
from master.web.history import ShareHistory
from master.web.routes import WebApi

ACL = parse(
    {
        "permissive": False,
        "register_agents": [{"principals": ["agent-1"]}],
        "view_state": [
            {"principals": ["ops"], "level": "full"},
            {"principals": ["viewer"], "level": "redacted"},
        ],
    },
    "acls.toml",
)
SECRETS = {"ops": "s-ops", "viewer": "s-viewer", "nobody": "s-nobody"}


class CountingAuthority(Authority):
    """An ``Authority`` that also counts how often it was asked for ``view_state``."""

    def __init__(self, acl: Acl, authenticated: bool) -> None:
        super().__init__(acl, authenticated)
        self.asked = 0

    def allow(self, action: str, principal: str | None, target: str | None = None) -> Rule:
        self.asked += action == "view_state"
        return super().allow(action, principal, target)


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}:{SECRETS[who]}"}


@asynccontextmanager
async def http_port(
    api: WebApi, authenticated: bool, runtime: MasterRuntime | None = None
) -> AsyncIterator[Callable[..., Any]]:
    """The master's HTTP port (``serve_http`` with ``api``'s routes); yields ``get(path,
    who=None) -> (status, json)``."""
    authenticator = None
    if authenticated:
        credentials = Credentials({who: hash_secret(secret) for who, secret in SECRETS.items()})
        authenticator = Authenticator(credentials)
    collector = MasterCollector(
        sampler(runtime.state, runtime.operator, {}) if runtime is not None else _no_sample
    )
    server = await serve_http(
        build_registry(collector),
        "127.0.0.1",
        0,
        lambda: {"status": "SERVING", "daemon": "master"},
        api.add_routes,
        security=HttpSecurity(authenticator=authenticator),
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def get(path: str, who: str | None = None) -> tuple[int, Any]:
                headers = bearer(who) if who is not None else {}
                async with session.get(f"http://{server.address}{path}", headers=headers) as got:
                    body = await got.text()
                    if got.content_type == "application/json":
                        return got.status, await got.json()
                    return got.status, body

            yield get
    finally:
        await server.close()


def _no_sample() -> Any:
    raise AssertionError("no metrics without a runtime")


def runtime_with(authority: CountingAuthority, events: EventSink = NO_EVENTS) -> MasterRuntime:
    runtime = MasterRuntime(
        RuntimeConfig(
            core=CoreConfig(validate=True),
            allocation_interval=60.0,
            heartbeat_interval=60.0,
            acl=ACL,
            authenticated=authority.authenticated,
            events=events,
        )
    )
    runtime.state.authority = authority  # the one both ports ask
    return runtime


def test_an_http_denial_is_counted_once_with_the_grpc_ones_and_allowed_views_work() -> None:
    async def main() -> None:
        authority = CountingAuthority(ACL, authenticated=True)
        events = RecentEvents()
        runtime = runtime_with(authority, events)
        await runtime.start()
        try:
            runtime.agents.register(
                AgentSpec("h1", 0, ResourceVector.parse("cpus:4;mem:4096")), "agent-1"
            )
            api = WebApi(
                runtime.operator.snapshot,
                events,
                ShareHistory(),
                lambda: runtime.state.authority,
                documents=WIRE_DOCUMENTS,
            )
            async with http_port(api, authenticated=True, runtime=runtime) as get:
                # refused: the port's own 403, one check, one denial
                for n, path in enumerate(("/api/v1/state", "/api/v1/events", "/metrics", "/"), 1):
                    assert await get(path, "nobody") == (403, {"error": "permission denied"})
                    assert (authority.denied, authority.asked) == (n, n), path
                assert (await get("/nowhere", "nobody"))[0] == 403
                assert (authority.denied, authority.asked) == (5, 5)
                assert (await get("/api/v1/state"))[0] == 401  # no principal: not asked
                assert (await get("/health"))[0] == 200  # open: not asked
                assert authority.asked == 5
                # allowed: one check each, nothing counted, the documents as before
                status, state = await get("/api/v1/state", "ops")
                assert status == 200 and state["agents"][0]["hostname"] == "h1"
                status, recent = await get("/api/v1/events", "ops")
                assert status == 200 and "agent.registered" in [
                    e["event"] for e in recent["events"]
                ]
                status, text = await get("/metrics", "ops")
                assert status == 200 and "fairshare_" in text
                assert (authority.denied, authority.asked) == (5, 8)
                # redacted: agents without ids or names, no events
                status, seen = await get("/api/v1/state", "viewer")
                assert status == 200 and seen["agents"][0]["hostname"] != "h1"
                assert seen["agents"][0]["id"] == ""
                assert await get("/api/v1/events", "viewer") == (200, {"events": []})
                assert (authority.denied, authority.asked) == (5, 10)
            # the gRPC path (OperatorService.GetState) counts in the same place
            with pytest.raises(PermissionDenied):
                runtime.operator.view("nobody")
            assert authority.denied == 6
        finally:
            await runtime.stop()

    asyncio.run(main())


def test_a_follower_refuses_before_naming_the_leader() -> None:
    async def main() -> None:
        standby = CountingAuthority(ACL, authenticated=True)
        following: dict[str, str | None] = {"leader": "m1:5050", "dashboard": "http://m1:9100/"}

        def no_state() -> Any:
            raise AssertionError("a follower has no state")

        api = WebApi(no_state, RecentEvents(), ShareHistory(), lambda: standby, lambda: following)
        async with http_port(api, authenticated=True) as get:
            assert await get("/api/v1/state", "nobody") == (403, {"error": "permission denied"})
            status, answer = await get("/api/v1/state", "ops")
            assert status == 503 and answer["leader"] == "m1:5050"
            assert (await get("/", "ops"))[0] == 503
            assert (standby.denied, standby.asked) == (1, 3)

    asyncio.run(main())


def test_without_authentication_a_route_asks_once_when_it_needs_the_rule() -> None:
    async def main() -> None:
        closed = parse({"permissive": False}, "acls.toml")
        authority = CountingAuthority(closed, authenticated=False)
        runtime = runtime_with(authority)
        await runtime.start()
        try:
            api = WebApi(
                runtime.operator.snapshot,
                RecentEvents(),
                ShareHistory(),
                lambda: authority,
                documents=WIRE_DOCUMENTS,
            )
            async with http_port(api, authenticated=False, runtime=runtime) as get:
                status, answer = await get("/api/v1/state")
                assert status == 403 and "lets anonymous callers view_state" in answer["error"]
                assert (authority.denied, authority.asked) == (1, 1)
                assert await get("/api/v1/events") == (200, {"events": []})
                assert (authority.denied, authority.asked) == (2, 2)
                assert (await get("/"))[0] == 200  # the page itself needs no rule
                assert (await get("/metrics"))[0] == 200  # not guarded without authentication
                assert (authority.denied, authority.asked) == (2, 2)
        finally:
            await runtime.stop()

    asyncio.run(main())
