"""``Commands``: the master's messages on a session, applied to the state and the executors.

A ``commands`` message holds launches, kills and acknowledgements, applied in order with one
checkpoint write for the whole message; a ``settings`` message changes the heartbeat interval
and the reconnect jitter. ``forget`` is the master's removal of the agent (FAILED_PRECONDITION).

Invariants:
- a launch's ``TaskInfo`` messages become ``TaskSpec`` values here (``agent.wire``): the state
  sees no wire type;
- the launches of a message are checkpointed before they start in the executor, and before any
  later kill of the same message is applied; a failed write starts nothing;
- a kill's reason that this agent does not know is ``TaskReason.UNSPECIFIED``, a kill without a
  grace period (or with a negative one) uses the task's own;
- each applied message wakes the update sender (acknowledgements make the next updates due).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from fairshare.logs import log_event
from fairshare.task_states import TaskState
from fairshare.v1 import agent_pb2
from fairshare.wire import reason_from_pb

from agent.core.decisions import KillDecision
from agent.core.records import LaunchSpec, TaskKey, TaskReason
from agent.core.state import AgentState
from agent.runtime.config import MasterSettings
from agent.runtime.loop import now
from agent.runtime.persistence import Persistence
from agent.tasks.executors.base import Report, TaskEvent
from agent.tasks.executors.router import TaskExecutors
from agent.wire import duration_seconds, reason_name, task_spec

__all__ = ["Commands"]

_LOG = logging.getLogger("fairshare.agent")


class Commands:
    """Applies what the master sends on the stream."""

    def __init__(
        self,
        state: AgentState,
        executor: TaskExecutors,
        persistence: Persistence,
        settings: MasterSettings,
        wake: asyncio.Event,
        report: Report,
    ) -> None:
        self._state = state
        self._executor = executor
        self._persistence = persistence
        self._settings = settings
        self._wake = wake
        self._report = report

    def dispatch(self, message: agent_pb2.ConnectResponse) -> None:
        """Apply one message of the master (``commands`` or ``settings``)."""
        kind = message.WhichOneof("message")
        if kind == "commands":
            self.apply(message.commands.commands)
        elif kind == "settings":
            settings = message.settings
            self._settings.apply(settings.heartbeat_interval, settings.reconnect_jitter)
            interval = self._settings.heartbeat_interval
            log_event(_LOG, "master.settings", heartbeat_interval=f"{interval:g}")
        else:
            log_event(_LOG, "message.ignored", logging.WARNING, kind=kind)

    def apply(self, commands: Sequence[agent_pb2.AgentCommand]) -> None:
        """Apply commands in order, with one checkpoint write for all of them; launches are
        checkpointed and started before a later command of the batch is applied."""
        starting: list[tuple[TaskKey, LaunchSpec]] = []
        for command in commands:
            kind = command.WhichOneof("command")
            if kind == "launch_tasks":
                starting += self._admit(command.launch_tasks)
                continue
            if starting and not self._start(starting):
                return
            starting = []
            if kind == "kill_task":
                self._kill_command(command.kill_task)
            elif kind == "acknowledge_status":
                self._acknowledge(command.acknowledge_status)
            else:
                log_event(_LOG, "command.ignored", logging.WARNING)
        if starting:
            self._start(starting)
        self._persistence.persist()
        self._wake.set()

    def _admit(self, command: agent_pb2.LaunchTasksCommand) -> list[tuple[TaskKey, LaunchSpec]]:
        """Admit the tasks of a launch into the state; returns the ones to start."""
        tasks = [task_spec(info) for info in command.tasks]
        result = self._state.handle_launch(command.framework_id, tasks, now(), time.time())
        for key, problem in result.rejected:
            log_event(
                _LOG,
                "task.rejected",
                logging.WARNING,
                framework_id=key[0],
                task_id=key[1],
                problem=problem,
            )
        for reason in result.ignored:
            log_event(_LOG, "launch.ignored", logging.WARNING, reason=reason)
        return list(result.accepted)

    def _start(self, accepted: Sequence[tuple[TaskKey, LaunchSpec]]) -> bool:
        """Checkpoint admitted tasks, then start them (Mesos does the same); False if the
        checkpoint write failed (nothing is started)."""
        if not self._persistence.persist():
            return False
        for key, spec in accepted:
            self._executor.launch(key, spec)
            fields = spec.log_fields()
            log_event(_LOG, "task.launched", framework_id=key[0], task_id=key[1], **fields)
        return True

    def _acknowledge(self, ack: agent_pb2.AcknowledgeStatusCommand) -> None:
        applied = self._state.handle_ack(ack.framework_id, ack.task_id, ack.uuid, now())
        log_event(
            _LOG,
            "status_update.acknowledged" if applied else "acknowledgement.ignored",
            logging.DEBUG,
            task_id=ack.task_id,
            uuid=ack.uuid.hex(),
        )

    def _kill_command(self, kill: agent_pb2.KillTaskCommand) -> None:
        """A master's kill: its reason (one this agent does not know: none) and grace period
        (a negative one: the task's own)."""
        grace = None
        if kill.HasField("grace_period"):
            with contextlib.suppress(ValueError):
                grace = duration_seconds(kill.grace_period)
        self._kill(kill.framework_id, kill.task_id, reason_from_pb(kill.reason), grace)

    def _kill(
        self,
        framework_id: str,
        task_id: str,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        grace: float | None = None,
    ) -> None:
        """Kill a task: KILLING and a stop in the executor, or DROPPED for an unknown one."""
        key = (framework_id, task_id)
        decision = self._state.handle_kill(framework_id, task_id, now(), time.time())
        log_event(
            _LOG,
            "task.kill.requested",
            framework_id=framework_id,
            task_id=task_id,
            decision=decision.value,
            reason=reason_name(reason),
        )
        if decision is KillDecision.KILL and not self._executor.kill(key, reason, grace=grace):
            # Admitted but not running in the executor (cannot normally happen): report it.
            self._report(TaskEvent(key, TaskState.KILLED, message="killed"))

    def forget(self) -> None:
        """The master removed the agent: stop its tasks silently, register afresh next."""
        keys: list[TaskKey] = self._state.on_removed()
        self._persistence.persist()  # the checkpoint forgets them too ("drops its checkpoint")
        for key in keys:
            self._executor.kill(key, silent=True)
        log_event(_LOG, "agent.removed", logging.WARNING, tasks_killed=len(keys))
