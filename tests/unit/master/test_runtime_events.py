"""Every noteworthy event the runtime logs reaches its ``EventSink`` (``master.runtime.events``),
with the log line's name and fields, and the dashboard's ``RecentEvents`` keeps them as the
JSON API serves them. The runtime runs without gRPC (``test_runtime_cycle.scenario``); the
leadership terms' events come from ``master/ha``: ``tests/integration/test_ha_masters.py`` reads
``leader.term.started`` from a real HA leader's ``/api/v1/events``."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from fairshare.task_states import TaskReason, TaskState
from test_runtime_cycle import (
    R,
    agent,
    framework,
    offers_of,
    report,
    running,
    scenario,
    settle,
    spec,
)

from master.core import CoreConfig
from master.core.quota import Quota
from master.model import AgentSpec
from master.registry import SqliteRegistry
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.events import EventKind, MasterEvent, announce
from master.web.events import RecentEvents

RUNTIME_KINDS = set(EventKind) - {EventKind.LEADER_TERM_STARTED, EventKind.LEADER_TERM_ENDED}


class ListSink:
    """An ``EventSink`` keeping every event noted."""

    def __init__(self) -> None:
        self.events: list[MasterEvent] = []

    def note(self, event: MasterEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.events]

    def of(self, kind: EventKind) -> MasterEvent:
        """The first event of ``kind``."""
        return next(e for e in self.events if e.kind is kind)


def test_each_runtime_event_kind_reaches_the_sink(tmp_path: Path) -> None:
    sink = ListSink()

    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime)
        fw, events = framework(runtime, failover_timeout=60.0)
        await settle()
        (offer,) = offers_of(events)
        tasks = [spec("t1", "cpus:1;mem:128"), spec("t2", "cpus:1;mem:128")]
        runtime.frameworks.accept(fw, [offer.offer_id], tasks, 0.0)
        runtime.operator.kill_task(fw, "t1")
        killed = running("t1", agent_id, state=TaskState.KILLED)
        report(runtime, agent_id, fw, killed, TaskState.KILLED)
        runtime.operator.set_weight("eng", None, 2.0, False)
        runtime.operator.set_quota("eng", Quota(R(""), R("cpus:2")))
        runtime.operator.set_quota("eng", Quota())
        runtime.operator.reserve(agent_id, "eng", R("cpus:1"))
        runtime.operator.unreserve(agent_id, "eng", R("cpus:1"))
        runtime.operator.deactivate_agents([agent_id])
        runtime.operator.reactivate_agents([agent_id])
        runtime.operator.drain_agent(agent_id, 0.0)  # kills t2 at once (t1 is KILLING)
        idle, _ = agent(runtime)
        runtime.operator.drain_agent(idle, None)  # runs nothing: DRAINED at once
        runtime.frameworks.unsubscribe(fw, events)  # away, kept for its failover timeout
        runtime.operator.teardown_framework(fw)
        runtime.loss.unreachable([runtime.state.agents[agent_id]])
        runtime.operator.remove_agent(agent_id)
        other, _ = agent(runtime)
        runtime.agents.reregister(other, AgentSpec("h", 0, R("cpus:4;mem:8192")), [])

    scenario(test, events=sink)
    assert sink.of(EventKind.AGENT_REGISTERED).fields["resources"] == str(R("cpus:4;mem:8192"))
    assert sink.of(EventKind.FRAMEWORK_SUBSCRIBED).fields["resubscribed"] is False
    assert sink.of(EventKind.TASK_KILLED_BY_OPERATOR).fields["task_id"] == "t1"
    assert sink.of(EventKind.WEIGHT_SET).fields == {"kind": "role", "target": "eng", "weight": 2.0}
    removed = sink.of(EventKind.FRAMEWORK_REMOVED).fields
    assert removed["reason"] == "torn down by the operator" and removed["name"] == "fw"
    ended = sink.of(EventKind.TASK_ENDED)
    assert ended.level == logging.DEBUG and ended.fields["state"] == "KILLED"
    assert ended.fields["resources"] == str(R("cpus:1;mem:128"))
    assert ended.fields["reason"] in {"", *(reason.value for reason in TaskReason)}  # a name
    assert [e.kind for e in sink.events].count(EventKind.TASK_ENDED) == 1  # once per task
    assert sink.of(EventKind.AGENT_UNREACHABLE).level == logging.WARNING
    assert sink.of(EventKind.RESERVATION_MADE).fields["role"] == "eng"
    assert sink.of(EventKind.TASK_KILLED_BY_DRAIN).fields["task_id"] == "t2"

    restarted = ListSink()

    async def recovery() -> None:  # a master restarting on a registry that knows an agent
        config = RuntimeConfig(
            core=CoreConfig(validate=True), allocation_interval=60.0, events=restarted
        )
        first = MasterRuntime(config, registry=SqliteRegistry.open(tmp_path))
        await first.start()
        first.agents.register(AgentSpec("h", 0, R("cpus:1")))
        await first.stop()
        first.state.registry.close()
        again = MasterRuntime(config, registry=SqliteRegistry.open(tmp_path))
        again.recovery.recover()
        await again.start()
        again.recovery.finish()
        await again.stop()
        again.state.registry.close()

    asyncio.run(recovery())
    assert restarted.of(EventKind.MASTER_RECOVERED).fields["agents"] == 1
    assert restarted.of(EventKind.MASTER_RECOVERY_DONE).fields["unreachable"] == 1
    assert set(sink.kinds()) | set(restarted.kinds()) == RUNTIME_KINDS


def test_recent_events_keep_what_the_api_serves_whatever_the_log_level() -> None:
    recent = RecentEvents(capacity=2)
    log = logging.getLogger("test.runtime.events")
    log.setLevel(logging.ERROR)  # the log line is not written; the event is still noted
    for n in range(3):
        announce(log, recent, EventKind.AGENT_REMOVED, logging.INFO, agent_id=f"ag-{n}", n=R(""))
    kept = recent.since()
    assert [e["seq"] for e in kept] == [2, 3]  # the oldest dropped first
    assert kept[-1]["event"] == "agent.removed" and kept[-1]["level"] == "INFO"
    assert kept[-1]["fields"] == {"agent_id": "ag-2", "n": str(R(""))}  # scalars only
    assert recent.since(2) == kept[1:]


@pytest.mark.parametrize("kind", list(EventKind))
def test_event_names_are_the_log_names(kind: EventKind) -> None:
    assert kind.value == kind.name.lower().replace("_", ".")
