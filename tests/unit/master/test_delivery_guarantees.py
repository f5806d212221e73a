"""Status updates end to end in the master: a late retry of an ended task's final update is not
forwarded again, and updates the master makes while a framework is away reach it when it
resubscribes (issue 5: at least once, never applied twice)."""

from __future__ import annotations

import asyncio

from fairshare.task_states import TaskReason, TaskState
from test_runtime_cycle import (
    FrameworkInfo,
    MasterRuntime,
    UpdateEvent,
    agent,
    drain,
    framework,
    offers_of,
    report,
    running,
    scenario,
    settle,
    spec,
)

from master.runtime.taskbook import AckOutcome, TaskBook, UpdateOutcome

UUIDS = [bytes([n]) * 16 for n in range(1, 4)]


def test_a_late_retry_of_an_acknowledged_final_update_is_not_forwarded_again() -> None:
    book = TaskBook()
    book.launch("fw", "ag", spec("t", "cpus:1"))
    done = running("t", "ag", UUIDS[1], TaskState.FINISHED)
    assert (
        book.record_agent_update("fw", running("t", "ag", UUIDS[0]), TaskState.RUNNING).name
        == "NEW"
    )
    assert book.acknowledge("fw", "t", UUIDS[0]) is AckOutcome.FORWARD
    assert book.record_agent_update("fw", done, TaskState.FINISHED) is UpdateOutcome.NEW
    assert book.acknowledge("fw", "t", UUIDS[1]) is AckOutcome.FORWARD
    assert book.get("fw", "t") is None  # ended and acknowledged: dropped
    # The agent's retry crossed the acknowledgement: recognised, not a new task entry.
    assert book.record_agent_update("fw", done, TaskState.FINISHED) is UpdateOutcome.ACKED
    assert book.get("fw", "t") is None
    assert book.acknowledge("fw", "t", UUIDS[0]) is AckOutcome.DUPLICATE
    assert book.acknowledge("fw", "t", UUIDS[2]) is AckOutcome.STALE
    # A new launch of the same id starts with a clean memory.
    book.launch("fw", "ag", spec("t", "cpus:1"))
    assert book.record_agent_update("fw", done, TaskState.FINISHED) is UpdateOutcome.NEW


def test_updates_made_while_a_framework_is_away_reach_it_when_it_resubscribes() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime, failover_timeout=60.0)
        agent_id, _ = agent(runtime, "cpus:1;mem:128")
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t", "cpus:1;mem:128")], None)
        report(runtime, agent_id, fw, running("t", agent_id), TaskState.RUNNING)
        runtime.frameworks.acknowledge(fw, agent_id, "t", running("t", agent_id).uuid)
        runtime.frameworks.unsubscribe(fw, events)  # the framework's process dies
        await asyncio.sleep(0.4)  # the agent is unheard: unreachable, its task LOST
        info = FrameworkInfo(framework_id=fw, name="fw", failover_timeout=60.0)
        again = runtime.frameworks.subscribe(info, None, False)
        updates = [e.status for e in drain(again.channel) if isinstance(e, UpdateEvent)]
        first = updates[0]  # held while it was away, delivered before anything else
        assert (first.task_id, first.state, first.reason) == (
            "t",
            TaskState.LOST,
            TaskReason.AGENT_UNREACHABLE,
        )

    scenario(test, agent_timeout=0.2)
