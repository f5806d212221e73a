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
  them all, ``DETACH_WAIT`` seconds after the start with at least one running, saying how many
  run; no more are launched then), without teardown: the master keeps the framework and its
  tasks (ended tasks are not replaced) until ``fairshare stop NAME`` or its failover timeout,
  ``DETACHED_FAILOVER_TIMEOUT`` (a week) unless ``--failover-timeout`` says otherwise; a
  follower process (``client_commands.detached``) acknowledges their updates. Attached, the
  failover timeout defaults to Mesos's 0.
- ``run --command CMD`` runs CMD (with ``/bin/sh -c``) in ``--count`` command tasks once, like
  ``mesos-execute``: tasks that end are not replaced; when all have ended it prints one line per
  task (its id, final state and message) and exits 0 if every one FINISHED, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from fairshare.cli import Command, command_settings, note
from fairshare.logs import log_event
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import check_role
from fairshare.settings import (
    CLIENT_SETTINGS,
    Setting,
    SettingsError,
    add_setting_flags,
    client_security,
    duration,
    non_empty_text,
    optional_positive_duration,
    positive_duration,
    positive_int,
    positive_number,
)
from fairshare.tls_probe import diagnose_target
from fairshare.transport import INSECURE, ClientSecurity

from client_commands.detached import READY_TIMEOUT, Follower, HandOff, hand_off
from client_commands.master_calls import MasterAddress, fetch_state
from client_commands.preflight import unknown_names, unplaceable, why_nothing_runs
from client_commands.status_document import state_to_dict
from framework_sdk.errors import CallError, FairshareError
from framework_sdk.events import (
    Disconnected,
    ErrorEvent,
    Event,
    OffersReceived,
    StatusUpdate,
    Subscribed,
)
from framework_sdk.framework import Framework
from framework_sdk.options import ClientOptions
from framework_sdk.types import (
    Capability,
    Demand,
    FrameworkInfo,
    Offer,
    TaskSpec,
    TaskState,
)
from framework_sdk.types import Command as TaskCommand

