"""``fairshare run``: the built-in framework (placeholder tasks, or a command in N tasks).

``run_command`` is its entry in ``fairshare.cli``'s table: it adds its flags to the parser
(``RUN_SETTINGS``, resolved by ``fairshare.settings``: ``--master`` defaults from
``FAIRSHARE_MASTER``, the TOML file, then 127.0.0.1:5050) and runs the parsed arguments,
returning the exit code. The framework is an SDK ``Framework`` like any other.

Invariants:
- Bad input exits 2 with ``fairshare run: --flag ...: <why>`` on stderr; an unreachable or
  refusing master exits 1 with a clear message; success (including SIGTERM ending ``run``)
  exits 0, Ctrl-C 130. No traceback reaches the user for these cases.
- ``run`` declares its task shape and count as its Demand, so the master sizes offers to the
  fair number of tasks; it keeps at most ``--count`` non-terminal tasks, replaces tasks that
  end, suppresses offers while it has all it wants, and tears the framework down on exit. It
  logs one line per event (``fairshare.logs``: ``--log-format``, ``--log-level``), the SDK's
  own lines included.
- ``run --detach`` returns once its ``--count`` tasks are RUNNING (or, if the cluster cannot run
  them all, ``--detach-wait`` (``DETACH_WAIT``, 30 s) after the start with at least one running,
  saying how many run; no more are launched then), without teardown: the master keeps the framework
  and its tasks (ended tasks are not replaced) until ``fairshare stop NAME`` or its failover
  timeout, ``DETACHED_FAILOVER_TIMEOUT`` (a week) unless ``--failover-timeout`` says otherwise; a
  follower process (``client_commands.detached``) acknowledges their updates. Attached, the failover
  timeout defaults to Mesos's 0.
- ``run --command CMD`` runs CMD (with ``/bin/sh -c``) in ``--count`` command tasks once, like
  ``mesos-execute``: tasks that end are not replaced; when all have ended it prints one line per
  task (its id, final state and message) and exits 0 if every one FINISHED, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any, Final

import grpc
from fairshare.cli import Command, note
from fairshare.logs import log_event
from fairshare.settings import (
    SettingsError,
)
from fairshare.tls_probe import diagnose_target

from client_commands.detached import READY_TIMEOUT, Follower, HandOff, hand_off
from client_commands.master_calls import MasterAddress, fetch_state
from client_commands.preflight import unknown_names, unplaceable, why_nothing_runs
from client_commands.run_config import (
    EXIT_FAILURE,
    EXIT_OK,
    RUN_SETTINGS,
    STATUS_TIMEOUT,
    RunConfig,
    add_run_arguments,
    run_config,
)
from client_commands.status_document import state_to_dict
from client_commands.task_keeper import EXIT_DETACHED, EXIT_INTERRUPTED, TaskKeeper, keep_running
from framework_sdk.errors import CallError, FairshareError
from framework_sdk.framework import Framework
from framework_sdk.options import ClientOptions
from framework_sdk.types import (
    Capability,
    Demand,
    FrameworkInfo,
    TaskState,
)

__all__ = [
    "RUN_SETTINGS",
    "RunConfig",
    "add_run_arguments",
    "run",
    "run_command",
    "run_config",
    "run_framework",
]

_LOG = logging.getLogger("fairshare.run")


def _detached(
    info: FrameworkInfo, framework_id: str, keeper: TaskKeeper, follower: Follower | None
) -> int:
    log_event(
        _LOG,
        "framework.detached",
        framework_id=framework_id,
        tasks=len(keeper.live),
        failover_timeout=info.failover_timeout,
        follower=follower.pid if follower is not None else None,
    )
    running, wanted = keeper.running(), keeper.wanted
    short = "" if running >= wanted else f" of the {wanted} wanted (no more will be launched)"
    if follower is not None and follower.ready:
        kept = (
            f" process {follower.pid} follows them and acknowledges their updates until they"
            f" end (log {follower.log}), or until fairshare stop {info.name}; the master keeps"
            f" them for {info.failover_timeout:g}s should it stop"
        )
    else:
        kept = (
            f" the master keeps them for {info.failover_timeout:g}s without a scheduler, or"
            f" until fairshare stop {info.name}"
        )
    print(f"{info.name} (framework {framework_id}) runs {running} task(s){short}; detached:{kept}")
    if follower is not None and not follower.ready:
        print(
            f"fairshare run: the process that should follow the tasks (pid {follower.pid}) did"
            f" not subscribe within {READY_TIMEOUT:g}s; see {follower.log}",
            file=sys.stderr,
        )
    return EXIT_OK


def _summary(keeper: TaskKeeper, count: int) -> int:
    """One line per command task on stdout; 0 if all ``count`` ran and FINISHED."""
    for task_id, update in keeper.ended.items():
        print(f"{task_id} {update.state.value}: {update.message}  (fairshare logs {task_id})")
    finished = sum(u.state is TaskState.FINISHED for u in keeper.ended.values())
    return EXIT_OK if finished == count else EXIT_FAILURE


def _install_stop_signals(stop: asyncio.Event) -> list[int]:
    """SIGINT and SIGTERM set ``stop``; the list returned names the signals received."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on(signum: int) -> None:
        received.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, on, signum)
    return received


