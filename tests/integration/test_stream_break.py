"""A broken agent stream with status updates in flight, with real processes: a master, an agent
that reaches it through a TCP proxy the test stalls and cuts (``tcp_proxy``), and an SDK
framework in the test process (implicit acknowledgements).

Eight tasks are launched together, so each of their state changes travels as one batch. Twice,
the agent's stream is broken in the middle of such a batch:

1. the RUNNING batch is sent while both directions are stalled, then the connection is cut: the
   master never got those updates (they were lost with the connection);
2. the FINISHED batch reaches the master and the framework, which acknowledges it, while the
   master-to-agent direction is stalled; the agent re-sends it on the same stream (the
   acknowledgements do not arrive), then the connection is cut and the acknowledgements are lost.

Each time the agent reconnects through the proxy, reregisters and re-sends every pending update
with the uuid it checkpointed. What must hold: every task reaches the framework as STARTING,
RUNNING, FINISHED, each exactly once and in that order (nothing lost, nothing delivered twice);
the RUNNING updates the framework got carry the uuids the agent minted before the cut; in the
end nothing is pending at the agent and the master holds no task.

Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from daemons import DEFAULT_MASTER_FLAGS, Daemon, start_agent
from fairshare.v1 import common_pb2
from tcp_proxy import TcpProxy
from test_agent_recovery import (
    TASK,
    framework,
    get_state,
    launch,
    metric,
    pending_updates,
    poll,
)

from framework_sdk import TaskSpec, TaskState

MASTER_FLAGS = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "60s")
TASKS = 8
RETRIES = "fairshare_agent_status_update_retries_total"


def checkpointed_uuids(work_dir: Path, state: int) -> dict[str, bytes]:
    """task id -> uuid of its unacknowledged update in ``state``, read from the live checkpoint."""
    with sqlite3.connect(work_dir / "agent.sqlite") as reader:
        rows = reader.execute("SELECT task_id, uuid FROM updates WHERE state = ?", (state,))
        return {task_id: uuid for task_id, uuid in rows}


def reregistrations(agent: Daemon) -> int:
    return agent.log().count(" agent.reregistered ")


def test_a_stream_broken_mid_batch_loses_nothing_and_delivers_nothing_twice(
    master_factory: Callable[..., Daemon], tmp_path: Path
) -> None:
    async def scenario() -> None:
        master = master_factory(*MASTER_FLAGS)
        proxy = TcpProxy(master.address)
        work_dir = tmp_path / "agent"
        agent = start_agent(
            proxy.address,
            work_dir,
            "--status-update-retry",
            "300ms",
            resources="cpus:8;mem:4096",
        )
        try:
            async with framework(master, "breaker") as fw:
                ids = [f"t{i}" for i in range(TASKS)]
                specs = [TaskSpec(i, TASK, startup_delay=3.0, duration=3.0) for i in ids]
                await launch(fw, specs)
                await fw.wait(
                    lambda: all(fw.seen(i, TaskState.STARTING) for i in ids), "8 STARTING"
                )
                await poll(lambda: pending_updates(agent) == 0, "STARTING acknowledged")

                # 1. The RUNNING batch goes out while nothing passes: then the cut loses it.
                proxy.hold(upstream=True, downstream=True)
                running = common_pb2.TASK_STATE_RUNNING
                await poll(
                    lambda: len(checkpointed_uuids(work_dir, running)) == TASKS,
                    "8 RUNNING updates minted",
                )
                minted = checkpointed_uuids(work_dir, running)
                await poll(lambda: proxy.held_bytes()["up"] > 0, "the RUNNING batch in flight")
                assert not any(fw.seen(i, TaskState.RUNNING) for i in ids)
                assert proxy.cut() >= 1
                await fw.wait(
                    lambda: all(fw.seen(i, TaskState.RUNNING) for i in ids),
                    "8 RUNNING after the agent reconnected",
                )
                assert {i: fw.of(i, TaskState.RUNNING)[0].uuid for i in ids} == minted
                assert reregistrations(agent) >= 1

                # 2. The FINISHED batch is delivered and acknowledged; the acknowledgements are
                # stalled, then lost with the connection.
                await poll(lambda: pending_updates(agent) == 0, "RUNNING acknowledged")
                retries = metric(agent, RETRIES)
                proxy.hold(upstream=False, downstream=True)
                await fw.wait(
                    lambda: all(fw.seen(i, TaskState.FINISHED) for i in ids), "8 FINISHED"
                )
                await poll(
                    lambda: metric(agent, RETRIES) >= retries + TASKS,
                    "the agent re-sending the unacknowledged batch on the same stream",
                )
                assert pending_updates(agent) == TASKS
                assert proxy.cut() >= 1
                await poll(lambda: pending_updates(agent) == 0, "every update acknowledged")
                assert reregistrations(agent) >= 2

                await asyncio.sleep(0.5)  # nothing more may arrive: any copy would show below
                delivered = Counter((u.task_id, u.state) for _, u in fw.updates)
                expected = [TaskState.STARTING, TaskState.RUNNING, TaskState.FINISHED]
                assert delivered == Counter((i, state) for i in ids for state in expected)
                for i in ids:
                    assert [u.state for u in fw.of(i)] == expected  # in order
                state = await get_state(master)
                assert not state.tasks
            assert "Traceback" not in agent.log() and "Traceback" not in master.log()
        finally:
            agent.kill()
            proxy.close()

    asyncio.run(scenario())
