"""Metrics end to end: a real master, two real agents and ``fairshare run`` frameworks; /metrics
scraped over HTTP and parsed with prometheus_client's parser, compared with
``fairshare status --json``; ``promtool check metrics`` on a master's and an agent's scrape.

The cluster is compared only once it is settled (the running counts expected, no offer
outstanding) and the status read before and after the scrape agree, so no check depends on
timing luck.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from daemons import Daemon, wait_for
from fairshare.v1 import agent_pb2, agent_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from test_live_cluster import (
    SETTLE,
    Client,
    by_name,
    declared,
    run_framework,
    running,
    settled,
    status,
)

Samples = list[Sample]


def scrape_text(daemon: Daemon) -> str:
    """GET http://<metrics.addr>/metrics."""
    url = f"http://{daemon.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text: str = response.read().decode("utf-8")
    return text


def scrape(daemon: Daemon) -> Samples:
    families = text_string_to_metric_families(scrape_text(daemon))
    return [sample for family in families for sample in family.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def labelled(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples if s.name == name}


def consistent(master: Daemon) -> tuple[dict[str, Any], Samples] | None:
    """A status and a master scrape of the same settled state (status equal before and after)."""
    before = status(master)
    samples = scrape(master)
    after = status(master)
    keep = ("name", "tasks", "dominant_share")
    same = [{k: f[k] for k in keep} for f in before["frameworks"]] == [
        {k: f[k] for k in keep} for f in after["frameworks"]
    ]
    if same and not before["offers"] and not after["offers"]:
        return before, samples
    return None


def refused_agent_stream(master: Daemon) -> None:
    """An agent stream whose first message is not a registration: the master ends it."""
    with grpc.insecure_channel(master.address) as channel:
        first = agent_pb2.ConnectRequest(heartbeat=agent_pb2.AgentHeartbeat())
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter([first]), timeout=10)
        with pytest.raises(grpc.RpcError) as refused:
            next(call)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_master_and_agent_metrics_agree_with_status(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    run_framework(clients, master, "alpha", "cpus:1;mem:1024", 3)
    run_framework(clients, master, "beta", "cpus:2;mem:512", 2)
    wait_for(lambda: declared(master, "alpha", "beta"), SETTLE, "alpha and beta to declare")
    agents = agent_factory(master, 2, "cpus:4;mem:8192")
    refused_agent_stream(master)  # an agent session that ended: counted with its code
    wait_for(lambda: settled(master, {"alpha": 3, "beta": 2}), SETTLE, "alpha 3 and beta 2")
    document, samples = wait_for(lambda: consistent(master), SETTLE, "a settled scrape")

    assert value(samples, "fairshare_agents", state="active") == 2
    assert value(samples, "fairshare_agents", state="unreachable") == 0
    assert value(samples, "fairshare_tasks", state="running") == sum(running(document).values())
    shares = labelled(samples, "fairshare_framework_dominant_share", "framework_id")
    for name, framework in by_name(document).items():
        assert abs(shares[framework["id"]] - framework["dominant_share"]) <= 0.01, (name, shares)
    for resource in ("cpus", "mem"):
        capacity = value(samples, "fairshare_resource_capacity", resource=resource)
        parts = [
            value(samples, "fairshare_resource_allocation", resource=resource, state=state)
            for state in ("free", "offered", "used")
        ]
        assert sum(parts) == pytest.approx(capacity)
    assert value(samples, "fairshare_resource_capacity", resource="cpus") == 8
    assert value(samples, "fairshare_resource_allocation", resource="cpus", state="used") == 7

    runs = value(samples, "fairshare_allocation_runs_total")
    assert runs > 0
    assert value(samples, "fairshare_allocation_run_duration_seconds_count") == runs
    buckets = [s for s in samples if s.name == "fairshare_allocation_run_duration_seconds_bucket"]
    assert [b.labels["le"] for b in buckets][-1] == "+Inf" and buckets[-1].value == runs
    assert all(a.value <= b.value for a, b in itertools.pairwise(buckets))
    rpcs = [s for s in samples if s.name == "fairshare_rpc_requests_total"]
    assert any(
        s.labels["method"].startswith("SchedulerService/") and s.labels["code"] == "OK"
        for s in rpcs
    ), rpcs
    assert any(
        s.labels["method"] == "AgentService/Connect" and s.labels["code"] == "INVALID_ARGUMENT"
        for s in rpcs
    ), rpcs  # the agents' own streams are open, so not counted yet

    sent = value(samples, "fairshare_offers_total", outcome="sent")
    assert sent > 0
    run_framework(clients, master, "gamma", "cpus:0.5;mem:256", 1)  # more offers to make
    wait_for(
        lambda: value(scrape(master), "fairshare_offers_total", outcome="sent") > sent,
        SETTLE,
        "offers sent to grow",
    )

    agent_samples = [scrape(agent) for agent in agents]
    for one in agent_samples:
        assert value(one, "fairshare_agent_master_connected") == 1
        assert value(one, "fairshare_agent_resource_capacity", resource="cpus") == 4
    on_agents = sum(value(one, "fairshare_agent_tasks", state="running") for one in agent_samples)
    assert on_agents >= 5  # alpha's and beta's tasks (gamma may have started one more)


def test_metrics_address_files_and_shutdown(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1)
    for daemon in (master, agent):
        host, _, port = daemon.metrics_address.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
    assert agent.stop() == 0 and not (agent.work_dir / "metrics.addr").exists()
    assert master.stop() == 0 and not (master.work_dir / "metrics.addr").exists()


def _promtool(text: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool is not None
    return subprocess.run(
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not on PATH (apt-get install -y prometheus; .ci/run installs it)",
)
def test_promtool_accepts_master_and_agent_scrapes(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    run_framework(clients, master, "alpha", "cpus:1;mem:1024", 2)
    (agent,) = agent_factory(master, 1, "cpus:4;mem:4096")
    wait_for(lambda: running(status(master)) == {"alpha": 2}, SETTLE, "alpha's 2 tasks")
    for daemon in (master, agent):
        text = scrape_text(daemon)
        assert "_created" not in text
        done = _promtool(text)
        assert done.returncode == 0, f"{daemon.kind}: {done.stdout}{done.stderr}\n{text}"


def test_master_and_agents_export_their_process_metrics(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    """Issue 24, item 12: CPU, memory and file descriptors of each daemon (prometheus_client's
    ProcessCollector), the series node_exporter users expect from any exporter."""
    (agent,) = agent_factory(master, 1, "cpus:2;mem:1024")
    for daemon in (master, agent):
        samples = scrape(daemon)
        for name in (
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ):
            assert value(samples, name) > 0, (daemon.kind, name)
        assert value(samples, "process_resident_memory_bytes") > 10 * 2**20  # a Python daemon
