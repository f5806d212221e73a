"""Load benchmark of the live offer cycle: a real master process, simulated agents and frameworks.

Run (from the repository root; about 2.5 minutes; ``--quick`` is a 15 s smoke pass):

    .venv/bin/python tests/bench/bench_live.py

Everything runs on 127.0.0.1 in separate processes: the real ``fairshare master`` (``python -m
fairshare.cli master --port 0``, its address read from ``<work-dir>/master.addr``), agent load
processes (``load_agents.py``: many simulated agents each, speaking the real AgentService
protocol over several gRPC channels) and framework load processes (``load_frameworks.py``:
simulated frameworks speaking SchedulerService with raw stubs). Agents are ``cpus:8;mem:16384``
by default; the frameworks of phases 1 and 2 declare no demand, so they get coarse whole-agent
offers. The driver
prints one table, with the goal of issue 3 beside each figure. Nothing here asserts on time.

What is measured, phase by phase:

1. **Offers delivered per second at saturation.** ``--agents`` agents, ``--frameworks``
   frameworks that decline every offer the moment its OffersEvent arrives (one Decline per event,
   ``refuse_seconds=0``). After ``--warmup`` seconds, the offers received by all frameworks are
   counted over ``--repeats`` windows of ``--window`` seconds; the figure is the median window.
2. **Offer latency at half that load.** New framework processes hold every OffersEvent for a
   while, then decline all its offers in one call (``refuse_seconds=0``); the driver steers the
   common hold time during ``--warmup`` until the frameworks together receive half the figure of
   phase 1 (rate = agents / (hold + cycle)). For every declined offer, the latency is the time
   from the framework *issuing* the Decline call (the resource is given back) to the arrival,
   at whichever framework gets it, of the next offer of the same agent (the resource offered
   again). It covers the Decline RPC, the master's allocation batching (``allocation_batch``,
   5 ms) and run, and the delivery of the OffersEvent. Stamps are CLOCK_MONOTONIC, comparable
   across processes. Releases whose next offer did not arrive within ``--tail`` seconds count as
   infinitely late. p50 and p99 are taken per window; the figures are the medians over
   ``--repeats`` windows. The same latency from the Decline call *returning* is printed as a
   detail (it excludes the Decline round trip; it can be slightly negative when the next offer
   overtakes the Decline response).
3. **Full task lifecycle launches per second.** New framework processes subscribe with a
   declared Demand (``--task``, default ``cpus:1;mem:2048``, ``max_tasks`` = ``--live-tasks``
   each), accept every offer and launch its ``fair_tasks`` tasks that run ``--task-seconds``;
   the agents report STARTING then RUNNING (then FINISHED), each update acknowledged by the
   framework and the acknowledgement relayed by the master to the agent as the protocol says.
   The figure counts tasks whose RUNNING update's AcknowledgeStatusCommand reached the agent,
   per second (median window); the frameworks' own count, the launch-to-RUNNING-acknowledged
   latency and the update-to-acknowledgement time are printed as details. The demand bounds
   the tasks in flight (a closed loop), so an overloaded master shows as a lower rate and a
   longer latency instead of an ever-growing backlog of status-update retries.
``--io-workers N`` runs the master with that many I/O worker processes; "master CPU"
   then adds up the master's process and its workers'.
``--metrics-cost`` adds, after phase 1, the cost of metrics (issue 4): new declining frameworks
   saturate the master again and windows alternate between /metrics not scraped and scraped
   every second by a thread of the driver (``metrics_scraper.py``, as Prometheus would); the
   medians and their relative difference are reported (goal: under 5 %).
1b and 3b. **The same through the Mesos v1 scheduler HTTP API** (``load_mesos.py``, aiohttp):
   phase 1's declining frameworks and phase 3's closed loop, speaking JSON to the master's HTTP
   port instead of gRPC, in the same run (``--skip mesos`` leaves both out). Its lifecycle has
   coarse offers (no demand on that API), one ACKNOWLEDGE call per update and a KILL per task
   (the simulated agents end only placeholder tasks by themselves).
4. **Master RSS** (``VmRSS`` of ``/proc/PID/status``, median of 3 samples) with ``--agents``
   connected agents (before any framework) and with ``--agents-large`` (more agent processes
   are started). Each figure is taken as soon as every agent is connected (its stream open and
   registered); then, for ``--large-wait`` seconds (longer than the liveness timeout at that
   size: 3 heartbeat intervals of 20 s at 10,000 agents), the driver watches whether the agents
   stay connected, and reports how many the master dropped and why, the heartbeats the agents
   sent, and the master's CPU over that window: with no framework connected, that is what
   liveness costs it (goal: at most 10 % of a core at 10,000 agents).

The master's CPU use (all its threads, as a share of one core, from ``/proc/PID/stat``) is
printed for every window: its Python code runs on one thread, so a master near 100 % is the
bottleneck; well below that, the load processes (on the same cores) are.
``--profile`` runs the master under cProfile (``profiled_master.py``), one profile per measured
phase (and the 10,000-agent watch), and prints where the main thread's time goes and the top
functions; figures taken under the profiler are lower. Everything is cleaned up on exit, on
SIGTERM, and even if the driver is killed (see ``bench_procs``). Exit code: 0 unless a phase
failed, the master logged an internal error or did not exit 0 on SIGTERM (a missed goal is not
a failure: it is reported).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_procs import FLEET_REGISTRATION, Master, Worker, cpu_seconds, wait_ready
from bench_report import Results, latencies, mib, print_table, quantile, verdict
from metrics_scraper import Scraper
from profile_report import print_profiles

HERE = Path(__file__).resolve().parent
GOAL_OFFERS = 10_000.0
GOAL_P99_MS = 50.0
GOAL_LAUNCHES = 1_000.0
GOAL_METRICS_COST = 0.05
HOLD_MIN = 0.001
MASTER_LOG_ERRORS = ("Traceback", "rpc.failed", "timer action failed")
GOAL_LIVENESS_CPU = 0.10
HOLD_STEP = 0.5
FULL: dict[str, float] = {
    "agents": 1000,
    "agents_large": 10_000,
    "agent_procs": 2,
    "agent_procs_large": 3,
    "frameworks": 20,
    "framework_procs": 2,
    "live_tasks": 5,
    "window": 4.0,
    "repeats": 5,
    "warmup": 3.0,
    "settle": 2.0,
    "tail": 2.0,
    "large_wait": 65.0,
}
"""Defaults of the full run (flags left unset)."""
QUICK: dict[str, float] = {
    **FULL,
    "agents": 100,
    "agents_large": 300,
    "agent_procs": 1,
    "agent_procs_large": 1,
    "frameworks": 4,
    "window": 1.0,
    "repeats": 1,
    "warmup": 0.5,
    "settle": 0.5,
    "tail": 1.0,
    "large_wait": 1.0,
}
"""Defaults of ``--quick``."""


@dataclass
class Bench:
    """The running benchmark: settings, the master, the load processes."""

    args: argparse.Namespace
    master: Master
    log_dir: Path
    results: Results
    agents: list[Worker] = field(default_factory=list)
    spawned: int = 0

    def worker(self, script: str, *argv: str) -> Worker:
        self.spawned += 1
        name = f"{Path(script).stem}-{self.spawned}"
        command = [str(HERE / script), "--master", self.master.address, *argv]
        return Worker(name, command, self.log_dir, self.args.max_seconds)


# -- measuring ----------------------------------------------------------------------------------


Groups = dict[str, tuple[list[Worker], str]]
"""Figure name -> (load processes, counter they report) for ``measure_window``."""


@dataclass
class Window:
    """Counter rates over one window, and the CPU the master and the load processes used."""

    rates: dict[str, float]
    master_cpu: float
    load_cpu: float
    core_cpu: float = 0.0  # of the master's own process (with --io-workers, not the workers')


def rate_of(before: list[dict[str, Any]], after: list[dict[str, Any]], counter: str) -> float:
    """Sum over processes of (counter delta / that process's own elapsed time)."""
    total = 0.0
    for old, new in zip(before, after, strict=True):
        delta = new["counters"].get(counter, 0) - old["counters"].get(counter, 0)
        total += delta / (new["now"] - old["now"])
    return total


def measure_window(bench: Bench, groups: Groups, seconds: float) -> Window:
    """Rates per second of each group's counter over one window of ``seconds``."""
    load = {w.pid: w for workers, _ in groups.values() for w in workers}
    load.update({w.pid: w for w in bench.agents})
    pids = list(load)
    before = {name: [w.request("stats") for w in ws] for name, (ws, _) in groups.items()}
    masters = bench.master.pids()  # with --io-workers, the workers' CPU is the master's too
    master0, load0, wall0 = cpu_seconds(*masters), cpu_seconds(*pids), time.monotonic()
    core0 = cpu_seconds(bench.master.pid)
    time.sleep(seconds)
    after = {name: [w.request("stats") for w in ws] for name, (ws, _) in groups.items()}
    wall = time.monotonic() - wall0
    master_cpu = (cpu_seconds(*masters) - master0) / wall
    load_cpu = (cpu_seconds(*pids) - load0) / wall
    core_cpu = (cpu_seconds(bench.master.pid) - core0) / wall
    rates = {
        name: rate_of(before[name], after[name], counter) for name, (_, counter) in groups.items()
    }
    return Window(rates, master_cpu, load_cpu, core_cpu)


def windows(bench: Bench, groups: Groups, label: str) -> list[Window]:
    """``--repeats`` windows of ``--window`` seconds after ``--warmup``; prints each."""
    time.sleep(bench.args.warmup)
    measured = []
    for index in range(bench.args.repeats):
        window = measure_window(bench, groups, bench.args.window)
        shown = ", ".join(f"{name} {rate:,.0f}/s" for name, rate in window.rates.items())
        split = ""
        if bench.args.io_workers:
            workers = window.master_cpu - window.core_cpu
            split = f" (core {window.core_cpu:.0%}, I/O workers {workers:.0%})"
        bench.results.note(
            f"{label} window {index + 1}: {shown}; master CPU {window.master_cpu:.0%} of a core"
            f"{split}, load processes {window.load_cpu:.0%}"
        )
        measured.append(window)
    return measured


@contextmanager
def framework_processes(
    bench: Bench, mode: str, *extra: str, script: str = "load_frameworks.py"
) -> Iterator[list[Worker]]:
    """Start ``--framework-procs`` framework load processes in ``mode`` (``load_mesos.py``: over
    the Mesos HTTP API); stop them after."""
    args = bench.args
    counts = split(args.frameworks, args.framework_procs)
    if script == "load_mesos.py":
        extra = ("--http", (bench.master.work_dir / "metrics.addr").read_text().strip(), *extra)
    with ExitStack() as stack:
        workers = []
        for index, count in enumerate(counts):
            argv = ["--frameworks", str(count), "--mode", mode, "--name", f"p{index}", *extra]
            workers.append(stack.enter_context(bench.worker(script, *argv)))
        wait_ready(workers, 60.0)
        yield workers
        for worker in workers:
            worker.stop()
    time.sleep(args.settle)  # the master removes the frameworks and rescinds their offers


def split(total: int, parts: int) -> list[int]:
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


# -- phases -------------------------------------------------------------------------------------


def add_agents(bench: Bench, count: int, processes: int) -> int:
    """Start ``count`` more agents in ``processes`` processes; returns how many connected."""
    channels = bench.args.agents_per_channel
    started = []
    for index, share in enumerate(split(count, processes)):
        name = f"a{len(bench.agents) + index}"
        argv = ["--agents", str(share), "--channels", str(max(1, -(-share // channels)))]
        argv += ["--resources", bench.args.agent_resources, "--name", name]
        worker = bench.worker("load_agents.py", *argv)
        bench.agents.append(worker)
        started.append(worker)
    began = time.monotonic()
    ready = wait_ready(started, 60.0 + count / 100)
    connected = sum(int(event["connected"]) for event in ready)
    bench.results.note(
        f"{connected:,} of {count:,} agents connected in {time.monotonic() - began:.1f} s"
        f" ({processes} processes)"
    )
    return connected


def connected_agents(bench: Bench) -> tuple[int, int, dict[str, int], float]:
    """(agents connected now, lost, lost by code, median heartbeat interval) over every agent
    process."""
    connected = lost = 0
    codes: dict[str, int] = {}
    intervals: list[float] = []
    for worker in bench.agents:
        stats = worker.request("stats")
        counters = stats["counters"]
        connected += stats["live"]
        lost += counters.get("lost", 0) + counters.get("connect_errors", 0)
        intervals.append(stats["interval"])
        for code, number in stats["lost_codes"].items():
            codes[code] = codes.get(code, 0) + number
    return connected, lost, codes, statistics.median(intervals) if intervals else 0.0


def rss_kib(bench: Bench) -> int:
    samples = []
    for _ in range(3):
        samples.append(bench.master.rss_kib())
        time.sleep(0.2)
    return int(statistics.median(samples))


def phase_rss(bench: Bench, wanted: int, wait: float, profile: str | None = None) -> None:
    """RSS as soon as ``wanted`` agents have connected, then whether they stay connected and
    what their liveness costs the master."""
    live, _, _, _ = connected_agents(bench)
    rss = rss_kib(bench)
    results = bench.results
    results.note(f"RSS with {live:,} connected agents: {mib(rss)}")
    measured = mib(rss) if live >= wanted else f"{mib(rss)} with only {live:,} connected"
    results.row(f"master RSS at {wanted:,} connected agents", measured, "(reported)", "")
    if wait <= 0:
        return
    groups: Groups = {
        "heartbeats": (bench.agents, "heartbeats"),
        "heartbeat errors": (bench.agents, "heartbeat_errors"),
    }
    if profile:
        with bench.master.profiled(profile):
            window = measure_window(bench, groups, wait)
    else:
        window = measure_window(bench, groups, wait)
    later, lost, codes, interval = connected_agents(bench)
    sent = window.rates["heartbeats"]
    results.note(
        f"{wait:g} s later: {later:,} still connected, {lost:,} lost {codes or ''};"
        f" heartbeat interval {interval:g} s, {sent:,.0f} heartbeats/s sent"
        f" ({later / interval if interval else 0:,.0f}/s due), "
        f"{window.rates['heartbeat errors']:,.0f}/s failed; master CPU"
        f" {window.master_cpu:.1%} of a core, load processes {window.load_cpu:.0%};"
        f" master RSS {mib(bench.master.rss_kib())}"
    )
    if wanted >= bench.args.agents_large and wanted > bench.args.agents:
        results.row(
            f"master CPU on liveness, {wanted:,} idle agents",
            f"{window.master_cpu:.1%} of a core ({sent:,.0f} heartbeats/s)",
            f"<= {GOAL_LIVENESS_CPU:.0%}",
            verdict(window.master_cpu, GOAL_LIVENESS_CPU, False),
        )
    if later < wanted:
        results.warnings.append(
            f"{wanted:,} agents: {live:,} were connected at once, {later:,} still were"
            f" {wait:g} s later ({lost:,} lost: {codes}); master CPU {window.master_cpu:.0%}"
        )


def phase_offers(bench: Bench) -> None:
    print("phase 1: offers delivered per second (frameworks decline at once)", flush=True)
    with bench.master.profiled("offers"), framework_processes(bench, "decline") as workers:
        measured = windows(bench, {"offers": (workers, "offers")}, "saturated")
    rate = statistics.median(w.rates["offers"] for w in measured)
    bench.results.saturated = rate
    cpu = statistics.median(w.master_cpu for w in measured)
    bench.results.row(
        "offers delivered per second (saturated)",
        f"{rate:,.0f} /s (master CPU {cpu:.0%})",
        f">= {GOAL_OFFERS:,.0f} /s",
        verdict(rate, GOAL_OFFERS, True),
    )


def phase_mesos_offers(bench: Bench) -> None:
    """Phase 1 again, the frameworks speaking the Mesos v1 scheduler HTTP API."""
    print("phase 1 (Mesos API): offers delivered per second over /api/v1/scheduler", flush=True)
    with framework_processes(bench, "decline", script="load_mesos.py") as workers:
        measured = windows(bench, {"offers": (workers, "offers")}, "Mesos API saturated")
    rate = statistics.median(w.rates["offers"] for w in measured)
    cpu = statistics.median(w.master_cpu for w in measured)
    grpc = f"{bench.results.saturated:,.0f} /s over gRPC" if bench.results.saturated else "-"
    bench.results.row(
        "offers delivered per second (saturated), Mesos HTTP API",
        f"{rate:,.0f} /s (master CPU {cpu:.0%})",
        grpc,
        "-",
    )


def phase_metrics_cost(bench: Bench) -> None:
    """Saturated offers/s with /metrics scraped every second versus not, windows alternating."""
    print("metrics cost: saturated offers/s, /metrics scraped every 1 s vs not", flush=True)
    groups: Groups = {"offers": (list[Worker](), "offers")}
    plain: list[float] = []
    scraped: list[float] = []
    with framework_processes(bench, "decline") as workers:
        groups["offers"] = (workers, "offers")
        time.sleep(bench.args.warmup)
        for _ in range(bench.args.repeats):
            plain.append(measure_window(bench, groups, bench.args.window).rates["offers"])
            with Scraper(bench.master.work_dir, 1.0) as scraper:
                scraped.append(measure_window(bench, groups, bench.args.window).rates["offers"])
            took = statistics.median(scraper.durations) * 1000 if scraper.durations else 0.0
            bench.results.note(
                f"metrics cost window: {plain[-1]:,.0f} offers/s not scraped,"
                f" {scraped[-1]:,.0f} /s scraped ({len(scraper.durations)} scrapes, median"
                f" {took:.1f} ms, {scraper.last_series} series, {scraper.last_bytes:,} bytes,"
                f" {scraper.failures} failed)"
            )
    base, with_metrics = statistics.median(plain), statistics.median(scraped)
    cost = (base - with_metrics) / base if base else 0.0
    bench.results.row("offers/s not scraped (saturated)", f"{base:,.0f} /s", "-", "")
    bench.results.row(
        "offers/s with /metrics scraped every 1 s", f"{with_metrics:,.0f} /s", "-", ""
    )
    bench.results.row(
        "metrics cost (offers/s lost to scraping)",
        f"{cost:+.1%}",
        f"< {GOAL_METRICS_COST:.0%}",
        verdict(cost, GOAL_METRICS_COST, False),
    )


def phase_latency(bench: Bench) -> None:
    args = bench.args
    target = 0.5 * (bench.results.saturated or GOAL_OFFERS)
    print(f"phase 2: offer latency at {target:,.0f} offers/s (held offers)", flush=True)
    hold = max(HOLD_MIN, args.agents / target)
    with (
        bench.master.profiled("latency"),
        framework_processes(bench, "paced", "--hold", f"{hold:.4f}") as workers,
    ):
        steer_hold(bench, workers, target, hold)
        windows_ = [latency_window(bench, workers, index) for index in range(args.repeats)]
    measured = [m for m in windows_ if m is not None]
    if not measured:
        bench.results.failures.append("offer latency: no declined offer was offered again")
        return
    rate = statistics.median(m[0] for m in measured)
    p50 = statistics.median(m[1] for m in measured)
    p99 = statistics.median(m[2] for m in measured)
    bench.results.row(f"offer latency p50 at {rate:,.0f} offers/s", f"{p50:.1f} ms", "-", "")
    bench.results.row(
        f"offer latency p99 at {rate:,.0f} offers/s",
        f"{p99:.1f} ms",
        f"<= {GOAL_P99_MS:g} ms",
        verdict(p99, GOAL_P99_MS, False),
    )


def latency_window(
    bench: Bench, workers: list[Worker], index: int
) -> tuple[float, float, float] | None:
    """Record one window of offer latency; returns (offers/s, p50 ms, p99 ms)."""
    for worker in workers:
        worker.request("record", what="start")
    window = measure_window(bench, {"offers": (workers, "offers")}, bench.args.window)
    for worker in workers:
        worker.request("record", what="end")
    time.sleep(bench.args.tail)  # the last releases of the window get their next offer
    collected = [worker.request("record", what="collect", timeout=60.0) for worker in workers]
    from_issue, from_return, unmatched = latencies(collected)
    if not from_issue:
        return None
    rate = window.rates["offers"]
    p50, p99 = quantile(from_issue, 0.5) * 1000, quantile(from_issue, 0.99) * 1000
    r50, r99 = quantile(from_return, 0.5) * 1000, quantile(from_return, 0.99) * 1000
    bench.results.note(
        f"latency window {index + 1}: {len(from_issue):,} samples ({unmatched} not re-offered"
        f" within {bench.args.tail:g} s) at {rate:,.0f} offers/s, master CPU"
        f" {window.master_cpu:.0%}; from Decline issued p50 {p50:.1f} ms p99 {p99:.1f} ms;"
        f" from Decline returned p50 {r50:.1f} ms p99 {r99:.1f} ms"
    )
    return rate, p50, p99


def steer_hold(bench: Bench, workers: list[Worker], target: float, hold: float) -> float:
    """Set the frameworks' common hold time so that they receive ``target`` offers/s.

    Each agent cycles through offer, hold, decline, re-offer: rate = agents / (hold + cycle),
    so every step estimates the cycle from the measured rate and moves the hold halfway to
    ``agents / target - cycle``. Runs for ``--warmup`` seconds; returns the final hold.
    """
    deadline = time.monotonic() + max(bench.args.warmup, 2 * HOLD_STEP)
    groups: Groups = {"offers": (workers, "offers")}
    while time.monotonic() < deadline:
        rate = measure_window(bench, groups, HOLD_STEP).rates["offers"]
        if rate > 0:
            cycle = max(0.0, bench.args.agents / rate - hold)
            wanted = bench.args.agents / target - cycle
            hold = max(HOLD_MIN, 0.5 * hold + 0.5 * wanted)
        else:
            hold = max(HOLD_MIN, hold / 2)
        for worker in workers:
            worker.request("hold", seconds=hold)
    bench.results.note(f"frameworks hold each OffersEvent {hold * 1000:.1f} ms, then decline it")
    return hold


def phase_lifecycle(bench: Bench) -> None:
    args = bench.args
    print("phase 3: task launches per second to RUNNING + acknowledged", flush=True)
    extra = ["--tasks-per-offer", str(args.tasks_per_offer), "--live-tasks", str(args.live_tasks)]
    extra += ["--task-seconds", str(args.task_seconds), "--task", args.task]
    if args.ack_calls is not None:
        extra += ["--ack-calls", str(args.ack_calls)]
    with bench.master.profiled("lifecycle"), framework_processes(bench, "lifecycle", *extra) as fws:
        groups: Groups = {
            "RUNNING acked at agents": (bench.agents, "running_acked"),
            "RUNNING acked by frameworks": (fws, "running_acked"),
            "launched": (fws, "tasks_launched"),
            "update retries": (bench.agents, "update_retries"),
        }
        measured = windows(bench, groups, "lifecycle")
        report_lifecycle_latency(bench)
        report_batching(bench, fws)
    rate = statistics.median(w.rates["RUNNING acked at agents"] for w in measured)
    cpu = statistics.median(w.master_cpu for w in measured)
    bench.results.row(
        "task launches per second to RUNNING + acked",
        f"{rate:,.0f} /s (master CPU {cpu:.0%})",
        f">= {GOAL_LAUNCHES:,.0f} /s",
        verdict(rate, GOAL_LAUNCHES, True),
    )


def phase_mesos_lifecycle(bench: Bench) -> None:
    """Phase 3 over the Mesos HTTP API: coarse offers (no demand on that API), one ACKNOWLEDGE
    call per update, each task killed ``--task-seconds`` after its RUNNING."""
    args = bench.args
    print("phase 3 (Mesos API): task launches per second over /api/v1/scheduler", flush=True)
    extra = ["--tasks-per-offer", str(args.tasks_per_offer), "--live-tasks", str(args.live_tasks)]
    extra += ["--task-seconds", str(args.task_seconds), "--task", args.task]
    with framework_processes(bench, "lifecycle", *extra, script="load_mesos.py") as fws:
        groups: Groups = {
            "RUNNING acked at agents": (bench.agents, "running_acked"),
            "launched": (fws, "tasks_launched"),
        }
        measured = windows(bench, groups, "Mesos API lifecycle")
    rate = statistics.median(w.rates["RUNNING acked at agents"] for w in measured)
    cpu = statistics.median(w.master_cpu for w in measured)
    bench.results.row(
        "task launches per second to RUNNING + acked, Mesos HTTP API",
        f"{rate:,.0f} /s (master CPU {cpu:.0%})",
        "beside gRPC's (above)",
        "-",
    )


def report_batching(bench: Bench, frameworks: list[Worker]) -> None:
    """How many items the batched messages carried, on average over the phase."""

    def total(workers: list[Worker], counter: str) -> int:
        return sum(w.request("stats")["counters"].get(counter, 0) for w in workers)

    acks, calls = total(frameworks, "acks"), total(frameworks, "ack_calls")
    updates, messages = total(bench.agents, "updates_sent"), total(bench.agents, "update_messages")
    accepted, launched = total(frameworks, "accepted"), total(frameworks, "tasks_launched")
    bench.results.note(
        f"batching: {acks / max(calls, 1):.2f} acknowledgements per Acknowledge call,"
        f" {updates / max(messages, 1):.2f} status updates per agent message,"
        f" {launched / max(accepted, 1):.2f} tasks per Accept"
    )


def report_lifecycle_latency(bench: Bench) -> None:
    """Launch-to-RUNNING-acked and update-to-acknowledgement times seen by the agents."""
    running: list[float] = []
    rtt: list[float] = []
    for worker in bench.agents:
        stats = worker.request("stats", latency=True, timeout=60.0)
        running += stats["running_latency"]
        rtt += stats["ack_latency"]
    if running and rtt:
        running.sort()
        rtt.sort()
        bench.results.note(
            f"lifecycle latency at the agents: LaunchTasks to RUNNING acked"
            f" p50 {quantile(running, 0.5) * 1000:.0f} ms p99 {quantile(running, 0.99) * 1000:.0f}"
            f" ms; update sent to acknowledgement received p50 {quantile(rtt, 0.5) * 1000:.1f} ms"
            f" p99 {quantile(rtt, 0.99) * 1000:.1f} ms (last {len(running):,} tasks)"
        )


# -- driver -------------------------------------------------------------------------------------


def run(args: argparse.Namespace, log_dir: Path, command: str) -> Results:
    results = Results()
    profile_prefix = str(log_dir / "master-profile") if args.profile else None
    work_dir = log_dir / "master"
    level = args.master_log_level
    extra = (*FLEET_REGISTRATION, "--io-workers", str(args.io_workers))
    with Master(work_dir, args.allocation_interval, level, profile_prefix, extra=extra) as master:
        bench = Bench(args, master, log_dir, results)
        try:
            steps: list[tuple[str, Callable[[], None]]] = [
                ("connect", lambda: connect_small(bench)),
                ("offers", lambda: phase_offers(bench)),
                ("mesos", lambda: phase_mesos_offers(bench)),
                ("metrics-cost", lambda: phase_metrics_cost(bench)),
                ("latency", lambda: phase_latency(bench)),
                ("lifecycle", lambda: phase_lifecycle(bench)),
                ("mesos-lifecycle", lambda: phase_mesos_lifecycle(bench)),
                ("large", lambda: connect_large(bench)),
            ]
            for name, step in steps:
                skipped = name in args.skip or (name == "mesos-lifecycle" and "mesos" in args.skip)
                if skipped or (name == "metrics-cost" and not args.metrics_cost):
                    continue
                try:
                    step()
                except Exception as error:  # one failed phase must not hide the others
                    results.failures.append(f"{name}: {type(error).__name__}: {error}")
                    print(f"  phase {name} failed: {error}", flush=True)
                    if not master.alive():
                        break
        finally:
            # SIGTERM the master while the agents are still connected: it ends their streams
            # and exits; agents that went away first would only be noticed one by one. Ending
            # the streams takes about 0.5 ms each (28 s for 50,000): the time allowed grows
            # with the fleet, so a hang is still caught
            code = master.stop(30.0 + args.agents_large / 1000)
            for worker in bench.agents:
                worker.stop()
        results.note(f"master exited with code {code}")
        if code != 0:
            results.failures.append(f"master exit code {code} after SIGTERM (0 expected)")
        log = master.log_path.read_text(errors="replace")
        for mark in MASTER_LOG_ERRORS:
            if mark in log:
                results.failures.append(f"the master logged {mark!r}: see {master.log_path}")
    if profile_prefix:
        phases = ["offers", "latency", "lifecycle", "large"]
        print_profiles(profile_prefix, phases, args.profile_top)
    return results


def connect_small(bench: Bench) -> None:
    args = bench.args
    print(f"connecting {args.agents:,} agents", flush=True)
    add_agents(bench, args.agents, args.agent_procs)
    time.sleep(args.settle)
    phase_rss(bench, args.agents, args.settle)


def connect_large(bench: Bench) -> None:
    args = bench.args
    more = args.agents_large - args.agents
    print(f"connecting {more:,} more agents (to {args.agents_large:,})", flush=True)
    add_agents(bench, more, args.agent_procs_large)
    phase_rss(bench, args.agents_large, args.large_wait, profile="large")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="smoke pass: small numbers, < 1 minute")
    add("--agents", type=int, help="agents for phases 1-3 and the first RSS (default 1000)")
    add("--agents-large", type=int, help="agents for the second RSS figure (default 10000)")
    add("--agent-procs", type=int, help="agent processes for --agents (default 2)")
    add("--agent-procs-large", type=int, help="more agent processes for the rest (default 3)")
    add("--agents-per-channel", type=int, default=250, help="agents sharing one connection")
    add("--agent-resources", default="cpus:8;mem:16384")
    add("--frameworks", type=int, help="simulated frameworks (default 20)")
    add("--framework-procs", type=int, help="framework processes (default 2)")
    add("--window", type=float, help="seconds per measured window (default 4)")
    add("--repeats", type=int, help="windows per figure, median reported (default 5)")
    add("--warmup", type=float, help="seconds before the first window (default 3)")
    add("--settle", type=float, help="seconds to let the master settle (default 2)")
    add("--tail", type=float, help="latency: seconds to wait for the last re-offers (default 2)")
    add("--large-wait", type=float, help="seconds to watch the large fleet stay up (default 65)")
    add("--task", default="cpus:1;mem:2048", help="lifecycle task shape")
    add("--tasks-per-offer", type=int, default=8, help="lifecycle: cap for coarse offers")
    add("--live-tasks", type=int, help="lifecycle: Demand max_tasks per framework (default 5)")
    add("--task-seconds", type=float, default=0.05, help="lifecycle: task run time")
    add("--ack-calls", type=int, help="lifecycle: Acknowledge calls in flight (default: SDK's)")
    add("--allocation-interval", default="1s", help="the master's --allocation-interval")
    add("--io-workers", type=int, default=0, help="the master's --io-workers (I/O processes)")
    add("--master-log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add("--metrics-cost", action="store_true", help="also: offers/s with /metrics scraped vs not")
    add("--profile", action="store_true", help="profile the master (cProfile) per phase")
    add("--profile-top", type=int, default=25, help="functions shown per profile")
    phases = ["offers", "mesos", "latency", "lifecycle", "large"]
    add("--skip", nargs="*", default=[], choices=phases, help="phases left out")
    add("--keep-logs", action="store_true", help="keep the logs directory (path is printed)")
    add("--max-seconds", type=float, default=900.0, help="hard lifetime of every load process")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.agents_large < args.agents:
        parser.error("--agents-large must be at least --agents")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = shlex.join(["python", "tests/bench/bench_live.py", *argv])
    started = time.monotonic()
    log_root = tempfile.mkdtemp(prefix="fairshare-bench-")
    log_dir = Path(log_root)
    print(f"logs: {log_dir}", flush=True)
    results = run(args, log_dir, command)
    print_table(args, results, command, time.monotonic() - started)
    if args.keep_logs or args.profile or results.failures:
        print(f"\nlogs kept in {log_dir}")
    else:
        for path in sorted(log_dir.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        log_dir.rmdir()
    return 1 if results.failures else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanups on SIGTERM too
    sys.exit(main(sys.argv[1:]))
