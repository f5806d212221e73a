"""What a detached ``fairshare run`` leaves behind: a background process that follows its tasks.

``fairshare run --detach`` returns once its tasks run, but each task still owes its framework
an acknowledged final status update (agent.proto): with nobody subscribed the agent re-sends
it forever, ended tasks stay listed and the framework stays DISCONNECTED until its failover
timeout. So the command hands the framework to a follower before it returns: ``hand_off``
starts ``python -m client_commands.detached`` in a session of its own (no terminal), gives it
the run's settings, the framework id and the tasks that live on its standard input (a token
never goes on a command line), and waits until it has subscribed as that framework
(scheduler failover, the same framework id).

The follower (``follow``) acknowledges every update (the SDK's implicit acknowledgements),
launches nothing (a detached run's ended tasks are not replaced), logs each task's end with
its message, and when the last task has ended it tears the framework down (a ``--command``
run's summary, one line per task as the attached run prints it, goes to its log first); the
framework's tasks' output stays readable with ``fairshare logs TASK_ID``. ``fairshare stop
NAME`` removes the framework: the follower is told so and ends. SIGTERM or SIGINT end it
without teardown (the master keeps the framework for its failover timeout, as before), and so
does a master that has not answered for ``GIVE_UP`` seconds. Its log is
``<tmp>/fairshare-run-<framework id>.log``.

Invariants: the follower never launches a task; it tears down only a framework none of whose
handed tasks lives any more; the command that started it returns within ``READY_TIMEOUT``
whatever the follower does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fairshare.etcd_security import EtcdSecurity
from fairshare.logs import configure_logging, log_event
from fairshare.resources import ResourceVector
from fairshare.transport import ClientSecurity

from framework_sdk.errors import FairshareError
from framework_sdk.events import ErrorEvent, OffersReceived, StatusUpdate, Subscribed
from framework_sdk.framework import Framework
from framework_sdk.options import ClientOptions
from framework_sdk.types import Capability, Demand, FrameworkInfo, TaskState

__all__ = ["GIVE_UP", "READY_TIMEOUT", "Follower", "HandOff", "follow", "hand_off", "log_path"]

READY_TIMEOUT: Final = 15.0
"""How long ``hand_off`` waits for the follower to subscribe."""
GIVE_UP: Final = 600.0
"""A follower whose master has not answered for this long ends (without teardown)."""
READY: Final = "subscribed"
_LOG = logging.getLogger("fairshare.run.detached")


@dataclass(frozen=True, slots=True)
class HandOff:
    """What the follower needs: the run's settings, its framework and its live tasks."""

    master: str
    framework_id: str
    name: str
    role: str
    weight: float
    failover_timeout: float
    shape: str
    count: int
    command: str | None
    tasks: dict[str, str]  # task id -> state name
    security: dict[str, str | None]
    log_level: str = "INFO"

    def to_json(self) -> str:
        """One line of JSON (the follower's standard input)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> HandOff:
        """The hand-off ``to_json`` wrote."""
        return cls(**json.loads(text))

    @staticmethod
    def security_of(security: ClientSecurity) -> dict[str, str | None]:
        """``ClientSecurity`` as plain strings (paths made absolute: the follower outlives the
        command's working directory)."""

        def path(value: Path | None) -> str | None:
            return None if value is None else str(Path(value).resolve())

        return {
            "ca": path(security.ca),
            "cert": path(security.cert),
            "key": path(security.key),
            "token": security.token,
            "server_name": security.server_name,
            "etcd_ca": path(security.etcd.ca),
            "etcd_cert": path(security.etcd.cert),
            "etcd_key": path(security.etcd.key),
            "etcd_user": security.etcd.user,
            "etcd_password": security.etcd.password,
        }

    def client_security(self) -> ClientSecurity:
        """The ``ClientSecurity`` ``security_of`` wrote down."""
        values = self.security

        def path(name: str) -> Path | None:
            value = values.get(name)
            return None if value is None else Path(value)

        return ClientSecurity(
            ca=path("ca"),
            cert=path("cert"),
            key=path("key"),
            token=values.get("token"),
            server_name=values.get("server_name"),
            etcd=EtcdSecurity(
                path("etcd_ca"),
                path("etcd_cert"),
                path("etcd_key"),
                values.get("etcd_user"),
                values.get("etcd_password"),
            ),
        )


def log_path(framework_id: str) -> Path:
    """Where the follower of ``framework_id`` logs."""
    return Path(tempfile.gettempdir()) / f"fairshare-run-{framework_id}.log"


@dataclass(frozen=True, slots=True)
class Follower:
    """A started follower: its pid and log, and whether it subscribed in time."""

    pid: int
    log: Path
    ready: bool


def hand_off(handoff: HandOff, timeout: float = READY_TIMEOUT) -> Follower:
    """Start the follower of ``handoff`` and wait (at most ``timeout``) until it subscribed."""
    log = log_path(handoff.framework_id)
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "client_commands.detached"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sink,
            start_new_session=True,  # no terminal: Ctrl-C in the shell is not for it
        )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(handoff.to_json().encode() + b"\n")
    process.stdin.close()
    ready = False
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([process.stdout], [], [], left)
        if not readable:
            break
        line = process.stdout.readline()
        if not line:  # it ended
            break
        if line.decode(errors="replace").strip() == READY:
            ready = True
            break
    process.stdout.close()
    return Follower(process.pid, log, ready)


