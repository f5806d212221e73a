"""Quota reclaim by preemption (issue 21), live: a real master with ``--rebalance``, one agent
``cpus:12;mem:12288`` and ``fairshare run`` frameworks in roles whose tasks never end.

- Roles ``a`` and ``b`` fill the agent with 6 one-cpu tasks each; then ``g`` is guaranteed
  ``cpus:8`` and its framework (12 tasks wanted) arrives. Offers are not preempted and nothing
  ends, so only the rebalancer can serve the guarantee: ``g`` reaches 8 running tasks within the
  bound the settings give (below), ``a`` and ``b`` are left with 2 each (the guarantee comes out
  of the roles above theirs, the rest of the pool is shared: H-DRF gives each of the three
  top-level roles 4 and ``g`` already holds 8), and then nothing more is killed.
- The law (``master.core.rebalance._keeps_guarantees``): ``a`` guaranteed ``cpus:6`` holds 6,
  ``b`` holds 6 unguaranteed, ``g`` arrives guaranteed ``cpus:4``: ``g`` reaches 4, every task
  killed is ``b``'s, and ``a`` holds its 6 at every sample.

Timing. The planner counts in checks (``RebalanceSettings.planner``): with interval 1 s,
hysteresis 2 s and grace 0 s it acts on the 2nd consecutive check that sees the gap (at most
interval + hysteresis after the arrival), kills at most ``max_kills`` (4) per round and then
cools for ``cooldown`` = ceil((grace + SETTLE) / interval) = 2 checks. A guarantee of N tasks
on a full cluster needs ceil(N / max_kills) rounds, each one after the first
(1 + cooldown) intervals later, and the last one's freed cpus are offered, accepted and RUNNING
within ``SETTLE`` (the runtime's own figure). ``reach_bound`` adds these to interval +
hysteresis + grace, plus ``SLACK`` for a loaded two-core runner (the checks run in a worker
thread that shares the GIL with the master's loop): 11 s for 8 tasks, 8 s for 4.

Measured (three runs): ``g`` had 7 running 4.3-5.2 s after its arrival (two rounds, 4 then 3
kills) and 3 running 1.2-1.8 s after (one round of 3 kills), then the rebalancer went idle: it stops
one task short of the guarantee. The planner tolerates one task (the gap is
``max(0, T - 1 - x) / T`` and a beneficiary must be two tasks below its target,
``_Standing.beneficiaries``), which is right for DRF's targets but leaves a guaranteed role below
its guarantee for good when nothing ends. The invariants that hold anyway (no kill after the
rebalancer goes idle, the victims' roles, ``a`` never below 6) are asserted first; the
guarantee's own assertions come last and fail until that is fixed.

The frameworks declare their demand before the agent joins (the first allocation sees them
all). Every wait polls ``GetState`` with a deadline; the samples are every 0.2 s.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from daemons import DEFAULT_MASTER_FLAGS, Client, Daemon, wait_for
from fairshare.cli import main
from fairshare.v1 import common_pb2
from role_cluster import RoleCluster
from wire_fakes import get_state

from master.runtime.rebalance_settings import SETTLE, RebalanceSettings

RUNNING = common_pb2.TASK_STATE_RUNNING
PREEMPTED = common_pb2.TaskStatus.REASON_PREEMPTED
TASK = "cpus:1;mem:256"
AGENT = "cpus:12;mem:12288"
START = 30.0  # bound on startup waits (processes, first allocation)
SLACK = 3.0  # scheduling noise on a loaded 2-core runner (see the module docstring)
QUIET = 5.0  # sampled after the reclaim: > cooldown + patience checks, the next chance to kill

SETTINGS = RebalanceSettings(interval=1.0, hysteresis=2.0, grace=0.0)
REBALANCE_FLAGS = (
    "--rebalance",
    "--rebalance-interval", f"{SETTINGS.interval:g}s",
    "--rebalance-hysteresis", f"{SETTINGS.hysteresis:g}s",
    "--rebalance-grace", f"{SETTINGS.grace:g}s",
)  # fmt: skip
PREEMPTED_EVENT = re.compile(r"rebalance\.preempted .*?\btasks=(\d+) frameworks=(\S+)")


def reach_bound(tasks: int) -> float:
    """Seconds from a guaranteed role's arrival until ``tasks`` more of its tasks run, when each
    one needs a kill (module docstring)."""
    plan = SETTINGS.planner()
    rounds = math.ceil(tasks / plan.max_kills)
    later_rounds = (rounds - 1) * (1 + plan.cooldown) * SETTINGS.interval
    base = SETTINGS.interval + SETTINGS.hysteresis + SETTINGS.grace
    return base + later_rounds + SETTLE + SLACK


class Reclaim(RoleCluster):
    """A rebalancing master, ``fairshare run`` frameworks in roles (one per role, named after
    it) and, once they declared, an agent."""

    def quota(self, role: str, guarantee: str) -> None:
        assert main(["quota", "--master", self.master.address, "--role", role,
                     "--guarantee", guarantee]) == 0  # fmt: skip

    def run(self, role: str, count: int) -> None:  # type: ignore[override]
        super().run(role, role, TASK, count)

    def roles_declared(self, *roles: str) -> bool:
        state = get_state(self.channel)
        ready = {fw.framework_info.role for fw in state.frameworks if fw.HasField("demand")}
        return set(roles) <= ready

    def fill(self, counts: dict[str, int]) -> None:
        """Start one framework per role, the agent once they declared, and wait until every
        task runs."""
        for role, count in counts.items():
            self.run(role, count)
        wait_for(lambda: self.roles_declared(*counts), START, "every framework to declare")
        self.agent_factory(self.master, 1, AGENT)
        expected = Counter(counts)
        wait_for(lambda: self.running() == expected, START, f"{counts} running")

    def arrive(self, role: str, count: int) -> float:
        """Start ``role``'s framework; returns the monotonic time its demand was seen."""
        self.run(role, count)
        wait_for(lambda: self.roles_declared(role), START, f"{role} to declare")
        return time.monotonic()

    def preempted(self) -> Counter[str]:
        """Tasks the rebalancer killed per role (``/api/v1/state``, the dashboard's document)."""
        url = f"http://{self.master.metrics_address}/api/v1/state"
        with urllib.request.urlopen(url, timeout=10) as response:
            frameworks = json.load(response)["frameworks"]
        out: Counter[str] = Counter()
        for fw in frameworks:
            out[fw["role"]] += fw["preempted"]
        return out

    def killed_by_log(self) -> Counter[str]:
        """Victims per role from the master's ``rebalance.preempted`` events."""
        state = get_state(self.channel)
        role = {fw.framework_info.framework_id: fw.framework_info.role for fw in state.frameworks}
        out: Counter[str] = Counter()
        for match in PREEMPTED_EVENT.finditer(self.master.log()):
            for part in match.group(2).split(","):
                framework_id, n = part.rsplit(":", 1)
                out[role.get(framework_id, framework_id)] += int(n)
        return out

    def watch(
        self, done: Callable[[Counter[str]], bool], since: float, timeout: float
    ) -> tuple[float | None, list[tuple[float, Counter[str]]]]:
        """Sample ``running`` every 0.2 s until ``done`` holds of a sample or ``timeout``
        seconds after ``since`` (monotonic) passed; returns the seconds from ``since`` to the
        first sample where it held (``None``: it never did) and every (seconds, sample)."""
        samples: list[tuple[float, Counter[str]]] = []
        while True:
            sample = self.running()
            at = time.monotonic() - since
            samples.append((at, sample))
            if done(sample):
                return at, samples
            if at > timeout:
                return None, samples
            time.sleep(0.2)

    def rebalance_log(self) -> list[str]:
        """The master's ``rebalance.*`` events (for failure messages)."""
        return [line for line in self.master.log().splitlines() if " rebalance." in line]

    def samples_with_preempted(self, seconds: float) -> list[tuple[Counter[str], Counter[str]]]:
        """(running, preempted) every 0.2 s for ``seconds``."""
        taken: list[tuple[Counter[str], Counter[str]]] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            taken.append((self.running(), self.preempted()))
            time.sleep(0.2)
        return taken


