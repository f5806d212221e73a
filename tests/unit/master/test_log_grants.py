"""Who may read a task's logs and the credentials that say so (``master.runtime.log_grants``),
and who a command task may run as at Accept (``run_tasks``), on a runtime without gRPC."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from fairshare.command import Command
from fairshare.log_access import ANY, agent_key, verify
from fairshare.resources import ResourceVector

from master.acl import parse
from master.core import TaskLaunch
from master.core.errors import FailedPrecondition, NotFound, PermissionDenied
from master.model import AgentSpec, FrameworkInfo, TaskDetails
from master.runtime import MasterRuntime, RuntimeConfig

R = ResourceVector.parse
ACL = parse(
    {
        "register_frameworks": [{"principals": "ANY", "roles": "ANY"}],
        "register_agents": [{"principals": ["agent-1"]}],
        "run_tasks": [{"principals": ["alice"], "users": ["alice"]}],
        "view_logs": [{"principals": ["auditor"], "framework_principals": ["alice"]}],
        "view_state": [
            {"principals": ["ops"]},
            {"principals": ["alice", "bob", "auditor"], "level": "redacted"},
        ],
    },
    "acls.toml",
)


def scenario(test: Callable[[MasterRuntime], Awaitable[None]]) -> None:
    async def main() -> None:
        config = RuntimeConfig(
            allocation_interval=60.0, heartbeat_interval=60.0, acl=ACL, authenticated=True
        )
        runtime = MasterRuntime(config)
        await runtime.start()
        try:
            await test(runtime)
        finally:
            await runtime.stop()

    asyncio.run(main())


def test_grants_go_to_the_owner_view_logs_and_the_full_view_only() -> None:
    async def test(runtime: MasterRuntime) -> None:
        session = runtime.agents.register(AgentSpec("h", 7001, R("cpus:4;mem:4096")), "agent-1")
        agent_id = session.agent_id
        key = agent_key(runtime.state.log_secret, agent_id)
        assert session.log_key == key  # what the agent gets at registration
        frameworks = {}
        for who in ("alice", "bob"):
            spec = FrameworkInfo(name=f"{who}-fw", principal=who)
            frameworks[who] = runtime.frameworks.subscribe(spec, None, False, who).framework_id
        launch = TaskLaunch("t", "t", R("cpus:1"), agent_id)
        runtime.state.tasks.launch(frameworks["alice"], agent_id, launch)
        grants = runtime.operator.log_grants

        for reader in ("alice", "auditor", "ops"):
            granted = grants.grant("t", "", reader)
            assert [a.agent_id for a in granted.agents] == [agent_id]
            assert (granted.agents[0].hostname, granted.agents[0].port) == ("h", 7001)
            grant = verify(key, granted.grant, granted.agents[0].signature, time.time())
            assert (grant.principal, grant.task_id) == (reader, "t")
            assert grant.frameworks == (frameworks["alice"],)
        # Another tenant: its grant covers its own frameworks only (the master does not say
        # the task is someone else's); naming alice's framework is refused.
        bobs = grants.grant("t", "", "bob")
        assert verify(key, bobs.grant, bobs.agents[0].signature, time.time()).frameworks == (
            frameworks["bob"],
        )
        denied = runtime.state.authority.denied
        with pytest.raises(PermissionDenied):
            grants.grant("t", frameworks["alice"], "bob")
        with pytest.raises(PermissionDenied):
            grants.grant("t", "", "carol")  # no framework of its own, no view_logs
        assert runtime.state.authority.denied == denied + 2
        with pytest.raises(NotFound):
            grants.grant("t", "fw-unknown", "ops")
        # A task the master does not track: every connected agent, and every framework for
        # an operator.
        untracked = grants.grant("gone", "", "ops")
        signature = untracked.agents[0].signature
        assert verify(key, untracked.grant, signature, time.time()).frameworks == ANY
        assert grants.grant("gone", "", "auditor").agents  # alice's frameworks

    scenario(test)


def test_too_many_readable_frameworks_for_an_untracked_task_ask_for_the_framework() -> None:
    async def test(runtime: MasterRuntime) -> None:
        for index in range(65):
            spec = FrameworkInfo(name=f"fw-{index}", principal="alice")
            runtime.frameworks.subscribe(spec, None, False, "alice")
        with pytest.raises(FailedPrecondition, match="name the task's framework"):
            runtime.operator.log_grants.grant("gone", "", "alice")

    scenario(test)


def test_run_tasks_is_checked_at_accept_before_anything_changes() -> None:
    async def test(runtime: MasterRuntime) -> None:
        spec = FrameworkInfo(name="alice-fw", principal="alice")
        framework_id = runtime.frameworks.subscribe(spec, None, False, "alice").framework_id

        def launch(user: str) -> TaskLaunch:
            details = TaskDetails(command=Command(shell="id -u", user=user))
            return TaskLaunch(f"as-{user}", "x", R("cpus:1"), None, details)

        for user in ("root", "bob"):
            with pytest.raises(PermissionDenied, match=f"'as-{user}' may not run as user '{user}'"):
                runtime.frameworks.accept(framework_id, ["of-x"], [launch(user)], None, "alice")
        with pytest.raises(NotFound):  # allowed: on to the offer's checks (none is outstanding)
            runtime.frameworks.accept(framework_id, ["of-x"], [launch("alice")], None, "alice")
        assert not list(runtime.state.tasks)

    scenario(test)
