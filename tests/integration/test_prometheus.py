"""A real Prometheus server scraping a live master and two agents under a small workload.

One cluster for the module: a master and two agents (``--metrics-port 0``; the bound address is
read from ``<work-dir>/metrics.addr``), a Prometheus (Debian's ``prometheus``) with its own
config (scrape and rule evaluation every second, the rules of ``deploy/prometheus/rules.yml``),
its own TSDB directory and a free port, and two ``fairshare run`` frameworks: A (3 tasks of
<1 CPU, 1 GiB>) and B (2 tasks of <2 CPUs, 512 MiB>) on 2 x <4 CPUs, 8 GiB>. Both get all they
want, so the cluster settles (no offers outstanding) and ``fairshare status --json`` is stable.
B starts only once Prometheus has scraped the offers sent to A, so the offers counter grows
between two scrapes and ``rate()`` sees it.

Checks go through Prometheus's HTTP API (``/api/v1/targets``, ``/api/v1/query``,
``/api/v1/rules``); every wait polls with a deadline; every process is killed in teardown. The
Prometheus tests skip (with the reason) when the ``prometheus`` binary is absent; the check that
every metric the deploy/ files name exists in a live scrape runs without it.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from daemons import (
    DEFAULT_MASTER_FLAGS,
    ROOT,
    Daemon,
    daemon_env,
    fairshare_status,
    start_agent,
    start_master,
    wait_for,
)

PROMETHEUS = shutil.which("prometheus")
DEPLOY = ROOT / "deploy"
SETTLE = 30.0
INTERNAL_ERRORS = ("Traceback", "rpc.failed", "timer action failed")
WANTED = {"A": 3, "B": 2}
_METRIC_RE = re.compile(r"(?<![A-Za-z0-9_:])fairshare_[a-z_]*[a-z]")


@dataclass
class Cluster:
    master: Daemon
    agents: list[Daemon]
    metrics: dict[str, str]  # "master", "agent0", "agent1" -> HOST:PORT of /metrics
    tmp: Path


def metrics_address(daemon: Daemon) -> str:
    """The bound metrics address the daemon wrote to ``<work-dir>/metrics.addr``."""
    path = daemon.work_dir / "metrics.addr"

    def ready() -> str:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        return text.strip() if text.endswith("\n") else ""

    address: str = wait_for(ready, SETTLE, str(path))
    return address


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("prometheus-cluster")
    started: list[Daemon] = []
    try:
        master = start_master(tmp / "master", *DEFAULT_MASTER_FLAGS, "--metrics-port", "0")
        started.append(master)
        for index in range(2):
            started.append(start_agent(master.address, tmp / f"agent{index}"))
        addresses = {"master": metrics_address(master)}
        addresses |= {f"agent{i}": metrics_address(agent) for i, agent in enumerate(started[1:])}
        yield Cluster(master, started[1:], addresses, tmp)
    finally:
        for daemon in started:
            daemon.kill()
    broken = [d.log_path for d in started[:1] if any(m in d.log() for m in INTERNAL_ERRORS)]
    if broken:
        pytest.fail(f"the master logged an internal error; see {broken}")


# --- Prometheus ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def prometheus_config(cluster: Cluster) -> str:
    agents = [address for name, address in sorted(cluster.metrics.items()) if name != "master"]
    jobs = {"fairshare-master": [cluster.metrics["master"]], "fairshare-agent": agents}
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(DEPLOY / "prometheus" / "rules.yml")],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": targets}]}
            for job, targets in jobs.items()
        ],
    }
    return json.dumps(config, indent=2)  # JSON is YAML


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class Prometheus:
    """A ``prometheus`` process on 127.0.0.1 with its own config and TSDB directory."""

    def __init__(self, binary: str, config: Path, work: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "prometheus.log"
        self._log = self.log_path.open("wb")
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector of ``expression`` (an AssertionError if Prometheus refuses it)."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
        answer = http_json(url)
        assert answer["status"] == "success", (expression, answer)
        data = answer["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def values(self, expression: str, label: str = "") -> dict[str, float]:
        """``{label value: sample value}`` of the query (key "" without ``label``)."""
        return {
            sample["metric"].get(label, ""): float(sample["value"][1])
            for sample in self.query(expression)
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="module")
def prometheus(cluster: Cluster) -> Iterator[Prometheus | None]:
    """A Prometheus scraping the cluster every second; None if the binary is absent."""
    if PROMETHEUS is None:
        yield None
        return
    config = cluster.tmp / "prometheus.yml"
    config.write_text(prometheus_config(cluster), encoding="utf-8")
    server = Prometheus(PROMETHEUS, config, cluster.tmp)
    try:
        wait_for(server.ready, SETTLE, "prometheus /-/ready")
        wait_for(lambda: targets_up(server) == 3, SETTLE, "prometheus to scrape the 3 targets")
        yield server
    finally:
        server.stop()


def targets_up(server: Prometheus) -> int:
    targets = http_json(f"{server.url}/api/v1/targets?state=active")["data"]["activeTargets"]
    return sum(target["health"] == "up" for target in targets)


def need(server: Prometheus | None) -> Prometheus:
    if server is None:
        pytest.skip("the prometheus binary is not installed (Debian: apt-get install prometheus)")
    return server


# --- the workload ---------------------------------------------------------------------------


def running(document: dict[str, Any]) -> dict[str, int]:
    return {fw["name"]: fw["tasks"].get("RUNNING", 0) for fw in document["frameworks"]}


def settled(master: Daemon, expected: dict[str, int]) -> dict[str, Any] | None:
    document = fairshare_status(master.address)
    if running(document) == expected and not document["offers"]:
        return document
    return None


@pytest.fixture(scope="module")
def workload(cluster: Cluster, prometheus: Prometheus | None) -> Iterator[dict[str, Any]]:
    """Frameworks A and B settled on the cluster; the settled ``fairshare status --json``."""
    clients: list[subprocess.Popen[bytes]] = []

    def start(name: str, task: str) -> None:
        argv = ["-m", "fairshare.cli", "run", "--master", cluster.master.address, "--name", name]
        log = (cluster.tmp / f"run-{name}.log").open("wb")
        argv += ["--task", task, "--count", str(WANTED[name])]
        clients.append(
            subprocess.Popen(
                [sys.executable, *argv], cwd=ROOT, env=daemon_env(), stdout=log, stderr=log
            )
        )

    try:
        start("A", "cpus:1;mem:1024")
        wait_for(lambda: settled(cluster.master, {"A": 3}), SETTLE, "A running 3 tasks")
        server = prometheus
        if server is not None:  # B's offers then raise a counter Prometheus already saw
            sent = 'sum(fairshare_offers_total{outcome="sent"})'
            wait_for(lambda: server.values(sent).get("", 0) > 0, SETTLE, "offers scraped")
        start("B", "cpus:2;mem:512")
        settled_state = wait_for(
            lambda: settled(cluster.master, WANTED), SETTLE, "A 3 and B 2 running"
        )
        # a quota on the role A and B run in, binding nothing (the smallest guarantee, a limit
        # far above the pool), so the quota panel and the alert's series have data
        from fairshare.cli import main

        quota = ["quota", "--master", cluster.master.address, "--role", "*"]
        assert main([*quota, "--guarantee", "cpus:0.001", "--limit", "cpus:1000"]) == 0
        if server is not None:
            guarantee = "count(fairshare_role_quota_guarantee)"
            wait_for(lambda: server.values(guarantee).get("", 0) > 0, SETTLE, "quota scraped")
        yield settled_state
    finally:
        for client in clients:
            client.kill()
            client.wait(10)


def eventually(server: Prometheus, expression: str, check: Callable[[float], bool]) -> float:
    """Poll ``expression`` (one sample) until ``check`` holds on its value; the value."""
    last: list[float] = []

    def holds() -> bool:
        values = list(server.values(expression).values())
        last[:] = values
        return len(values) == 1 and check(values[0])

    try:
        wait_for(holds, SETTLE, expression)
    except AssertionError:
        raise AssertionError(f"{expression} never passed the check; last value {last}") from None
    return last[0]


# --- the checks -----------------------------------------------------------------------------


def test_prometheus_scrapes_the_master_and_both_agents(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    targets = http_json(f"{server.url}/api/v1/targets?state=active")["data"]["activeTargets"]
    jobs = sorted(target["labels"]["job"] for target in targets)
    assert jobs == ["fairshare-agent", "fairshare-agent", "fairshare-master"]
    assert all(target["health"] == "up" for target in targets), targets
    assert server.values("sum(up)") == {"": 3.0}


def test_agent_count(prometheus: Prometheus | None, workload: dict[str, Any]) -> None:
    server = need(prometheus)
    agents = server.values("fairshare_agents", "state")
    assert agents["active"] == 2 == len(workload["agents"])
    assert agents.get("unreachable", 0) == 0
    eventually(server, "sum(fairshare_agent_master_connected)", lambda value: value == 2)


def test_running_tasks_equal_the_status(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    expected = sum(running(workload).values())
    assert expected == sum(WANTED.values())
    eventually(server, 'sum(fairshare_tasks{state="running"})', lambda value: value == expected)
    eventually(
        server, 'sum(fairshare_agent_tasks{state="running"})', lambda value: value == expected
    )


def test_dominant_shares_equal_the_status(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    by_id = {fw["id"]: fw["name"] for fw in workload["frameworks"]}
    expected = {fw["id"]: fw["dominant_share"] for fw in workload["frameworks"]}
    assert {by_id[i]: v for i, v in expected.items()} == pytest.approx({"A": 3 / 8, "B": 4 / 8})

    def close() -> dict[str, float] | None:
        shares = server.values("fairshare_framework_dominant_share", "framework_id")
        if set(shares) != set(expected):
            return None
        return shares if all(abs(shares[n] - expected[n]) <= 0.01 for n in expected) else None

    wait_for(close, SETTLE, f"Prometheus's dominant shares to be {expected}")


def test_offers_sent_have_a_nonzero_rate(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    rate = 'sum(rate(fairshare_offers_total{outcome="sent"}[1m]))'
    assert eventually(server, rate, lambda value: value > 0) > 0
    # The recording rule of deploy/prometheus/rules.yml computes the same from the same data.
    recorded = 'fairshare:offers:rate1m{outcome="sent"}'
    eventually(server, recorded, lambda value: value > 0)
    eventually(server, 'sum(fairshare_offers_total{outcome="accepted"})', lambda v: v > 0)


def test_allocation_run_duration_quantile_is_a_number(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    for quantile in ("0.5", "0.99"):
        expression = (
            f"histogram_quantile({quantile}, sum by (le)"
            " (rate(fairshare_allocation_run_duration_seconds_bucket[1m])))"
        )
        value = eventually(server, expression, math.isfinite)
        assert 0 <= value <= 10, (quantile, value)
    eventually(server, "sum(rate(fairshare_allocation_runs_total[1m]))", lambda v: v > 0)


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "fairshare-dashboard.json").read_text())
    return [
        target["expr"]
        for panel in dashboard["panels"]
        for inner in [panel, *panel.get("panels", [])]
        for target in inner.get("targets", [])
    ]


def test_every_dashboard_query_and_rule_runs_on_the_live_data(
    prometheus: Prometheus | None, workload: dict[str, Any]
) -> None:
    server = need(prometheus)
    empty = [expression for expression in dashboard_expressions() if not server.query(expression)]
    # Only the RPC-errors panel may be empty: the workload makes no failing calls.
    assert all("fairshare_rpc_requests_total" in expression for expression in empty), empty

    def rules_evaluated() -> list[dict[str, Any]] | None:
        groups = http_json(f"{server.url}/api/v1/rules")["data"]["groups"]
        rules: list[dict[str, Any]] = [rule for group in groups for rule in group["rules"]]
        return (
            rules
            if all(rule.get("lastEvaluation", "0001").startswith("20") for rule in rules)
            else None
        )

    rules = wait_for(rules_evaluated, SETTLE, "every rule evaluated once")
    assert rules and all(rule["health"] == "ok" for rule in rules), [
        (rule["name"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"
    ]


# --- no panel points at nothing -------------------------------------------------------------


def scrape(address: str) -> set[str]:
    """The sample names of one /metrics scrape (``_bucket``/``_sum``/``_count`` included)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        text = response.read().decode("utf-8")
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1].isalpha()}