def _info(handoff: HandOff) -> FrameworkInfo:
    shape = ResourceVector.parse(handoff.shape)
    capabilities = {Capability.PARTITION_AWARE}
    if shape.millis("gpus"):
        capabilities.add(Capability.GPU_RESOURCES)
    return FrameworkInfo(
        name=handoff.name,
        role=handoff.role,
        weight=handoff.weight,
        capabilities=frozenset(capabilities),
        failover_timeout=handoff.failover_timeout,
        framework_id=handoff.framework_id,
    )


async def follow(handoff: HandOff, ready: Any = None, stop: asyncio.Event | None = None) -> int:
    """Subscribe as the handed framework, acknowledge its updates until its tasks have ended
    (then tear it down), it is removed, ``stop`` is set or the master is gone ``GIVE_UP``
    seconds; ``ready()`` once subscribed. The exit code (0 unless the master refused)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)
    live = {task_id: TaskState(state) for task_id, state in handoff.tasks.items()}
    ended: dict[str, StatusUpdate] = {}
    demand = Demand(task_resources=ResourceVector.parse(handoff.shape), max_tasks=handoff.count)
    options = ClientOptions(security=handoff.client_security())
    try:
        async with Framework.connect(
            handoff.master, _info(handoff), demand=demand, suppressed=True, options=options
        ) as fw:
            log_event(_LOG, "follower.subscribed", framework_id=fw.framework_id, tasks=len(live))
            if ready is not None:
                ready()
            if live:
                await fw.reconcile(list(live))  # an end missed between the two processes
            outcome = await _follow(fw, handoff, live, ended, stop)
            if outcome == "ended":
                if handoff.command is not None:
                    for task_id, update in ended.items():
                        log_event(
                            _LOG,
                            "task.summary",
                            task_id=task_id,
                            state=update.state.value,
                            message=update.message,
                        )
                log_event(_LOG, "framework.teardown", framework_id=fw.framework_id)
                await fw.teardown()
            return 0
    except FairshareError as error:
        log_event(_LOG, "follower.failed", logging.ERROR, error=error)
        return 1


async def _follow(
    fw: Framework,
    handoff: HandOff,
    live: dict[str, TaskState],
    ended: dict[str, StatusUpdate],
    stop: asyncio.Event,
) -> str:
    """``"ended"`` (every task ended), ``"removed"``, ``"stopped"`` or ``"gone"``."""

    async def consume() -> str:
        if not live:
            return "ended"
        async for event in fw.events():
            match event:
                case Subscribed():
                    await fw.reconcile(list(live))
                case OffersReceived():
                    await fw.decline(event.offers)
                case StatusUpdate() if event.task_id in live:
                    if not event.state.is_terminal:
                        live[event.task_id] = event.state
                        continue
                    del live[event.task_id]
                    ended[event.task_id] = event
                    log_event(
                        _LOG,
                        "task.ended",
                        task_id=event.task_id,
                        state=event.state.value,
                        reason=event.reason.value,
                        message=event.message,
                        left=len(live),
                    )
                    if not live:  # acknowledged now: the teardown that follows drops the
                        await fw.acknowledge(event)  # implicit one of the last event
                        return "ended"
                case ErrorEvent():
                    log_event(_LOG, "framework.removed", logging.WARNING, message=event.message)
                    return "removed"
                case _:
                    pass
        return "removed"

    async def watchdog() -> str:
        away = 0.0
        while True:
            await asyncio.sleep(1.0)
            away = 0.0 if fw.connected else away + 1.0
            if away >= GIVE_UP:
                log_event(_LOG, "follower.gave_up", logging.WARNING, after=f"{GIVE_UP:g}s")
                return "gone"

    async def stopped() -> str:
        await stop.wait()
        log_event(_LOG, "follower.stopped", framework_id=handoff.framework_id)
        return "stopped"

    tasks = [asyncio.ensure_future(job()) for job in (consume, watchdog, stopped)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def main() -> int:
    """``python -m client_commands.detached``: the hand-off on stdin, ``subscribed`` on stdout."""
    handoff = HandOff.from_json(sys.stdin.readline())
    configure_logging("text", handoff.log_level)

    def ready() -> None:
        print(READY, flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the command has returned: nobody reads it
        os.close(devnull)

    return asyncio.run(follow(handoff, ready))


if __name__ == "__main__":
    sys.exit(main())
