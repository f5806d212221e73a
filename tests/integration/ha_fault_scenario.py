"""The HA fault tally (issue 12): a steady workload on three HA masters over a real etcd while
the leader is killed, paused and cut off from etcd in turn; then every task the frameworks
launched is accounted for and every registry write the cluster acknowledged is still there.

Run alone: ``.venv/bin/python tests/integration/ha_fault_scenario.py [ROUNDS]`` prints the tally
(logs go to a temporary directory, printed too); ``test_ha_fault_tally.py`` runs one round and
asserts the zeros.

The cluster: one etcd member on loopback, three masters (2 s election lease), each reaching etcd
through a ``TcpProxy`` of its own (so the test can cut one master off from etcd while agents and
frameworks still reach it), three agents, framework A keeping 4 long tasks and framework B
keeping 3 tasks of 2 s (replaced as they end, so launches go on across failovers), and an
operator setting a weight on a new role every 0.2 s (each acknowledged SetWeight is a registry
write the cluster promised to keep).

Each round injects, with a wait until the workload is whole again after each: kill -9 of the
leader (restarted as a follower), SIGSTOP of the leader (SIGCONT once another leads), the
leader's etcd connection held (a partition; healed once another leads). ``HaScenario(...,
io_workers=2)`` runs the masters with I/O worker processes (``--io-workers``).

A watcher polls every master's ``/health`` every 50 ms: leader changes, and the time without a
leader (a paused or cut-off master that still thinks it leads is not counted as leading once it
stopped answering as leader).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from daemons import Daemon, start_agent, start_master, wait_for
from fairshare.v1 import operator_pb2, operator_pb2_grpc
from faults import FrameworkProcess, Tally, pause, resume, running_tasks, tally
from ha import HA_FLAGS, acted_until, log_time, role
from tcp_proxy import TcpProxy
from wire_fakes import get_state

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/etcd_server.py, run alone
from etcd_server import EtcdMember, start_cluster

SETTLE = 60.0
WATCH_PERIOD = 0.05
WEIGHT_PERIOD = 0.2
AGENT_RESOURCES = "cpus:4;mem:2048"


@dataclass
class LeaderWatch:
    """Who led, sampled every ``WATCH_PERIOD``."""

    changes: int = 0
    gaps: list[float] = field(default_factory=list)  # seconds without a leader, each gap
    _last: str | None = None
    _gap_since: float | None = None

    @property
    def last(self) -> str | None:
        """The leader seen last (None before any)."""
        return self._last

    def saw(self, leader: str | None, now: float) -> None:
        if leader is None:
            if self._gap_since is None:
                self._gap_since = now
            return
        if self._gap_since is not None:
            self.gaps.append(now - self._gap_since)
            self._gap_since = None
        if self._last is not None and leader != self._last:
            self.changes += 1
        self._last = leader


@dataclass
class HaTally:
    """The fault tally plus the HA figures."""

    tasks: Tally
    watch: LeaderWatch
    weights_acknowledged: int
    weights_lost: list[str]
    fenced_checks: int  # paused or cut-off leaders whose end was compared with the next election
    overlaps: list[str]  # those that may have acted after another master was elected

    def lines(self) -> list[str]:
        gaps = self.watch.gaps or [0.0]
        return [
            *self.tasks.lines(),
            f"leader changes:               {self.watch.changes}",
            f"time without a leader:        max {max(gaps):.2f} s, p50"
            f" {statistics.median(gaps):.2f} s ({len(self.watch.gaps)} gaps)",
            f"leaders acting after another was elected: {len(self.overlaps)}"
            f" (of {self.fenced_checks} paused or cut off)"
            + (f" {self.overlaps}" if self.overlaps else ""),
            f"registry writes acknowledged: {self.weights_acknowledged}",
            f"acknowledged writes lost:     {len(self.weights_lost)}"
            + (f" {self.weights_lost[:10]}" if self.weights_lost else ""),
        ]


class HaScenario:
    """The cluster, the watcher and the operator's writes."""

    def __init__(self, directory: Path, io_workers: int = 0) -> None:
        self.directory = directory
        self.io_workers = io_workers  # the masters' --io-workers
        self.faults: Counter[str] = Counter()
        self.etcd: list[EtcdMember] = start_cluster(directory / "etcd", ["127.0.0.1"])
        self.proxies: list[TcpProxy] = []
        self.masters: list[Daemon] = []
        self.watch = LeaderWatch()
        self.acknowledged: list[str] = []
        self.fenced_checks = 0
        self.overlaps: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.frameworks: list[FrameworkProcess] = []
        self.agents: list[Daemon] = []
        try:
            for index in range(3):
                self.proxies.append(TcpProxy(self.etcd[0].endpoint))
                self.masters.append(self._start_master(index))
            addresses = ",".join(m.address for m in self.masters)
            self.frameworks = [
                FrameworkProcess(addresses, "A", "cpus:1;mem:256", 4, directory),
                FrameworkProcess(addresses, "B", "cpus:1;mem:128", 3, directory, 2.0),
            ]
            self.agents = [
                start_agent(addresses, directory / f"agent{i}", resources=AGENT_RESOURCES)
                for i in range(3)
            ]
        except BaseException:
            self.stop()
            raise

    def _start_master(self, index: int, *extra: str) -> Daemon:
        url = f"etcd://{self.proxies[index].address}/ha-tally"
        work_dir = self.directory / f"master{index}"
        for stale in ("master.addr", "metrics.addr"):
            (work_dir / stale).unlink(missing_ok=True)
        workers = ("--io-workers", str(self.io_workers))
        return start_master(work_dir, "--registry", url, *HA_FLAGS, *workers, *extra)

    # -- observation --------------------------------------------------------------------------

    def leader(self) -> Daemon | None:
        leading = [m for m in self.masters if role(m) == "leader"]
        return leading[0] if len(leading) == 1 else None

    def _watch(self) -> None:
        while not self._stop.is_set():
            leader = self.leader()
            self.watch.saw(leader.address if leader else None, time.monotonic())
            self._stop.wait(WATCH_PERIOD)

    def _write_weights(self) -> None:
        n = 0
        while not self._stop.is_set():
            leader = self.leader()
            if leader is not None:
                role_name = f"tally-{n}"
                request = operator_pb2.SetWeightRequest(role=role_name, weight=1.0 + n % 7)
                try:
                    with grpc.insecure_channel(leader.address) as channel:
                        stub = operator_pb2_grpc.OperatorServiceStub(channel)
                        stub.SetWeight(request, timeout=2.0)
                    self.acknowledged.append(role_name)
                except grpc.RpcError:
                    pass  # not acknowledged: it may or may not have been kept
                n += 1
            self._stop.wait(WEIGHT_PERIOD)

    def whole(self) -> operator_pb2.GetStateResponse | None:
        leader = self.leader()
        if leader is None:
            return None
        try:
            with grpc.insecure_channel(leader.address) as channel:
                state = get_state(channel)
        except grpc.RpcError:
            return None
        if sum(1 for a in state.agents if a.state == a.STATE_ACTIVE) < len(self.agents):
            return None
        disconnected = operator_pb2.GetStateResponse.Framework.STATE_DISCONNECTED
        if len(state.frameworks) < 2 or any(f.state == disconnected for f in state.frameworks):
            return None
        running = running_tasks(state)
        if all(
            sum(1 for t in running if t.startswith(f"{f.name}-")) == f.tasks
            for f in self.frameworks
        ):
            return state
        return None

    def settle(self, what: str) -> operator_pb2.GetStateResponse:
        found: operator_pb2.GetStateResponse = wait_for(self.whole, SETTLE, what)
        return found

    def new_leader(self, old: Daemon) -> Daemon:
        """The next leader, once the watcher has seen it too (so that no change goes
        uncounted when a loaded machine slows the watcher's rounds)."""
        found: Daemon = wait_for(
            lambda: (leader := self.leader()) is not old and leader, SETTLE, "a new leader"
        )
        wait_for(lambda: self.watch.last == found.address, SETTLE, "the watcher seeing it")
        return found

    # -- faults -------------------------------------------------------------------------------

    def kill_leader(self) -> None:
        old = wait_for(self.leader, SETTLE, "a leader")
        index = self.masters.index(old)
        old.kill()
        self.faults["leader kill -9"] += 1
        self.new_leader(old)
        port = old.address.rsplit(":", 1)[1]
        kept = old.log_path.with_name(f"{old.log_path.name}.{self.faults.total()}")
        old.log_path.rename(kept)
        self.masters[index] = self._start_master(index, "--port", port)
        self.settle("the workload whole after a leader kill -9")

    def check_fenced(self, old: Daemon, new: Daemon, terms_ended: int) -> None:
        """The old leader stopped acting before the new one was elected (one clock)."""
        ended = wait_for(lambda: acted_until(old)[terms_ended:], SETTLE, "the old leader deposed")
        elected = log_time(new, "leader.elected")
        self.fenced_checks += 1
        if ended[0] >= elected:
            self.overlaps.append(f"{old.address} acted until {ended[0]}, {new.address} {elected}")

    def pause_leader(self) -> None:
        old = wait_for(self.leader, SETTLE, "a leader")
        terms_ended = len(acted_until(old))
        pause(old)
        self.faults["leader SIGSTOP"] += 1
        try:
            new = self.new_leader(old)
        finally:
            resume(old)
        self.check_fenced(old, new, terms_ended)
        self.settle("the workload whole after a leader hang")

    def partition_leader(self) -> None:
        old = wait_for(self.leader, SETTLE, "a leader")
        proxy = self.proxies[self.masters.index(old)]
        terms_ended = len(acted_until(old))
        proxy.hold(upstream=True, downstream=True)
        self.faults["leader cut off from etcd"] += 1
        try:
            new = self.new_leader(old)
        finally:
            proxy.cut()  # heal: what was held is lost, connections reset
        self.check_fenced(old, new, terms_ended)
        self.settle("the workload whole after a leader partition")

    def run(self, rounds: int = 1) -> HaTally:
        self.settle("the workload running")
        for target in (self._watch, self._write_weights):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        for _ in range(rounds):
            self.kill_leader()
            self.pause_leader()
            self.partition_leader()
        state = self.settle("the workload whole at the end")
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        leader = wait_for(self.leader, SETTLE, "a leader")
        with grpc.insecure_channel(leader.address) as channel:
            stub = operator_pb2_grpc.OperatorServiceStub(channel)
            weights = stub.GetWeights(operator_pb2.GetWeightsRequest(), timeout=5.0)
        kept = {w.role for w in weights.weights if w.role}
        lost = [name for name in self.acknowledged if name not in kept]
        return HaTally(
            tally(self.frameworks, state, self.faults),
            self.watch,
            len(self.acknowledged),
            lost,
            self.fenced_checks,
            self.overlaps,
        )

    def stop(self) -> None:
        self._stop.set()
        for framework in self.frameworks:
            framework.kill()
        for daemon in [*self.agents, *self.masters]:
            daemon.signal(18)  # SIGCONT: a paused master must be able to die
            daemon.kill()
        for proxy in self.proxies:
            proxy.close()
        for member in self.etcd:
            member.kill()


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    directory = Path(tempfile.mkdtemp(prefix="fairshare-ha-faults-"))
    scenario = HaScenario(directory)
    try:
        result = scenario.run(rounds)
    finally:
        scenario.stop()
    print("\n".join(result.lines()))
    print(f"logs: {directory}")
    tasks = result.tasks
    failed = tasks.lost_unreported or tasks.duplicate_launches or result.weights_lost
    failed = failed or result.overlaps
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
