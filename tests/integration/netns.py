"""A private network of Linux network namespaces for the multi-host tests (docs/architecture.md §5).

``Sandbox(prefix)`` creates a namespace ``<prefix>-sw`` holding a bridge, and ``host(name)``
adds a namespace ``<prefix>-<name>`` joined to that bridge by a veth pair, with loopback up and
one address ``10.213.0.N/24``: every address lives inside the sandbox, the test's own (root)
namespace gets no interface, route or rule. ``wrap(name)`` is the command prefix that runs a
process inside a host (``ip netns exec``: the process keeps its PID, so signals reach it).

Faults: ``isolate(name)`` cuts a host's veth in the switch (it reaches nobody, nobody reaches
it) and ``rejoin(name)`` restores it; ``block(name, peers)`` drops, inside the host, every packet
to and from the peers' addresses (iptables), ``unblock(name)`` flushes those rules.

``close()`` deletes every namespace it created (a namespace's veth ends go with it), whatever
state the test left; ``available()`` says why the sandbox cannot be built here (not root, no
``ip``), for a clear skip. Every command it runs is bounded by ``COMMAND_TIMEOUT``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field

COMMAND_TIMEOUT = 15.0
SUBNET = "10.213.0"


def available() -> str | None:
    """None when namespaces can be built here, else why not."""
    if os.geteuid() != 0:
        return "the multi-host tests build network namespaces: they must run as root"
    for tool in ("ip", "iptables", "etcdctl"):
        if shutil.which(tool) is None:
            return f"the multi-host tests need {tool!r} (iproute2, iptables, etcd-client)"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass
class Sandbox:
    """A bridge in a namespace of its own, and hosts on it."""

    prefix: str = field(default_factory=lambda: f"fs{uuid.uuid4().hex[:6]}")
    hosts: dict[str, str] = field(default_factory=dict)  # name -> address
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.switch = f"{self.prefix}-sw"
        self._add_namespace(self.switch)
        self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "ip", "link", "set", "br0", "up")

    def _add_namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self.namespaces.append(name)
        self._in(name, "ip", "link", "set", "lo", "up")

    def _in(self, namespace: str, *argv: str) -> str:
        return _run("ip", "netns", "exec", namespace, *argv)

    def namespace(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def host(self, name: str) -> str:
        """Add host ``name``; its address."""
        index = len(self.hosts) + 1
        namespace = self.namespace(name)
        self._add_namespace(namespace)
        inner, outer = f"v{index}", f"p{index}"
        # Both ends are made in the switch's namespace, then one moves to the host's.
        self._in(self.switch, "ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        self._in(self.switch, "ip", "link", "set", inner, "netns", namespace)
        self._in(self.switch, "ip", "link", "set", outer, "master", "br0")
        self._in(self.switch, "ip", "link", "set", outer, "up")
        address = f"{SUBNET}.{index}"
        self._in(namespace, "ip", "addr", "add", f"{address}/24", "dev", inner)
        self._in(namespace, "ip", "link", "set", inner, "up")
        self.hosts[name] = address
        return address

    def wrap(self, name: str) -> list[str]:
        """The command prefix that runs a process in host ``name``."""
        return ["ip", "netns", "exec", self.namespace(name)]

    def _port(self, name: str) -> str:
        return f"p{list(self.hosts).index(name) + 1}"

    def isolate(self, name: str) -> None:
        """Cut host ``name`` off from every other host."""
        self._in(self.switch, "ip", "link", "set", self._port(name), "down")

    def rejoin(self, name: str) -> None:
        """Undo ``isolate``."""
        self._in(self.switch, "ip", "link", "set", self._port(name), "up")

    def block(self, name: str, peers: list[str]) -> None:
        """Inside host ``name``, drop every packet to and from the ``peers`` hosts."""
        for peer in peers:
            address = self.hosts[peer]
            self._in(self.namespace(name), "iptables", "-A", "INPUT", "-s", address, "-j", "DROP")
            self._in(self.namespace(name), "iptables", "-A", "OUTPUT", "-d", address, "-j", "DROP")

    def unblock(self, name: str) -> None:
        """Undo every ``block`` of host ``name``."""
        self._in(self.namespace(name), "iptables", "-F")

    def close(self) -> None:
        """Delete every namespace created (idempotent; errors of one do not stop the rest)."""
        while self.namespaces:
            name = self.namespaces.pop()
            subprocess.run(
                ["ip", "netns", "del", name], capture_output=True, timeout=COMMAND_TIMEOUT
            )
