"""The Mesos v1 scheduler API (``master.web.mesos_scheduler``) over an in-process runtime and the
master's real HTTP server (``serve_http``): the event stream, the calls and Mesos's semantics on
top of the runtime's (tasks validated one by one, invalid offers, kill and acknowledgement of the
unknown), the HTTP answers, and a fuzz of every call kind: a call with one field of the wrong
JSON type, one unknown field or one required field missing is 400 naming that field, and the
runtime's state is exactly what it was.

The same API against real daemons and real pymesos frameworks: ``tests/integration/
test_mesos_pymesos.py``.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from fairshare.metrics_server import build_registry, serve_http
from fairshare.resources import ResourceVector

from master.core import CoreConfig
from master.metrics import MasterCollector, sampler
from master.model import AgentSpec
from master.runtime import MasterRuntime, RuntimeConfig
from master.web.mesos_scheduler import MesosSchedulerApi

JSON = {"Content-Type": "application/json"}


@dataclass
class Events:
    """A subscription's RecordIO stream, read event by event."""

    response: aiohttp.ClientResponse
    buffer: bytes = b""

    async def next(self, timeout: float = 5.0) -> dict[str, Any]:
        while True:
            length, newline, rest = self.buffer.partition(b"\n")
            if newline and len(rest) >= int(length):
                event: dict[str, Any] = json.loads(rest[: int(length)])
                self.buffer = rest[int(length) :]
                return event
            chunk = await asyncio.wait_for(self.response.content.readany(), timeout)
            if not chunk:
                raise EOFError("the stream ended")
            self.buffer += chunk

    async def until(self, kind: str, timeout: float = 5.0) -> dict[str, Any]:
        while True:
            event = await self.next(timeout)
            if event["type"] == kind:
                return event


@dataclass
class Mesos:
    """An in-process master runtime with one agent, and its HTTP port's Mesos API."""

    runtime: MasterRuntime
    api: MesosSchedulerApi
    url: str
    session: aiohttp.ClientSession
    agent_id: str = ""
    open: list[aiohttp.ClientResponse] = field(default_factory=list)

    async def post(
        self, document: Any, stream_id: str | None = None, raw: bytes | None = None
    ) -> tuple[int, str]:
        headers = dict(JSON)
        if stream_id is not None:
            headers["Mesos-Stream-Id"] = stream_id
        body = raw if raw is not None else json.dumps(document).encode()
        async with self.session.post(self.url, data=body, headers=headers) as response:
            return response.status, await response.text()

    async def subscribe(self, name: str = "fw", **info: Any) -> tuple[str, str, Events]:
        framework_info = {"user": "", "name": name, **info}
        call = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info}}
        if "id" in info:
            call["framework_id"] = info["id"]
        response = await self.session.post(self.url, data=json.dumps(call), headers=JSON)
        assert response.status == 200, await response.text()
        self.open.append(response)
        events = Events(response)
        subscribed = await events.until("SUBSCRIBED")
        framework_id = subscribed["subscribed"]["framework_id"]["value"]
        return response.headers["Mesos-Stream-Id"], framework_id, events

    def fingerprint(self) -> Any:
        """The core's state, clocks aside."""
        core = self.runtime.state.core
        return (
            sorted(core.offers),
            sorted((key, task.state) for key, task in core.tasks.items()),
            sorted(
                (fid, fw.active, fw.suppressed, sorted(fw.filters))
                for fid, fw in core.frameworks.items()
            ),
            sorted((aid, str(agent.free)) for aid, agent in core.agents.items()),
        )


@asynccontextmanager
async def mesos(resources: str = "cpus:4;mem:4096") -> AsyncIterator[Mesos]:
    config = RuntimeConfig(
        core=CoreConfig(validate=True),
        allocation_interval=0.05,
        heartbeat_interval=60.0,
        agent_timeout=600.0,
    )
    runtime = MasterRuntime(config)
    await runtime.start()
    session = aiohttp.ClientSession()
    api = MesosSchedulerApi(lambda: runtime.frameworks, version="test")
    server = await serve_http(
        build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {}))),
        "127.0.0.1",
        0,
        lambda: {"status": "SERVING", "daemon": "master"},
        api.add_routes,
    )
    try:
        agent = runtime.agents.register(AgentSpec("h1", 0, ResourceVector.parse(resources)))
        url = f"http://{server.address}/api/v1/scheduler"
        cluster = Mesos(runtime, api, url, session, agent.agent_id)
        yield cluster
        for response in cluster.open:
            response.close()
    finally:
        await session.close()
        await server.close()
        await runtime.stop()