async def _start_unless_stopped(fw: Framework, stop: asyncio.Event) -> bool:
    """Subscribe, unless ``stop`` comes first (Ctrl-C while the master does not answer yet):
    False then, the client closed. Raises what subscribing raised."""
    starting = asyncio.ensure_future(fw.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        starting.result()
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError, FairshareError):
        await starting
    await fw.close()
    return False


async def run_framework(
    config: RunConfig,
    stop: asyncio.Event | None = None,
    follow: Callable[[HandOff], Follower] | None = None,
) -> int:
    """Run the built-in framework until ``stop`` is set (or SIGINT/SIGTERM); the exit code
    (130 after SIGINT). Detached, ``follow`` (``client_commands.detached.hand_off``) is given
    the framework once this process has let go of it."""
    stop = stop or asyncio.Event()
    received = _install_stop_signals(stop)

    def stopped(code: int) -> int:
        return EXIT_INTERRUPTED if signal.SIGINT in received else code

    capabilities = {Capability.PARTITION_AWARE}
    if config.shape.millis("gpus"):  # tasks that need GPUs may be offered GPU agents
        capabilities.add(Capability.GPU_RESOURCES)
    info = FrameworkInfo(
        name=config.name,
        role=config.role,
        weight=config.weight,
        capabilities=frozenset(capabilities),
        failover_timeout=config.effective_failover_timeout,
    )
    demand = Demand(task_resources=config.shape, max_tasks=config.count)

    async def why() -> str:
        document = await asyncio.to_thread(_state_document, config)
        return why_nothing_runs(config.shape, document)

    try:
        fw = Framework.connect(
            config.master,
            info,
            demand=demand,
            connect_timeout=config.connect_timeout,
            options=ClientOptions(security=config.security),
        )
        if not await _start_unless_stopped(fw, stop):
            return stopped(EXIT_OK)
        try:
            keeper = TaskKeeper(fw, config, done=stop)  # command tasks: stop once all ended
            code = await keep_running(fw, keeper, stop, config.detach, config.detach_wait, why=why)
            if config.command is not None and not config.detach and code == EXIT_OK:
                code = _summary(keeper, config.count)
            framework_id, info = fw.framework_id, fw.info
        except BaseException:
            await fw.close()
            raise
        await fw.__aexit__(None, None, None)  # what ``async with`` does: the last event acked
        # Closed without teardown: a detached framework is the follower's from now on.
        if code != EXIT_DETACHED:
            return stopped(code)
        follower = None
        if follow is not None and info.failover_timeout > 0:
            handoff = _handoff(config, framework_id, keeper)
            follower = await asyncio.to_thread(follow, handoff)
        return _detached(info, framework_id, keeper, follower)
    except CallError as error:
        print(f"fairshare run: the master refused the framework: {error}", file=sys.stderr)
    except FairshareError as error:  # its message names the master and the last error once
        print(f"fairshare run: {error}", file=sys.stderr)
    return EXIT_FAILURE


def _state_document(config: RunConfig, timeout: float = STATUS_TIMEOUT) -> dict[str, Any]:
    """The cluster's status document (``state_to_dict``), read as ``fairshare status`` does
    (raises ``grpc.RpcError``)."""
    master = MasterAddress(config.master, config.security)
    return state_to_dict(fetch_state(master, on_election=None, timeout=timeout))


class RunRefused(Exception):
    """The run cannot start (a TLS or port mistake): ``str`` is the one line to print."""


def preflight(config: RunConfig) -> None:
    """Refuse a shape naming a resource no agent has (``SettingsError``: exit 2, the known
    names listed); say at once when no agent could ever run one task of it. A master that
    cannot be asked (down, or GetState not allowed) is left to the run to report."""
    try:
        document = _state_document(config, min(STATUS_TIMEOUT, config.connect_timeout))
    except grpc.RpcError as error:
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        mistake = diagnose_target(config.master, config.security, details or "")
        if mistake is not None:  # no use waiting --connect-timeout for it
            raise RunRefused(mistake) from None
        return
    unknown = unknown_names(config.shape, document)
    if unknown is not None:
        raise SettingsError(f"--task {str(config.shape)!r}: {unknown}")
    problem = unplaceable(config.shape, document)
    if problem is not None:
        then = (
            f"giving up after {config.detach_wait:g}s unless one registers"
            if config.detach
            else "waiting for one to register (Ctrl-C to stop)"
        )
        note(f"cannot place a task of {config.shape}: {problem}; {then}")


def _handoff(config: RunConfig, framework_id: str, keeper: TaskKeeper) -> HandOff:
    return HandOff(
        master=config.master,
        framework_id=framework_id,
        name=config.name,
        role=config.role,
        weight=config.weight,
        failover_timeout=config.effective_failover_timeout,
        shape=str(config.shape),
        count=config.count,
        command=config.command,
        tasks={task_id: state.value for task_id, state in keeper.live.items()},
        security=HandOff.security_of(config.security),
        log_level="DEBUG" if config.log_level == "DEBUG" else "INFO",  # its own log file
    )


def run(args: argparse.Namespace) -> int:
    """``fairshare run``: keep up to ``--count`` placeholder tasks of ``--task`` running."""
    config = run_config(args)  # SettingsError: the command line says why, exit 2
    try:
        preflight(config)  # SettingsError: a resource name no agent has, exit 2
        return asyncio.run(run_framework(config, follow=hand_off))
    except RunRefused as refused:
        print(f"fairshare run: {refused}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


run_command: Final = Command(add_run_arguments, run)