__all__ = [
    "RUN_SETTINGS",
    "RunConfig",
    "run",
    "run_command",
    "run_framework",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
STATUS_TIMEOUT: Final = 5.0
CONNECT_TIMEOUT: Final = 30.0
DETACH_WAIT: Final = 30.0
"""How long ``run --detach`` waits for all its tasks before leaving with those that run."""
DETACHED_FAILOVER_TIMEOUT: Final = 7 * 24 * 3600.0
"""A detached run's failover timeout: its tasks keep running with nobody attached, so the master
must keep them much longer than any restart of a scheduler, as a submitted job (Nomad's ``job
run``) lives until stopped; a week (Mesos operators' usual production setting) bounds how long a
forgotten run holds resources. ``fairshare stop NAME`` ends it sooner."""


def _optional_duration(raw: object) -> float | None:
    """A duration (0 allowed), or ``None`` for the default."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return duration(raw)


def _role(raw: object) -> str:
    """A role path (``fairshare.roles``: ``eng``, ``eng/dev``, ``*``), stripped."""
    return check_role(non_empty_text(raw))


_LOG = logging.getLogger("fairshare.run")


RUN_SETTINGS: Final = (
    *(
        # A command prints results; its log lines are for when they are asked for.
        dataclasses.replace(setting, default="WARNING") if setting.name == "log_level" else setting
        for setting in CLIENT_SETTINGS
    ),
    Setting("count", positive_int, 1, "how many tasks to keep running", metavar="N"),
    Setting(
        "duration",
        optional_positive_duration,
        None,
        "each task ends after this long (and is replaced); default: runs until killed",
        metavar="DURATION",
    ),
    Setting("role", _role, "*", "the framework's role, a path such as eng or eng/dev"),
    Setting("weight", positive_number, 1.0, "the framework's weight", metavar="W"),
    Setting(
        "failover_timeout",
        _optional_duration,
        None,
        "how long the master keeps the framework and its tasks once this command is gone"
        " (default: 0, or a week with --detach)",
        metavar="DURATION",
    ),
    Setting(
        "connect_timeout",
        positive_duration,
        f"{CONNECT_TIMEOUT:g}s",
        "give up (exit 1) when no master has answered within this long",
        metavar="DURATION",
    ),
)
"""The settings of ``fairshare run`` (``--name`` and ``--task`` are its arguments)."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Validated settings of ``fairshare run``."""

    master: str
    name: str
    role: str
    weight: float
    shape: ResourceVector
    count: int
    duration: float | None
    connect_timeout: float = CONNECT_TIMEOUT
    detach: bool = False
    failover_timeout: float | None = None
    detach_wait: float = DETACH_WAIT
    security: ClientSecurity = INSECURE
    command: str | None = None  # a command task's shell line; None: placeholder tasks
    preemptible: bool = True  # its tasks' TaskInfo.preemptible
    log_level: str = "INFO"  # the detached follower logs at this level too

    @property
    def effective_failover_timeout(self) -> float:
        """The failover timeout the framework subscribes with."""
        if self.failover_timeout is not None:
            return self.failover_timeout
        return DETACHED_FAILOVER_TIMEOUT if self.detach else 0.0


def run_config(args: argparse.Namespace) -> RunConfig:
    """The validated settings of ``fairshare run`` (raises ``SettingsError`` naming the flag,
    variable or key); logs are configured from them."""
    values = command_settings("run", RUN_SETTINGS, args)
    try:
        shape = ResourceVector.parse(args.task)
    except ResourceError as error:
        raise SettingsError(f"--task {args.task!r}: {error}") from None
    if not shape:
        raise SettingsError(f"--task {args.task!r}: names no resources")
    if not args.name.strip():
        raise SettingsError(f"--name {args.name!r}: must not be empty")
    command = getattr(args, "task_command", None)
    if command is not None:
        if values["duration"] is not None:
            raise SettingsError("--duration: describes placeholder tasks; a --command ends itself")
        try:
            TaskCommand(shell=command)
        except ValueError as error:
            raise SettingsError(f"--command: {error}") from None
    return RunConfig(
        master=values["master"],
        name=args.name.strip(),
        role=values["role"],
        weight=values["weight"],
        shape=shape,
        count=values["count"],
        duration=values["duration"],
        detach=bool(getattr(args, "detach", False)),
        failover_timeout=values["failover_timeout"],
        connect_timeout=values["connect_timeout"],
        security=client_security(values),
        command=command,
        preemptible=_preemptible(args, command),
        log_level=values["log_level"] or "INFO",
    )


def _preemptible(args: argparse.Namespace, command: str | None) -> bool:
    """``--preemptible``/``--no-preemptible``; unset: placeholder tasks are, command tasks not."""
    chosen = getattr(args, "preemptible", None)
    return command is None if chosen is None else bool(chosen)


class TaskKeeper:
    """The built-in framework: keeps ``count`` tasks of one shape alive on a ``Framework``."""

    def __init__(self, fw: Framework, config: RunConfig, done: asyncio.Event | None = None) -> None:
        self._fw = fw
        self._config = config
        self.live: dict[str, TaskState] = {}
        self.finished = 0
        self.ended: dict[str, StatusUpdate] = {}  # command tasks: how each ended
        self._done = done or asyncio.Event()  # set once every command task has ended
        self._launched = 0
        self._suppressed = False
        self._said_running = False

    @property
    def wanted(self) -> int:
        """How many tasks it keeps running."""
        return self._config.count

    @property
    def shape(self) -> ResourceVector:
        """The shape of its tasks."""
        return self._config.shape

    def running(self) -> int:
        """How many of its tasks are RUNNING."""
        return sum(1 for state in self.live.values() if state is TaskState.RUNNING)

    def all_running(self) -> bool:
        """Every wanted task is RUNNING."""
        return self.running() >= self._config.count

    async def handle(self, event: Event) -> None:
        """React to one event."""
        match event:
            case Subscribed():  # the SDK logs the subscription itself
                if self._suppressed and len(self.live) < self._still_to_launch():
                    await self._revive()
            case OffersReceived():
                for offer in event.offers:
                    await self._use(offer)
                if len(self.live) >= self._still_to_launch() and not self._suppressed:
                    await self._fw.suppress()
                    self._suppressed = True
            case StatusUpdate():
                await self._on_update(event)
            case Disconnected():
                log_event(_LOG, "master.disconnected", logging.WARNING, reason=event.reason)
            case _:
                pass

    def _still_to_launch(self) -> int:
        """How many tasks should be live now (a command task is launched ``count`` times)."""
        if self._config.command is None:
            return self._config.count
        return min(self._config.count, self._config.count - self._launched + len(self.live))

    def _new_task(self) -> TaskSpec:
        self._launched += 1
        task_id = f"{self._config.name}-{self._launched}"
        if self._config.command is not None:
            command = TaskCommand(shell=self._config.command)
            return TaskSpec(
                task_id=task_id,
                resources=self._config.shape,
                command=command,
                preemptible=self._config.preemptible,
            )
        return TaskSpec(
            task_id=task_id,
            resources=self._config.shape,
            duration=self._config.duration,
            preemptible=self._config.preemptible,
        )

    async def _use(self, offer: Offer) -> None:
        wanted = self._still_to_launch() - len(self.live)
        fits = self._config.shape.times_fits_in(offer.resources)
        number = min(wanted, fits)
        if number <= 0:
            await self._fw.decline(offer)
            return
        tasks = [self._new_task() for _ in range(number)]
        # Leftovers are declined; filter the agent only once nothing more is wanted.
        more = len(self.live) + number < self._still_to_launch()
        await self._fw.launch(offer, tasks, refuse_seconds=0.0 if more else None)
        for task in tasks:
            self.live[task.task_id] = TaskState.STAGING
        log_event(
            _LOG,
            "tasks.launched",
            tasks=number,
            shape=self._config.shape,
            agent_id=offer.agent_id,
            live=len(self.live),
            wanted=self._config.count,
        )

    async def _on_update(self, update: StatusUpdate) -> None:
        if update.task_id not in self.live:
            return
        if not update.state.is_terminal:
            if self.live[update.task_id] is not update.state:
                log_event(
                    _LOG,
                    "task.state.changed",
                    task_id=update.task_id,
                    state=update.state.value,
                    agent_id=update.agent_id,
                )
            self.live[update.task_id] = update.state
            if not self._said_running and self._config.command is None and self.all_running():
                self._said_running = True
                if not self._config.detach:
                    print(
                        f"{self._config.name} (framework {self._fw.framework_id}) runs"
                        f" {self.running()} task(s) of {self._config.shape}; Ctrl-C tears it"
                        " down",
                        flush=True,
                    )
            return
        del self.live[update.task_id]
        if update.state is TaskState.FINISHED:
            self.finished += 1
        log_event(
            _LOG,
            "task.ended",
            task_id=update.task_id,
            state=update.state.value,
            reason=update.reason.value,
            message=update.message,
        )
        if self._config.command is not None:
            self.ended[update.task_id] = update
            if len(self.ended) >= self._config.count:
                self._done.set()
            return
        if self._suppressed:
            await self._revive()

    async def _revive(self) -> None:
        await self._fw.revive()
        self._suppressed = False


EXIT_DETACHED: Final = -1  # internal: every task runs, leave them to the master
EXIT_INTERRUPTED: Final = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
WAIT_NOTE: Final = 10.0
"""An attached run with no task running after this long says why (once)."""


async def _keep_running(
    fw: Framework,
    keeper: TaskKeeper,
    stop: asyncio.Event,
    detach: bool = False,
    detach_wait: float = DETACH_WAIT,
    why: Callable[[], Awaitable[str]] | None = None,
) -> int:
    """Keep the tasks until ``stop`` (then tear down), the command tasks ended, or (detached)
    they all run; detached with none running after ``detach_wait``, say ``why`` and tear down
    (exit 1); attached with none running after ``WAIT_NOTE``, say ``why`` once."""
    started = asyncio.get_running_loop().time()

    def detached() -> bool:
        if not detach or not keeper.running():
            return False
        waited = asyncio.get_running_loop().time() - started
        return keeper.all_running() or waited >= detach_wait

    async def consume() -> int:
        async for event in fw.events():
            if isinstance(event, ErrorEvent):
                print(
                    f"fairshare run: the master ended the framework: {event.message}",
                    file=sys.stderr,
                )
                return EXIT_FAILURE
            await keeper.handle(event)
            if detached():
                return EXIT_DETACHED
        return EXIT_OK

    async def reason() -> str:
        if why is None:
            return "no offer fitted"
        try:
            return await why()
        except Exception as error:  # the reason is a courtesy: never fail the run for it
            return f"the master's state could not be read ({error})"

    consumer = asyncio.ensure_future(consume())
    stopper = asyncio.ensure_future(stop.wait())
    timer: asyncio.Future[Any] = asyncio.ensure_future(
        asyncio.sleep(detach_wait if detach else WAIT_NOTE)
    )
    nothing_runs = False
    try:
        while True:
            await asyncio.wait({consumer, stopper, timer}, return_when=asyncio.FIRST_COMPLETED)
            if consumer.done() or stopper.done() or not timer.done():
                break
            if keeper.running():
                if detach:
                    consumer.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await consumer
                    return EXIT_DETACHED
            elif detach:
                nothing_runs = True
                print(
                    f"fairshare run: none of the {keeper.wanted} task(s) of {keeper.shape} runs"
                    f" after {detach_wait:g}s: {await reason()}; the framework is torn down",
                    file=sys.stderr,
                )
                break
            else:
                note(f"no task of {keeper.shape} runs yet: {await reason()}; still waiting")
            timer = asyncio.get_running_loop().create_future()  # once
    finally:
        stopper.cancel()
        timer.cancel()
    if consumer.done():
        return consumer.result()
    consumer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consumer
    log_event(
        _LOG, "framework.teardown", framework_id=fw.framework_id, tasks_killed=len(keeper.live)
    )
    try:
        await fw.teardown()
    except FairshareError as error:
        log_event(_LOG, "framework.teardown.failed", logging.WARNING, error=error)
    return EXIT_FAILURE if nothing_runs else EXIT_OK


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
            code = await _keep_running(fw, keeper, stop, config.detach, config.detach_wait, why=why)
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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare run``."""
    parser.description = (
        "The built-in framework: keep up to --count placeholder tasks of one shape running,"
        " replacing those that end, or with --command run a command in --count tasks once;"
        " Ctrl-C or SIGTERM tears the framework down."
    )
    parser.add_argument("--name", required=True, help="the framework's name (and task id prefix)")
    parser.add_argument(
        "--task",
        required=True,
        metavar="RESOURCES",
        help="task shape, e.g. 'cpus:1;mem:4096'; a shape with gpus makes the framework"
        " GPU-capable: agents with GPUs are offered only to GPU-capable frameworks",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="return once the tasks run; the master keeps them (fairshare stop NAME ends them)",
    )
    parser.add_argument(
        "--command",
        dest="task_command",  # "command" is the subcommand's name (fairshare.cli)
        metavar="CMD",
        help="run CMD (with /bin/sh -c) in --count command tasks once and exit when all have"
        " ended (0 if all finished); their output: fairshare logs TASK_ID",
    )
    parser.add_argument(
        "--preemptible",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let a master started with --rebalance kill these tasks (after its grace period,"
        " reason PREEMPTED) to move the cluster toward its fair allocation; placeholder tasks"
        " are replaced as any that end. Default: placeholder tasks are preemptible, --command"
        " tasks are not",
    )
    add_setting_flags(parser, RUN_SETTINGS)


run_command: Final = Command(add_run_arguments, run)