@pytest.fixture
def reclaim(
    master_factory: Callable[..., Daemon],
    clients: Callable[..., Client],
    agent_factory: Callable[..., list[Daemon]],
) -> Iterator[Reclaim]:
    made = Reclaim(master_factory(*DEFAULT_MASTER_FLAGS, *REBALANCE_FLAGS), clients, agent_factory)
    yield made
    made.close()


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}s"


def first_at(samples: list[tuple[float, Counter[str]]], role: str, tasks: int) -> float | None:
    """Seconds into ``samples`` when ``role`` first ran ``tasks`` or more."""
    return next((at for at, sample in samples if sample[role] >= tasks), None)


def test_a_guarantee_is_reclaimed_from_the_roles_above_theirs(reclaim: Reclaim) -> None:
    reclaim.fill({"a": 6, "b": 6})
    assert reclaim.preempted() == Counter()
    reclaim.quota("g", "cpus:8")
    arrived = reclaim.arrive("g", 12)
    bound = reach_bound(8)
    took, during = reclaim.watch(lambda s: s["g"] >= 8, arrived, bound)
    seven = seconds(first_at(during, "g", 7))
    print(f"g: 7 running at {seven}, 8 at {seconds(took)} (bound {bound:.1f}s)")
    wait_for(lambda: sum(reclaim.running().values()) == 12, SETTLE, "12 tasks running again")
    # No thrash: sampled past the cooldown and the patience, nothing more is killed or moves.
    killed = reclaim.preempted()
    quiet = reclaim.samples_with_preempted(QUIET)
    settled = quiet[0][0]
    assert all(running == settled for running, _ in quiet), quiet
    assert all(preempted == killed for _, preempted in quiet), (killed, quiet)
    assert reclaim.killed_by_log() == killed
    assert set(+killed) <= {"a", "b"}, killed
    # The guarantee: 8 within the bound, taken from a and b (H-DRF's 4 each, g holding 8).
    log = reclaim.rebalance_log()
    below = [r.path for r in get_state(reclaim.channel).roles if r.below_guarantee]
    print(f"settled {dict(settled)}, preempted {dict(+killed)}, below guarantee {below}")
    assert took is not None, (
        f"g never reached its guarantee of 8 within {bound:.1f}s: now"
        f" {dict(settled)}, killed {dict(killed)}, below {below}",
        log,
    )
    assert settled == Counter({"g": 8, "a": 2, "b": 2}), (settled, log)
    assert killed == Counter({"a": 4, "b": 4}), (killed, log)  # no kill beyond the 8 needed
    assert "g" not in below, below