def deploy_metric_names() -> set[str]:
    """Every fairshare metric name the dashboard, the rules and the config use in PromQL."""
    texts = dashboard_expressions()
    texts += [
        (DEPLOY / "prometheus" / name).read_text() for name in ("rules.yml", "prometheus.yml")
    ]
    return {name for text in texts for name in _METRIC_RE.findall(text)}


def test_every_metric_the_deploy_files_name_exists_in_a_live_scrape(
    cluster: Cluster, workload: dict[str, Any]
) -> None:
    # the quota series exist for roles with a quota: give one to a role nobody runs in (a limit
    # and a guarantee of the smallest quantity, which holds back nothing the workload needs)
    from fairshare.cli import main

    base = ["quota", "--master", cluster.master.address, "--role", "idle"]
    assert main([*base, "--guarantee", "cpus:0.001", "--limit", "cpus:1"]) == 0
    try:
        master = scrape(cluster.metrics["master"])
    finally:
        assert main([*base, "--clear"]) == 0
    agent = scrape(cluster.metrics["agent0"])
    names = deploy_metric_names()
    assert len(names) >= 10
    missing = sorted(names - master - agent)
    assert missing == [], f"named in deploy/ but exported by no daemon: {missing}"
    assert not any(name.endswith("_created") for name in master | agent)