def task(task_id: str, agent_id: str, cpus: float = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": {"value": agent_id},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 128}},
        ],
        "command": {"value": "sleep 100"},
        **extra,
    }


def accept(framework_id: str, offer_id: str, *tasks: dict[str, Any], refuse: float = 5) -> Any:
    operations = [{"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}]
    body = {"offer_ids": [{"value": offer_id}], "operations": operations}
    body["filters"] = {"refuse_seconds": refuse}
    return {"type": "ACCEPT", "framework_id": {"value": framework_id}, "accept": body}


def run(coroutine: Any) -> None:
    asyncio.run(asyncio.wait_for(coroutine, 60))


def test_subscribe_offers_and_an_accept_validated_task_by_task() -> None:
    async def main() -> None:
        async with mesos() as cluster:
            stream, fid, events = await cluster.subscribe(capabilities=[{"type": "GPU_RESOURCES"}])
            offer = (await events.until("OFFERS"))["offers"]["offers"][0]
            assert offer["hostname"] == "h1" and offer["agent_id"]["value"] == cluster.agent_id
            cpus = {r["name"]: r["scalar"]["value"] for r in offer["resources"]}
            assert cpus == {"cpus": 4, "mem": 4096}
            tasks = [
                task("ok-1", cluster.agent_id, 2),
                task("bad", cluster.agent_id, container={"type": "DOCKER"}),
                task("ok-2", cluster.agent_id, 1.5),
                task("too-big", cluster.agent_id, 1),  # 0.5 cpus are left: does not fit
            ]
            call = accept(fid, offer["id"]["value"], *tasks, refuse=0)
            assert (await cluster.post(call, stream))[0] == 202
            errors = {}
            while len(errors) < 2:
                update = (await events.until("UPDATE"))["update"]["status"]
                assert update["state"] == "TASK_ERROR" and "uuid" not in update
                errors[update["task_id"]["value"]] = update
            assert errors["bad"]["reason"] == "REASON_TASK_INVALID"
            assert "container" in errors["bad"]["message"]
            assert "left of the offers" in errors["too-big"]["message"]
            core = cluster.runtime.state.core
            assert sorted(t for (_, t) in core.tasks) == ["ok-1", "ok-2"]
            assert core.frameworks[fid].gpu_aware
            # the core refuses the launch whole (a live task id): every task is TASK_ERROR and
            # the offer is used, as in Mesos
            left = (await events.until("OFFERS"))["offers"]["offers"][0]
            again = accept(fid, left["id"]["value"], task("ok-1", cluster.agent_id, 0.5))
            assert (await cluster.post(again, stream))[0] == 202
            update = (await events.until("UPDATE"))["update"]["status"]
            assert (update["task_id"]["value"], update["state"]) == ("ok-1", "TASK_ERROR")
            assert "exists already" in update["message"]
            assert not core.offers and sorted(core.frameworks[fid].filters) == [cluster.agent_id]

    run(main())


def test_invalid_offers_lose_the_tasks_and_unknown_kills_are_reconciled() -> None:
    async def main() -> None:
        async with mesos() as cluster:
            stream, fid, events = await cluster.subscribe(
                capabilities=[{"type": "PARTITION_AWARE"}]
            )
            await events.until("OFFERS")
            status, _ = await cluster.post(accept(fid, "no-such-offer", task("t", "x")), stream)
            assert status == 202
            update = (await events.until("UPDATE"))["update"]["status"]
            assert (update["state"], update["reason"]) == ("TASK_DROPPED", "REASON_INVALID_OFFERS")
            kill = {
                "type": "KILL",
                "framework_id": {"value": fid},
                "kill": {"task_id": {"value": "z"}},
            }
            assert (await cluster.post(kill, stream))[0] == 202
            update = (await events.until("UPDATE"))["update"]["status"]
            assert (update["task_id"]["value"], update["state"]) == ("z", "TASK_UNKNOWN")
            ack = {
                "type": "ACKNOWLEDGE",
                "framework_id": {"value": fid},
                "acknowledge": {
                    "agent_id": {"value": cluster.agent_id},
                    "task_id": {"value": "z"},
                    "uuid": base64.b64encode(bytes(16)).decode(),
                },
            }
            assert (await cluster.post(ack, stream))[0] == 202  # unknown: accepted, as Mesos

    run(main())


def test_http_answers() -> None:
    async def main() -> None:
        async with mesos() as cluster:
            stream, fid, _ = await cluster.subscribe()
            teardown = {"type": "TEARDOWN", "framework_id": {"value": fid}}
            status, text = await cluster.post(teardown)
            assert status == 400 and "Mesos-Stream-Id" in text
            assert (await cluster.post(teardown, "wrong"))[0] == 403
            async with cluster.session.get(cluster.url) as got:
                assert got.status == 405
            proto = {"Content-Type": "application/x-protobuf"}
            async with cluster.session.post(cluster.url, data=b"x", headers=proto) as got:
                assert got.status == 415
            base = cluster.url.removesuffix("/api/v1/scheduler")
            async with cluster.session.get(f"{base}/version") as got:
                assert (await got.json())["version"] == "1.11.0"
            async with cluster.session.get(f"{base}/master/redirect", allow_redirects=False) as got:
                assert got.status == 307 and got.headers["Location"] == f"//{base[7:]}"
            again = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "x"}}}
            headers = {**JSON, "Mesos-Stream-Id": stream}
            async with cluster.session.post(cluster.url, json=again, headers=headers) as got:
                assert got.status == 400
            assert (await cluster.post(teardown, stream))[0] == 202
            assert fid not in cluster.runtime.state.core.frameworks
            # a removed framework subscribing again is told so on its stream, as Mesos does
            back = {
                "type": "SUBSCRIBE",
                "framework_id": {"value": fid},
                "subscribe": {"framework_info": {"name": "fw", "id": {"value": fid}}},
            }
            async with cluster.session.post(cluster.url, json=back) as got:
                assert got.status == 200
                error = await Events(got).next()
                assert error["type"] == "ERROR" and "was removed" in error["error"]["message"]

    run(main())


