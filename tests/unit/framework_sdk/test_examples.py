"""The example frameworks run as real processes against the fake master's simulated cluster."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from fairshare.v1 import common_pb2, scheduler_pb2
from sdk_helpers import run_async

from framework_sdk import ResourceVector, TaskState
from framework_sdk.testing import FakeAgent, FakeMaster

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
AGENTS = [
    FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:1024")),
    FakeAgent("ag-2", ResourceVector.parse("cpus:1;mem:1024")),
]
PROCESS_TIMEOUT = 20.0


async def start(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(process.communicate(), PROCESS_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def test_batch_job_runs_all_tasks_and_exits_0() -> None:
    async def scenario() -> None:
        async with FakeMaster(agents=AGENTS) as master:
            process = await start(
                "batch_job.py", "--master", master.address, "--tasks", "7",
                "--task", "cpus:0.5;mem:128", "--duration", "0.05", "--timeout", "15",
            )  # fmt: skip
            code, out, err = await finish(process)
            assert code == 0, err
            assert "7 tasks finished" in out
            assert sorted(t.task_id for t in master.launched_tasks) == sorted(
                f"task-{i}" for i in range(7)
            )
            subscribe = master.requests("Subscribe")[0]
            assert isinstance(subscribe, scheduler_pb2.SubscribeRequest)
            assert subscribe.demand.max_tasks == 7  # declared its shape and count
            remaining = [r.demand.max_tasks for r in master.requests("UpdateDemand")]  # type: ignore[attr-defined]
            assert remaining == sorted(remaining, reverse=True) and remaining[-1] == 1
            assert master.requests("Teardown")
            # updates are acknowledged implicitly (3 per task; the last few may race the teardown)
            assert len(master.acknowledgements) >= 3 * 7 - 4

    run_async(scenario(), timeout=30)


def test_long_running_service_keeps_instances_up_and_stops_on_sigterm() -> None:
    async def scenario() -> None:
        async with FakeMaster(agents=AGENTS) as master:
            process = await start(
                "long_running_service.py", "--master", master.address, "--instances", "3",
                "--task", "cpus:0.5;mem:256", "--name", "web",
            )  # fmt: skip
            try:

                def running() -> list[str]:
                    return sorted(
                        task_id for (_, task_id), task in master.state.tasks.items()
                        if task.status.state == common_pb2.TASK_STATE_RUNNING
                    )  # fmt: skip

                await master.wait_for(lambda: len(running()) == 3, 10, "3 running instances")
                assert running() == ["web-0.1", "web-1.1", "web-2.1"]
                master.send_update("web-1.1", TaskState.FAILED, message="crashed")
                await master.wait_for(lambda: "web-1.2" in running(), 10, "the relaunch")
                assert len(running()) == 3
                process.send_signal(signal.SIGTERM)
                code, _, err = await finish(process)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            assert code == 0, err
            assert "relaunching" in err
            assert master.requests("Teardown")
            assert master.state.tasks == {}  # torn down: no task left

    run_async(scenario(), timeout=30)
