"""HA failover: kill -9 the leading master of three on etcd and time how long until offers flow
again (issue 12). Printed figures, no assertion on time.

Run (from the repository root):

    .venv/bin/python tests/bench/bench_failover.py --real-agents 100
    .venv/bin/python tests/bench/bench_failover.py --sim-agents 10000

Everything runs on 127.0.0.1, in separate processes on the same cores: one etcd member
(Debian's etcd-server), three ``fairshare master --registry etcd://...`` (election lease
``--election-ttl``, default 2 s), either N real ``fairshare agent`` processes or N simulated
agents (``load_agents.py --reconnect``: each its own ``Connect`` stream, following a follower's
redirect to the leader it names, reregistering as the real agent does), and one framework on the
SDK (``failover_framework.py``: stamps every offers event with CLOCK_MONOTONIC, declines for
0.2 s so offers keep flowing).

Once every agent is connected and offers flow, the driver kills the leader with SIGKILL at t0.
Figures, each from t0:

- **another master leads**: its ``/health`` says ``leader`` (polled every 20 ms);
- **offers flow again**: the framework's first offer after it subscribed again after t0 (an
  offer of the old leader still in flight does not count; the new leader offers nothing
  until every agent it recovered from etcd is back, or its reregistration window ends; so this
  is when the cluster is whole and serving again).

``--io-workers N`` runs every master with that many I/O worker processes.

Mesos's published failover for 10,000 agents: 4.5 s.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench_procs import FLEET_REGISTRATION, ROOT, Master, Worker, clean_env, wait_ready

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/etcd_server.py
from etcd_server import start_cluster  # noqa: E402

POLL = 0.02
MESOS_SECONDS = 4.5


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def role(master: Master) -> str:
    try:
        http = (master.work_dir / "metrics.addr").read_text().strip()
        with urllib.request.urlopen(f"http://{http}/health", timeout=0.5) as answer:
            return str(json.loads(answer.read()).get("role", ""))
    except (OSError, ValueError):
        return ""


def terms(log_dir: Path) -> int:
    """Leadership terms started so far (every master's log)."""
    return sum(
        path.read_text(errors="replace").count("leader.term.started")
        for path in log_dir.glob("master-*.log")
    )


def offers_after(log: Path, t0: float) -> float | None:
    """The first offer after the framework subscribed again after ``t0`` (any offer after
    ``t0`` when ``t0`` is 0)."""
    if not log.exists():
        return None
    resubscribed = t0 == 0.0
    for line in log.read_text().splitlines():
        if not line.endswith("}"):
            continue
        record = json.loads(line)
        if record.get("subscribed", 0.0) > t0:
            resubscribed = True
        if resubscribed and record.get("offers", 0.0) > t0:
            return float(record["offers"])
    return None


def wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)
    return result


def start_real_agents(log_dir: Path, masters: str, count: int) -> list[subprocess.Popen[bytes]]:
    agents = []
    for index in range(count):
        work = log_dir / f"agent-{index}"
        work.mkdir()
        argv = [sys.executable, "-m", "fairshare.cli", "agent", "--master", masters]
        argv += ["--port", "0", "--metrics-port", "0", "--work-dir", str(work)]
        argv += ["--resources", "cpus:4;mem:4096", "--log-level", "WARNING"]
        with (log_dir / f"agent-{index}.log").open("wb") as log:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=clean_env(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, start_new_session=True,
            )  # fmt: skip
            agents.append(process)
    wait(
        lambda: all((log_dir / f"agent-{i}" / "agent.addr").exists() for i in range(count)),
        60 + count,
        "every agent serving",
    )
    return agents


