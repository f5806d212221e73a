#!/usr/bin/env python3
"""The cost of security (issue 13): offers/s and launches/s with TLS + authentication on vs off.

Run (from the repository root; about 3 minutes; ``--quick`` about 1 minute):

    .venv/bin/python tests/bench/bench_security.py

The machinery of ``bench_live.py`` (a real master process, agent and framework load processes
speaking the wire API, counters read over pipes) is run in rounds that alternate between two
masters: **off** (plaintext, no authentication, as on main) and **on** (TLS with a throwaway CA,
``--credentials`` bearer tokens checked against salted hashes, an ACL file that lets the bench
principal register agents and frameworks: every call authenticated and authorized). In each
round: ``--agents`` agents connect, then phase 1 of ``bench_live`` (offers delivered per second,
frameworks declining at once) and phase 3 (task launches per second to RUNNING + acknowledged).
Rounds alternate off/on ``--rounds`` times so that drift of the machine (other processes on the
same cores) hits both alike; each figure is the median over all windows of its mode, and the
relative cost is (off - on) / off (goal: under 15 %).

Nothing here asserts on time; the figures are printed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_live import Bench, Groups, add_agents, framework_processes, windows
from bench_procs import Master
from bench_report import Results
from fairshare.credentials import entry_toml, hash_secret, new_secret
from fairshare.local_ca import LocalCa
from load_common import BENCH_TLS_CA, BENCH_TOKEN

GOAL_COST = 0.15
ACL = """
permissive = false

[[register_agents]]
principals = ["bench"]

[[register_frameworks]]
principals = ["bench"]
roles = "ANY"

[[view_state]]
principals = ["bench"]
"""
GENEROUS = ("--registration-rate", "100000", "--registration-burst", "100000")
"""The bench registers its fleet at full speed: limits above what it does."""


def secure_flags(directory: Path) -> tuple[tuple[str, ...], str, str]:
    """The master's flags for TLS + tokens + ACL, the CA bundle and the bench's token."""
    ca = LocalCa.create(directory / "pki")
    issued = ca.issue("master", "daemon")
    token = f"bench:{new_secret()}"
    credentials = directory / "credentials.toml"
    credentials.write_text(entry_toml("bench", hash_secret(token.partition(":")[2])))
    acls = directory / "acls.toml"
    acls.write_text(ACL)
    flags = ("--tls-cert", str(issued.cert), "--tls-key", str(issued.key))
    flags += ("--credentials", str(credentials), "--acls", str(acls))
    return flags, str(ca.cert), token


def one_round(
    args: argparse.Namespace, mode: str, root: Path, index: int
) -> dict[str, list[float]]:
    """One master in ``mode`` (``off``/``on``): agents, offers/s windows, launches/s windows."""
    directory = root / f"{mode}-{index}"
    directory.mkdir()
    extra: tuple[str, ...] = GENEROUS
    os.environ.pop(BENCH_TLS_CA, None)
    os.environ.pop(BENCH_TOKEN, None)
    if mode == "on":
        flags, ca, token = secure_flags(directory)
        extra += flags
        os.environ[BENCH_TLS_CA], os.environ[BENCH_TOKEN] = ca, token
    figures: dict[str, list[float]] = {"offers": [], "launches": [], "offers_cpu": []}
    with Master(directory / "master", args.allocation_interval, "WARNING", extra=extra) as master:
        bench = Bench(args, master, directory, Results())
        try:
            add_agents(bench, args.agents, args.agent_procs)
            time.sleep(args.settle)
            with framework_processes(bench, "decline") as workers:
                groups: Groups = {"offers": (workers, "offers")}
                for window in windows(bench, groups, f"{mode} offers"):
                    figures["offers"].append(window.rates["offers"])
                    figures["offers_cpu"].append(window.master_cpu)
            lifecycle = ["--tasks-per-offer", "8", "--live-tasks", str(args.live_tasks)]
            lifecycle += ["--task-seconds", "0.05", "--task", "cpus:1;mem:2048"]
            with framework_processes(bench, "lifecycle", *lifecycle) as workers:
                groups = {"launches": (bench.agents, "running_acked")}
                for window in windows(bench, groups, f"{mode} launches"):
                    figures["launches"].append(window.rates["launches"])
        finally:
            master.stop()
            for worker in bench.agents:
                worker.stop()
    return figures


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="small numbers, about a minute")
    add("--rounds", type=int, default=2, help="off/on pairs (alternating)")
    add("--agents", type=int, default=500)
    add("--agent-procs", type=int, default=1)
    add("--agents-per-channel", type=int, default=250)
    add("--agent-resources", default="cpus:8;mem:16384")
    add("--frameworks", type=int, default=10)
    add("--framework-procs", type=int, default=1)
    add("--live-tasks", type=int, default=5)
    add("--window", type=float, default=3.0)
    add("--repeats", type=int, default=3)
    add("--warmup", type=float, default=2.0)
    add("--settle", type=float, default=1.0)
    add("--allocation-interval", default="1s")
    add("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.agents, args.frameworks = 1, 100, 4
        args.window, args.repeats, args.warmup, args.settle = 1.0, 2, 0.5, 0.5
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "tests/bench/bench_security.py", *argv])
    root = Path(tempfile.mkdtemp(prefix="fairshare-bench-security-"))
    print(f"logs: {root}", flush=True)
    collected: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    for index in range(args.rounds):
        for mode in ("off", "on"):
            print(f"round {index + 1}: security {mode}", flush=True)
            for name, values in one_round(args, mode, root, index).items():
                collected[mode].setdefault(name, []).extend(values)
    print(f"\n{command}  ({args.agents} agents, {args.frameworks} frameworks)")
    print(f"{'figure (median of windows)':<34}{'off':>12}{'on':>12}{'cost':>9}  goal")
    for name, label in (("offers", "offers delivered /s"), ("launches", "launches to RUNNING /s")):
        off = statistics.median(collected["off"][name])
        on = statistics.median(collected["on"][name])
        cost = (off - on) / off if off else float("nan")
        verdict = "met" if cost < GOAL_COST else "MISSED"
        print(f"{label:<34}{off:>12,.0f}{on:>12,.0f}{cost:>9.1%}  < {GOAL_COST:.0%} {verdict}")
    cpu_off = statistics.median(collected["off"]["offers_cpu"])
    cpu_on = statistics.median(collected["on"]["offers_cpu"])
    print(f"{'master CPU while offering':<34}{cpu_off:>12.0%}{cpu_on:>12.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
