"""Each daemon's one HTTP port (docs/architecture.md §8, issue 16 item 8 and the JSON API),
real processes.

The master's metrics port serves ``/metrics`` (Prometheus exposition) only at ``/metrics``,
``/health`` as a real JSON health answer, the dashboard at ``/`` and the JSON API under
``/api/v1/``; every other path is 404. An agent's serves ``/metrics`` and ``/health`` only. Idle
clients holding connections open do not stop the server answering. The API shows what
``fairshare status --json`` shows.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from daemons import Client, Daemon, fairshare_status, wait_for
from test_live_cluster import SETTLE, run_framework


def get(address: str, path: str, timeout: float = 10.0) -> tuple[int, str, str]:
    """``(status, content type, body)`` of ``GET http://address/path``."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as answer:
            body = answer.read().decode("utf-8")
            return answer.status, answer.headers.get("Content-Type", ""), body
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode("utf-8")


def get_json(address: str, path: str) -> Any:
    status, kind, body = get(address, path)
    assert status == 200 and kind.startswith("application/json"), (status, kind, body)
    return json.loads(body)


def test_master_port_serves_metrics_health_dashboard_api_and_404_elsewhere(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1)
    http = master.metrics_address
    status, kind, body = get(http, "/metrics")
    assert status == 200 and kind.startswith("text/plain") and "fairshare_agents{" in body
    health = get_json(http, "/health")
    assert health["status"] == "SERVING" and health["daemon"] == "master"
    status, kind, page = get(http, "/")
    assert status == 200 and kind.startswith("text/html")
    assert "<title>fairshare</title>" in page and "/api/v1/state" in page
    assert "src=" not in page and "https://" not in page  # no CDN: everything is inlined
    for path in (
        "/api/v1/state",
        "/api/v1/frameworks",
        "/api/v1/agents",
        "/api/v1/tasks",
        "/api/v1/roles",
    ):
        assert get(http, path)[0] == 200, path
    for path in (
        "/nope",
        "/metrics/x",
        "/health/x",
        "/api/v1/nope",
        "/api/v2/state",
        "/index.html",
    ):
        status, _, body = get(http, path)
        assert status == 404, path
        assert "fairshare_" not in body  # the metrics page is served at /metrics only
    assert get(http, "/api/v1/tasks?limit=x")[0] == 400
    assert get(http, "/api/v1/tasks?state=SLEEPING")[0] == 400


def test_agent_port_serves_metrics_and_health_only(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1)
    http = agent.metrics_address
    assert "fairshare_agent_" in get(http, "/metrics")[2]
    health = get_json(http, "/health")
    assert health["status"] == "SERVING" and health["daemon"] == "agent"
    assert wait_for(lambda: get_json(http, "/health")["agent_id"], SETTLE, "agent id in health")
    for path in ("/", "/api/v1/state", "/nope"):
        assert get(http, path)[0] == 404, path


def test_api_shows_what_status_json_shows_and_pages_tasks(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    agent_factory(master, 2, "cpus:4;mem:8192", "--attributes", "rack:r1")
    run_framework(clients, master, "batch", "cpus:1;mem:1024", 3)

    def settled() -> dict[str, Any] | None:
        document = fairshare_status(master.address)
        frameworks = document["frameworks"]
        if len(frameworks) != 1 or frameworks[0]["tasks"].get("RUNNING") != 3:
            return None
        return document if not document["offers"] else None

    expected = wait_for(settled, SETTLE, "batch running 3 tasks")
    http = master.metrics_address
    state = get_json(http, "/api/v1/state")
    assert state["master_id"] == expected["master_id"]
    for key in ("policy", "placement", "version", "total", "used", "offered", "free"):
        assert state[key] == expected[key], key
    for ours, theirs in zip(state["agents"], expected["agents"], strict=True):
        assert {k: ours[k] for k in theirs} == theirs
        assert ours["attributes"] == {"rack": "r1"}
    (framework,) = state["frameworks"]
    assert {k: framework[k] for k in expected["frameworks"][0]} == expected["frameworks"][0]
    assert framework["running"] == 3 and framework["wanted"] == 3
    assert framework["weighted_share"] == framework["dominant_share"] / framework["weight"]
    assert [{k: t[k] for k in expected["tasks"][0]} for t in state["tasks"]] == expected["tasks"]

    page = get_json(http, "/api/v1/tasks?limit=2")
    assert page["total"] == 3 and len(page["tasks"]) == 2
    rest = get_json(http, "/api/v1/tasks?offset=2&limit=2")
    assert [t["task_id"] for t in page["tasks"] + rest["tasks"]] == [
        t["task_id"] for t in expected["tasks"]
    ]
    assert (
        get_json(http, f"/api/v1/tasks?framework_id={framework['id']}&state=running")["total"] == 3
    )
    assert get_json(http, "/api/v1/tasks?state=FINISHED")["total"] == 0
    assert [f["id"] for f in get_json(http, "/api/v1/frameworks")["frameworks"]] == [
        framework["id"]
    ]
    assert len(get_json(http, "/api/v1/agents")["agents"]) == 2
    events = [e["event"] for e in get_json(http, "/api/v1/events")["events"]]
    assert "framework.subscribed" in events and events.count("agent.registered") == 2
    history = get_json(http, "/api/v1/history")
    assert history["points"] and history["window"] == 3600


def test_idle_clients_do_not_tie_up_the_port(master: Daemon) -> None:
    host, port = master.metrics_address.rsplit(":", 1)
    idle = []
    try:
        for n in range(100):  # connected and silent, or stuck halfway through a request
            conn = socket.create_connection((host, int(port)), timeout=5)
            if n % 2:
                conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            idle.append(conn)
        started = time.monotonic()
        assert get_json(master.metrics_address, "/health")["status"] == "SERVING"
        assert get(master.metrics_address, "/metrics")[0] == 200
        assert time.monotonic() - started < 5
    finally:
        for conn in idle:
            conn.close()
