"""How the agent runs command tasks: their confinement (``--isolation``), the user they run
as (``--task-user``, ``--allow-root-tasks``), their executors, and the collection of finished
tasks' sandboxes.

Invariants:
- ``check_task_user`` raises ``SettingsError`` naming ``--task-user`` when the user does not
  exist or is root without ``--allow-root-tasks`` (the daemon exits 2 before serving);
- what confines command tasks and whom they run as is said once each at startup (a warning when
  cgroups were wanted but absent, or the task user cannot reach the sandboxes);
- the collector never removes the sandbox of a task the agent still tracks or runs, nor a run
  directory younger than 5 s (a launch may be under way); a failed pass is logged and retried.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from fairshare.logs import log_event
from fairshare.settings import SettingsError

from agent.config import AgentSettings
from agent.runtime import AgentRuntime
from agent.tasks.executors.base import Report
from agent.tasks.executors.command import CommandConfig, CommandExecutor
from agent.tasks.executors.router import TaskExecutors
from agent.tasks.isolation.modes import Isolation, IsolationError, choose
from agent.tasks.sandbox import Sandboxes
from agent.tasks.users import TaskUser, UserRefused, task_user, unreachable

__all__ = [
    "check_task_user",
    "choose_isolation",
    "collect_sandboxes",
    "log_isolation",
    "log_task_user",
    "task_executors",
]

_LOG = logging.getLogger("fairshare.agent")


def choose_isolation(settings: AgentSettings) -> tuple[Isolation, str] | None:
    """The isolation of command tasks and why (None after logging why it cannot be had)."""
    try:
        return choose(settings.isolation, settings.work_dir)
    except IsolationError as error:
        log_event(_LOG, "isolation.unavailable", logging.ERROR, error=str(error))
        return None


def log_isolation(settings: AgentSettings, isolation: Isolation, why: str) -> None:
    """Say once what confines command tasks (a warning when cgroups were wanted but absent)."""
    degraded = settings.isolation is None and isolation.mode != "cgroups"
    level = logging.WARNING if degraded else logging.INFO
    detail = isolation.describe()
    log_event(_LOG, "isolation.selected", level, mode=isolation.mode, detail=detail, why=why)


def check_task_user(settings: AgentSettings) -> TaskUser | None:
    """The user tasks naming none run as (None: the agent's own); ``SettingsError`` naming
    ``--task-user`` when it does not exist or is root without ``--allow-root-tasks``."""
    try:
        return task_user("", settings.task_user, settings.allow_root_tasks)
    except UserRefused as error:
        raise SettingsError(
            f"--task-user {settings.task_user}: {error}; name an unprivileged user (or add"
            " --allow-root-tasks to run tasks as root)"
        ) from None


def log_task_user(settings: AgentSettings) -> None:
    """Say once who command tasks run as (a warning when that user cannot reach the
    sandboxes: every command task would be refused)."""
    try:
        user = check_task_user(settings)
    except SettingsError as error:
        log_event(_LOG, "task_user.refused", logging.ERROR, error=str(error))
        return
    if user is None:
        who = "root" if os.geteuid() == 0 else f"the agent's own user (uid {os.geteuid()})"
        log_event(_LOG, "task_user.selected", user=who, allow_root=settings.allow_root_tasks)
        return
    log_event(
        _LOG,
        "task_user.selected",
        user=user.name,
        uid=user.uid,
        allow_root=settings.allow_root_tasks,
    )
    blocked = unreachable(Sandboxes(settings.work_dir).root, user)
    if blocked is not None:
        log_event(
            _LOG,
            "task_user.unreachable",
            logging.WARNING,
            user=user.name,
            directory=str(blocked[0]),
            mode=f"{blocked[1]:o}",
            hint="command tasks are refused until every task user may search the work dir",
        )


def task_executors(
    settings: AgentSettings, isolation: Isolation
) -> Callable[[Report], TaskExecutors]:
    """The agent's task executors: placeholders, and command tasks under ``isolation``, run as
    ``--task-user`` unless they name a user."""
    config = CommandConfig(
        settings.work_dir,
        isolation,
        settings.kill_grace_period,
        task_user=settings.task_user,
        allow_root_tasks=settings.allow_root_tasks,
    )

    def build(report: Report) -> TaskExecutors:
        return TaskExecutors(report, CommandExecutor(report, config))

    return build


async def collect_sandboxes(settings: AgentSettings, runtime: AgentRuntime) -> None:
    """Remove finished tasks' sandboxes past ``--sandbox-gc-delay`` or over the disk budget,
    every minute (sooner for a shorter delay); never one the agent still tracks or runs."""
    sandboxes = Sandboxes(settings.work_dir)
    budget = settings.sandbox_disk_budget << 20
    interval = min(60.0, settings.sandbox_gc_delay)
    while True:
        keep = [task.key for task in runtime.state.tasks()] + runtime.executor.running()
        delay = settings.sandbox_gc_delay
        spare = min(5.0, delay)  # a run directory this young may be a launch under way
        try:
            removed = await asyncio.to_thread(sandboxes.collect, keep, delay, budget, spare)
        except OSError as error:
            log_event(_LOG, "sandboxes.collect.failed", logging.WARNING, error=str(error))
        else:
            if removed:
                log_event(_LOG, "sandboxes.collected", removed=len(removed))
        await asyncio.sleep(interval)