def test_reclaim_never_takes_a_guaranteed_role_below_its_guarantee(reclaim: Reclaim) -> None:
    reclaim.quota("a", "cpus:6")
    reclaim.fill({"a": 6, "b": 6})
    reclaim.quota("g", "cpus:4")
    arrived = reclaim.arrive("g", 12)
    bound = reach_bound(4)
    took, during = reclaim.watch(lambda s: s["g"] >= 4, arrived, bound)
    three = seconds(first_at(during, "g", 3))
    print(f"g: 3 running at {three}, 4 at {seconds(took)} (bound {bound:.1f}s)")
    wait_for(lambda: sum(reclaim.running().values()) == 12, SETTLE, "12 tasks running again")
    killed = reclaim.preempted()
    quiet = reclaim.samples_with_preempted(QUIET)
    settled = quiet[0][0]
    # The law, at every sample: a keeps its 6; every victim is b's; then nothing more moves.
    every = [sample for _, sample in during] + [running for running, _ in quiet]
    assert min(s["a"] for s in every) == 6, every
    assert set(+killed) == {"b"}, killed
    assert reclaim.killed_by_log() == killed
    state = get_state(reclaim.channel)
    role = {fw.framework_info.framework_id: fw.framework_info.role for fw in state.frameworks}
    victims = Counter(role[t.framework_id] for t in state.tasks if t.status.reason == PREEMPTED)
    assert set(victims) <= {"b"}, victims
    assert all(running == settled for running, _ in quiet), quiet
    assert all(preempted == killed for _, preempted in quiet), (killed, quiet)
    # The guarantee: g reaches 4 within the bound, with exactly 4 of b's tasks killed.
    log = reclaim.rebalance_log()
    below = [r.path for r in state.roles if r.below_guarantee]
    print(f"settled {dict(settled)}, preempted {dict(+killed)}, below guarantee {below}")
    assert took is not None, (
        f"g never reached its guarantee of 4 within {bound:.1f}s: now"
        f" {dict(settled)}, killed {dict(killed)}, below {below}",
        log,
    )
    assert settled == Counter({"a": 6, "g": 4, "b": 2}), (settled, log)
    assert killed == Counter({"b": 4}), (killed, log)
    assert not below, below