def start_sim_agents(log_dir: Path, masters: str, count: int, procs: int) -> list[Worker]:
    workers = []
    for index in range(procs):
        share = count // procs + (1 if index < count % procs else 0)
        argv = [str(HERE / "load_agents.py"), "--master", masters, "--agents", str(share)]
        argv += ["--channels", str(max(1, share // 250)), "--reconnect", "--name", f"a{index}"]
        workers.append(Worker(f"agents-{index}", argv, log_dir, 900.0))
    wait_ready(workers, 120.0 + count / 50)
    return workers


def run(args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    members = start_cluster(log_dir / "etcd", ["127.0.0.1"])
    url = f"etcd://{members[0].endpoint}/bench"
    extra = ("--registry", url, "--election-ttl", args.ttl, "--reregistration-timeout", "60s")
    extra += FLEET_REGISTRATION
    if args.io_workers:
        extra += ("--io-workers", str(args.io_workers))
    masters: list[Master] = []
    real: list[subprocess.Popen[bytes]] = []
    sims: list[Worker] = []
    framework: subprocess.Popen[bytes] | None = None
    figures: dict[str, Any] = {}
    try:
        for index in range(3):
            master = Master(
                log_dir / f"master-{index}", "1s", "INFO", port=free_port(), extra=extra,
                log_name=f"master-{index}.log",
            )  # fmt: skip
            masters.append(master.__enter__())
        addresses = ",".join(m.address for m in masters)
        leader = wait(
            lambda: next((m for m in masters if role(m) == "leader"), None), 30, "a leader"
        )
        began = time.monotonic()
        if args.real_agents:
            real = start_real_agents(log_dir, addresses, args.real_agents)
        else:
            sims = start_sim_agents(log_dir, addresses, args.sim_agents, args.agent_procs)
        figures["connect_seconds"] = time.monotonic() - began
        offers = log_dir / "offers.jsonl"
        argv = [sys.executable, str(HERE / "failover_framework.py"), "--master", addresses]
        with (log_dir / "framework.log").open("wb") as log:
            framework = subprocess.Popen(
                [*argv, "--log", str(offers)], cwd=ROOT, env=clean_env(), stdout=log, stderr=log
            )
        wait(lambda: offers_after(offers, 0.0), 120, "offers flowing")
        time.sleep(args.settle)
        leader = wait(
            lambda: next((m for m in masters if role(m) == "leader"), None), 30, "a leader"
        )
        figures["terms_before"] = terms(log_dir)
        t0 = time.monotonic()
        leader.kill()
        others = [m for m in masters if m is not leader]
        wait(lambda: any(role(m) == "leader" for m in others), 60, "another leader")
        figures["new_leader"] = time.monotonic() - t0
        stamp = wait(lambda: offers_after(offers, t0), args.timeout, "offers after the kill")
        figures["offers"] = stamp - t0
    finally:
        if framework is not None:
            framework.kill()
            framework.wait()
        for worker in sims:
            worker.stop()
        for process in real:
            process.kill()
            process.wait()
        for master in masters:
            master.__exit__(None, None, None)
        for member in members:
            member.kill()
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-agents", type=int, default=0, help="real agent processes")
    parser.add_argument("--sim-agents", type=int, default=10_000, help="simulated agents")
    parser.add_argument("--agent-procs", type=int, default=4, help="processes of sim agents")
    parser.add_argument("--ttl", default="2s", help="the masters' --election-ttl")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before the kill")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--io-workers", type=int, default=0, help="the masters' --io-workers (I/O processes)"
    )
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "tests/bench/bench_failover.py", *argv])
    log_dir = Path(tempfile.mkdtemp(prefix="fairshare-failover-"))
    print(f"logs: {log_dir}", flush=True)
    started = time.monotonic()
    figures = run(args, log_dir)
    agents = (
        f"{args.real_agents} real agent processes"
        if args.real_agents
        else f"{args.sim_agents:,} simulated agents in {args.agent_procs} processes"
    )
    print()
    print("fairshare HA failover: leader kill -9 -> offers again (issue 12)")
    print(f"command: {command}")
    print(f"machine: 2 CPUs shared by every process; run took {time.monotonic() - started:.0f} s")
    print(
        f"setup: 1 etcd member, 3 masters (--election-ttl {args.ttl},"
        f" --io-workers {args.io_workers}), {agents}, 1 framework"
    )
    print(f"  agents connected in               {figures['connect_seconds']:.1f} s")
    print(f"  leadership terms before the kill  {figures['terms_before']} (1: no change)")
    print(f"  another master leads after        {figures['new_leader']:.2f} s")
    print(
        f"  offers flow again after           {figures['offers']:.2f} s"
        f"   (Mesos, 10,000 agents: {MESOS_SECONDS:g} s)"
    )
    if not args.keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
