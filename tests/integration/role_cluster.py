"""A master, ``fairshare run`` frameworks in roles and, once they declared, an agent: the
setting the live tenant, quota and reclaim tests share (``test_tenants``, ``test_quota``,
``test_quota_reclaim``). Every wait polls ``GetState`` with a deadline; ``samples`` reads it
every 0.2 s for a time-average."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import grpc
from daemons import Client, Daemon, wait_for
from fairshare.v1 import common_pb2
from wire_fakes import get_state

RUNNING = common_pb2.TASK_STATE_RUNNING
SETTLE = 30.0


class RoleCluster:
    """One master; frameworks are started with ``run``, the agent with ``start_agent``."""

    def __init__(
        self,
        master: Daemon,
        clients: Callable[..., Client],
        agent_factory: Callable[..., list[Daemon]],
    ) -> None:
        self.master = master
        self.clients = clients
        self.agent_factory = agent_factory
        self.channel = grpc.insecure_channel(master.address)
        self.names: list[str] = []

    def run(self, name: str, role: str, task: str, count: int, *flags: str) -> None:
        """``fairshare run`` of ``count`` tasks of ``task`` in ``role``, without waiting."""
        self.clients(
            "-m", "fairshare.cli", "run", "--master", self.master.address, "--name", name,
            "--role", role, "--task", task, "--count", str(count), *flags,
        )  # fmt: skip
        self.names.append(name)

    def declared(self) -> bool:
        """Has every framework ``run`` started subscribed with its demand?"""
        state = get_state(self.channel)
        ready = {fw.framework_info.name for fw in state.frameworks if fw.HasField("demand")}
        return set(self.names) <= ready

    def start_agent(self, resources: str) -> None:
        """Start the agent once every framework declared (offers are not preempted: the first
        allocation then sees them all)."""
        wait_for(self.declared, SETTLE, "every framework to declare its demand")
        self.agent_factory(self.master, 1, resources)

    def running(self, by: str = "role") -> Counter[str]:
        """RUNNING tasks per role (or per framework ``name``), from one GetState."""
        state = get_state(self.channel)
        key = {
            fw.framework_info.framework_id: (
                fw.framework_info.role if by == "role" else fw.framework_info.name
            )
            for fw in state.frameworks
        }
        return Counter(key[t.framework_id] for t in state.tasks if t.status.state == RUNNING)

    def samples(self, seconds: float, by: str = "role") -> list[Counter[str]]:
        """``running`` every 0.2 s for ``seconds``."""
        taken: list[Counter[str]] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            taken.append(self.running(by))
            time.sleep(0.2)
        return taken

    def close(self) -> None:
        self.channel.close()
