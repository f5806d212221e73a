"""The live offer cycle end to end: real master and agent processes, real frameworks
(``fairshare run`` and the examples, built on the SDK) and ``fairshare status --json``.

Offers are never preempted, so who holds what depends on arrival order; each test fixes the
order the papers' examples assume (every framework has declared its demand before the resources
it competes for are offered) by waiting on ``fairshare status``, never on time.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from daemons import Client, Daemon, fairshare_status, wait_for

SETTLE = 30.0  # bound on every wait for the cluster to reach a state


def run_framework(
    clients: Callable[..., Client], master: Daemon, name: str, task: str, count: int
) -> Client:
    """``fairshare run`` keeping up to ``count`` long tasks of ``task`` running."""
    argv = ["-m", "fairshare.cli", "run", "--master", master.address, "--name", name]
    return clients(*argv, "--task", task, "--count", str(count))


def status(master: Daemon) -> dict[str, Any]:
    """``fairshare status --json`` of the master."""
    return fairshare_status(master.address)


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {fw["name"]: fw for fw in document["frameworks"]}


def running(document: dict[str, Any]) -> dict[str, int]:
    return {name: fw["tasks"].get("RUNNING", 0) for name, fw in by_name(document).items()}


def declared(master: Daemon, *names: str) -> bool:
    """True once every named framework is subscribed with its demand declared."""
    frameworks = by_name(status(master))
    return all(name in frameworks and frameworks[name]["demand"] for name in names)


def settled(master: Daemon, expected: dict[str, int]) -> dict[str, Any] | None:
    """The status once the running counts are ``expected`` and no offer is outstanding."""
    document = status(master)
    if running(document) == expected and not document["offers"]:
        return document
    return None


def test_drf_table1_live(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    """DRF §4.1: 9 CPUs, 18 GB; A <1 CPU, 4 GB>, B <3 CPUs, 1 GB>, each wanting 20 long tasks
    -> A runs 3, B runs 2, both at dominant share 2/3 (A's memory, B's CPUs)."""
    framework_a = run_framework(clients, master, "A", "cpus:1;mem:4096", 20)
    framework_b = run_framework(clients, master, "B", "cpus:3;mem:1024", 20)
    wait_for(lambda: declared(master, "A", "B"), SETTLE, "A and B to declare their demand")
    agent_factory(master, 1, "cpus:9;mem:18432")
    document = wait_for(lambda: settled(master, {"A": 3, "B": 2}), SETTLE, "A 3 and B 2 running")
    shares = {name: fw["dominant_share"] for name, fw in by_name(document).items()}
    assert shares["A"] == pytest.approx(2 / 3, abs=1e-9)
    assert shares["B"] == pytest.approx(2 / 3, abs=1e-9)
    assert by_name(document)["A"]["dominant_resource"] == "mem"
    assert by_name(document)["B"]["dominant_resource"] == "cpus"
    # Settled: further allocation runs (every 200 ms) change nothing while the tasks run.
    for _ in range(5):
        assert running(status(master)) == {"A": 3, "B": 2}
    assert framework_a.proc.poll() is None, framework_a.log()
    assert framework_b.proc.poll() is None, framework_b.log()


def test_weighted_drf_live(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    """Weighted DRF (§4.3): weight 2 for A doubles its dominant share relative to B's."""
    argv = ["-m", "fairshare.cli", "run", "--master", master.address, "--task", "cpus:1;mem:1024"]
    clients(*argv, "--name", "heavy", "--count", "20", "--weight", "2")
    clients(*argv, "--name", "light", "--count", "20")
    wait_for(lambda: declared(master, "heavy", "light"), SETTLE, "both to declare demand")
    agent_factory(master, 1, "cpus:12;mem:12288")
    document = wait_for(
        lambda: settled(master, {"heavy": 8, "light": 4}), SETTLE, "heavy 8 and light 4"
    )
    frameworks = by_name(document)
    assert Fraction(frameworks["heavy"]["dominant_share"]).limit_denominator(100) == Fraction(2, 3)
    assert Fraction(frameworks["light"]["dominant_share"]).limit_denominator(100) == Fraction(1, 3)


def test_batch_example_runs_to_completion_on_a_real_cluster(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    agent_factory(master, 2, "cpus:2;mem:2048")
    job = clients(
        "examples/batch_job.py", "--master", master.address, "--tasks", "8",
        "--task", "cpus:0.5;mem:256", "--duration", "0.2", "--timeout", "60",
    )  # fmt: skip
    assert job.proc.wait(90) == 0, job.log()
    # The job tore itself down: nothing of it remains.
    wait_for(lambda: not status(master)["frameworks"], SETTLE, "the batch job to be gone")


def test_service_example_keeps_its_instances_up_and_stops_cleanly(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    agent_factory(master, 1, "cpus:4;mem:4096")
    service = clients(
        "examples/long_running_service.py", "--master", master.address, "--name", "web",
        "--instances", "3", "--task", "cpus:0.5;mem:256", "--run-for", "3",
    )  # fmt: skip
    wait_for(lambda: running(status(master)).get("web") == 3, SETTLE, "3 web instances running")
    assert service.proc.wait(60) == 0, service.log()
