"""``fairshare run``: flag validation, and the built-in framework against the fake master."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

import pytest
from fairshare import cli
from fairshare.v1 import scheduler_pb2
from sdk_helpers import run_async

from client_commands.run import RunConfig, add_run_arguments, run_config, run_framework
from framework_sdk import ResourceVector
from framework_sdk.testing import FakeAgent, FakeMaster

SHAPE = ResourceVector.parse("cpus:1;mem:1024")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--task", "cpus:-1"], "--task 'cpus:-1': resource 'cpus': quantity -1 is negative"),
        (["--task", "cpus=1"], "--task 'cpus=1': "),
        (["--task", ""], "--task '': names no resources"),
        (["--count", "0"], "--count '0': '0' must be at least 1"),
        (["--weight", "0"], "--weight '0': '0' is not a finite number > 0"),
        (["--weight", "nan"], "--weight 'nan': "),
        (["--duration", "0"], "--duration '0': '0' must be more than zero"),
        (["--master", "localhost"], "--master 'localhost': 'localhost' is not HOST:PORT"),
        (["--name", " "], "--name ' ': must not be empty"),
        (["--detach-wait", "0"], "--detach-wait '0': "),
        (["--detach-wait", "soon"], "--detach-wait 'soon': "),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    base = {"--master": "127.0.0.1:5050", "--name": "web", "--task": "cpus:1;mem:128"}
    base.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    argv = ["run", *[part for pair in base.items() for part in pair]]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("fairshare run: ")
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "preemptible"),
    [
        ([], True),
        (["--no-preemptible"], False),
        (["--command", "true"], False),
        (["--command", "true", "--preemptible"], True),
    ],
)
def test_placeholder_tasks_are_preemptible_unless_told_command_tasks_only_if_told(
    flags: list[str], preemptible: bool
) -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--name", "web", "--task", "cpus:1", *flags])
    assert run_config(args).preemptible is preemptible


@pytest.mark.parametrize(("flags", "seconds"), [([], 30.0), (["--detach-wait", "2m"], 120.0)])
def test_detach_wait_is_30s_unless_told(flags: list[str], seconds: float) -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--name", "web", "--task", "cpus:1", "--detach", *flags])
    assert run_config(args).detach_wait == seconds


def test_tasks_carry_the_preemptible_flag_to_the_master() -> None:
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:4096"))]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            stop = asyncio.Event()
            for preemptible in (True, False):
                cfg = config(master.address, count=1, preemptible=preemptible)
                runner = asyncio.ensure_future(run_framework(cfg, stop))
                await master.wait_for(lambda: master.launched_tasks, 5, "a task launched")
                assert [t.preemptible for t in master.launched_tasks] == [preemptible]
                assert master.launched_tasks[0].info.preemptible is preemptible
                stop.set()
                assert await asyncio.wait_for(runner, 5) == 0
                master.launched_tasks.clear()
                stop.clear()

    run_async(scenario())


def config(master: str, **changes: object) -> RunConfig:
    base = RunConfig(
        master=master, name="web", role="*", weight=1.0, shape=SHAPE, count=3, duration=None
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_unreachable_master_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario() -> int:
        async with FakeMaster() as master:
            address = master.address
        return await run_framework(config(address, connect_timeout=0.3))

    assert run_async(scenario()) == 1
    err = capsys.readouterr().err
    assert "could not subscribe to the master at 127.0.0.1:" in err  # named once (issue 16)
    assert err.count("master at") == 1


def test_keeps_count_tasks_declares_demand_replaces_finished_and_tears_down() -> None:
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:8;mem:8192"))]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            stop = asyncio.Event()
            cfg = config(master.address, duration=0.05, role="batch", weight=2.5)
            runner = asyncio.ensure_future(run_framework(cfg, stop))
            peak = 0

            def enough() -> bool:
                nonlocal peak
                peak = max(peak, len(master.state.tasks))
                return len(master.launched_tasks) >= 9  # three generations of 3 tasks

            await master.wait_for(enough, 10, "finished tasks replaced")
            assert peak <= 3
            stop.set()
            assert await asyncio.wait_for(runner, 5) == 0
            subscribe = master.requests("Subscribe")[0]
            assert isinstance(subscribe, scheduler_pb2.SubscribeRequest)
            info = subscribe.framework_info
            assert (info.name, info.role, info.weight) == ("web", "batch", 2.5)
            assert subscribe.demand.max_tasks == 3
            assert [(r.name, r.millis) for r in subscribe.demand.task_resources.items] == [
                ("cpus", 1000),
                ("mem", 1024000),
            ]
            assert all(t.duration == 0.05 for t in master.launched_tasks)
            assert len({t.task_id for t in master.launched_tasks}) == len(master.launched_tasks)
            assert master.requests("Suppress") and master.requests("Revive")
            assert master.requests("Teardown")
            assert master.state.tasks == {}

    run_async(scenario())


def test_without_duration_tasks_stay_running_until_stopped() -> None:
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:4096"))]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            stop = asyncio.Event()
            runner = asyncio.ensure_future(run_framework(config(master.address, count=5), stop))
            await master.wait_for(lambda: len(master.state.tasks) == 2, 5, "2 tasks (agent full)")
            await asyncio.sleep(0.1)
            assert len(master.launched_tasks) == 2  # only what fits; nothing replaced
            stop.set()
            assert await asyncio.wait_for(runner, 5) == 0

    run_async(scenario())


def test_detach_leaves_with_what_runs_when_the_cluster_is_too_small(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 16: ``--detach`` returns; on a cluster with room for 2 of 5 it says so."""
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:4096"))]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            detached = config(master.address, count=5, detach=True, detach_wait=0.5)
            assert await asyncio.wait_for(run_framework(detached), 10) == 0
            assert len(master.launched_tasks) == 2
            assert not master.requests("Teardown")  # left to the master
            (subscribe,) = master.requests("Subscribe")
            assert subscribe.framework_info.failover_timeout.seconds == 7 * 24 * 3600

    run_async(scenario())
    out = capsys.readouterr().out
    assert "runs 2 task(s) of the 5 wanted (no more will be launched); detached" in out


def test_detach_with_nothing_running_gives_up_in_time_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 24, item 3: ``--detach`` with no task running returns after its wait (30 s), exit
    1, with a message, and tears the framework down (nothing is left waiting)."""
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:0.5;mem:512"))]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            detached = config(master.address, count=2, detach=True, detach_wait=0.5)
            assert await asyncio.wait_for(run_framework(detached), 10) == 1
            assert not master.launched_tasks
            assert master.requests("Teardown")

    run_async(scenario())
    err = capsys.readouterr().err
    assert "none of the 2 task(s) of cpus:1;mem:1024 runs after 0.5s: " in err
    assert "the framework is torn down" in err


def test_a_stop_before_the_master_answers_ends_the_run_at_once() -> None:
    """Issue 24, item 3: Ctrl-C while no master answers does not wait for --connect-timeout."""

    async def scenario() -> None:
        stop = asyncio.Event()
        waiting = config("127.0.0.1:1", count=1)
        asyncio.get_running_loop().call_later(0.5, stop.set)
        assert await asyncio.wait_for(run_framework(waiting, stop), 5) == 0

    run_async(scenario())