def test_a_follower_redirects_to_the_leaders_http_port() -> None:
    async def main() -> None:
        following = {"leader": "m1:5050", "dashboard": "http://m1:9100/"}
        api = MesosSchedulerApi(lambda: None, lambda: following)
        server = await serve_http(
            build_registry(MasterCollector(lambda: None)),  # type: ignore[arg-type, return-value]
            "127.0.0.1",
            0,
            lambda: {"status": "SERVING"},
            api.add_routes,
        )
        try:
            async with aiohttp.ClientSession() as session:
                url = f"http://{server.address}/api/v1/scheduler"
                call = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "x"}}}
                async with session.post(url, json=call, allow_redirects=False) as got:
                    assert got.status == 307
                    assert got.headers["Location"] == "//m1:9100/api/v1/scheduler"
                following["dashboard"] = None  # type: ignore[assignment]
                async with session.post(url, json=call, allow_redirects=False) as got:
                    assert got.status == 503
        finally:
            await server.close()

    run(main())


# -- the fuzz -------------------------------------------------------------------------------------


def paths(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) under ``value``, in the API's way of naming fields."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            yield where, item
            yield from paths(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item
            yield from paths(item, f"{path}[{index}]")


def replace(document: Any, path: str, new: Any) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced."""
    copied = copy.deepcopy(document)
    parts = path.replace("[", ".[").split(".")
    holder: Any = copied
    for part in parts[:-1]:
        holder = holder[int(part[1:-1])] if part.startswith("[") else holder[part]
    last = parts[-1]
    if last.startswith("["):
        holder[int(last[1:-1])] = new
    else:
        holder[last] = new
    return copied


def wrong_type(value: Any) -> Any:
    """A value of a JSON type the field never takes."""
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return {"oops": 1}
    return "an object was expected"


def calls_of(fid: str, agent_id: str, offer_id: str) -> list[Any]:
    framework = {"value": fid}
    uuid = base64.b64encode(bytes(range(16))).decode()
    return [
        {
            "type": "SUBSCRIBE",
            "subscribe": {
                "framework_info": {
                    "user": "u",
                    "name": "n",
                    "failover_timeout": 10,
                    "role": "*",
                    "checkpoint": True,
                    "capabilities": [{"type": "PARTITION_AWARE"}],
                    "labels": {"labels": [{"key": "k", "value": "v"}]},
                },
                "suppressed_roles": ["*"],
            },
        },
        accept(
            fid,
            offer_id,
            task(
                "f1",
                agent_id,
                kill_policy={"grace_period": {"nanoseconds": 5}},
                labels={"labels": [{"key": "a", "value": "b"}]},
            ),
        ),
        {
            "type": "DECLINE",
            "framework_id": framework,
            "decline": {"offer_ids": [{"value": offer_id}], "filters": {"refuse_seconds": 60}},
        },
        {"type": "REVIVE", "framework_id": framework, "revive": {"roles": ["*"]}},
        {"type": "SUPPRESS", "framework_id": framework, "suppress": {"roles": ["*"]}},
        {
            "type": "KILL",
            "framework_id": framework,
            "kill": {"task_id": {"value": "f1"}, "agent_id": {"value": agent_id}},
        },
        {
            "type": "ACKNOWLEDGE",
            "framework_id": framework,
            "acknowledge": {
                "agent_id": {"value": agent_id},
                "task_id": {"value": "f1"},
                "uuid": uuid,
            },
        },
        {
            "type": "RECONCILE",
            "framework_id": framework,
            "reconcile": {"tasks": [{"task_id": {"value": "f1"}, "agent_id": {"value": agent_id}}]},
        },
        {"type": "TEARDOWN", "framework_id": framework},
    ]


REQUIRED = re.compile(
    r"^(type|framework_id(\.value)?|subscribe|subscribe\.framework_info(\.name)?"
    r"|.*capabilities\[\d+\]\.type|.*labels\[\d+\]\.key|accept|accept\.offer_ids"
    r"|.*offer_ids\[\d+\]\.value|accept\.operations\[\d+\]\.(type|launch)"
    r"|.*task_infos\[\d+\]\.(task_id|agent_id)(\.value)?|.*resources\[\d+\]\.(name|type)"
    r"|.*scalar\.value|decline|kill|kill\.task_id(\.value)?|acknowledge"
    r"|acknowledge\.(agent_id|task_id|uuid)(\.value)?|reconcile\.tasks\[\d+\]\.task_id(\.value)?)$"
)
"""The fields whose absence makes a call bad (the others have defaults)."""


def remove(document: Any, path: str) -> Any:
    """A copy of ``document`` without the field at ``path``."""
    copied = copy.deepcopy(document)
    parts = path.replace("[", ".[").split(".")
    holder: Any = copied
    for part in parts[:-1]:
        holder = holder[int(part[1:-1])] if part.startswith("[") else holder[part]
    del holder[parts[-1]]
    return copied


def test_fuzz_every_call_kind_a_bad_field_is_400_naming_it_and_changes_nothing() -> None:
    async def main() -> None:
        async with mesos() as cluster:
            stream, fid, events = await cluster.subscribe()
            offer_id = (await events.until("OFFERS"))["offers"]["offers"][0]["id"]["value"]
            before = cluster.fingerprint()
            rng = random.Random(20)
            checked = 0
            for document in calls_of(fid, cluster.agent_id, offer_id):
                kind = document["type"]
                cases: list[tuple[Any, str]] = []
                for path, value in paths(document):
                    cases.append((replace(document, path, wrong_type(value)), path))
                    if isinstance(value, dict):
                        extra = copy.deepcopy(value)
                        extra["surprise"] = rng.choice([1, "x", {}, []])
                        cases.append((replace(document, path, extra), f"{path}.surprise"))
                    if REQUIRED.match(path) and not path.endswith("]"):
                        cases.append((remove(document, path), path))
                cases.append(({**document, "surprise": True}, "surprise"))
                for case, named in cases:
                    status, text = await cluster.post(case, stream if kind != "SUBSCRIBE" else None)
                    assert status == 400, (kind, named, status, text)
                    assert f"{named}:" in text, (kind, named, text)
                    assert cluster.fingerprint() == before, (kind, named)
                    checked += 1
                for raw in (b"", b"{", b"[1, 2", json.dumps(document).encode()[:-3], b"\xff\xfe"):
                    status, text = await cluster.post(None, stream, raw=raw)
                    assert status == 400, (kind, raw, text)
                    assert cluster.fingerprint() == before
            assert checked > 200
            assert len(cluster.runtime.state.core.frameworks) == 1

    run(main())
