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
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from daemons import ROOT, Client, Daemon, daemon_env, fairshare_status, wait_for
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
        # The agents heartbeat between the two reads, and each snapshot turns the monotonic
        # time last heard into wall-clock time anew (microseconds apart).
        heard = theirs.pop("last_heard")
        assert {k: ours[k] for k in theirs} == theirs
        assert ours["last_heard"] >= heard - 0.01
        assert ours["attributes"] == {"rack": "r1"}
    (framework,) = state["frameworks"]
    assert {k: framework[k] for k in expected["frameworks"][0]} == expected["frameworks"][0]
    assert framework["running"] == 3 and framework["wanted"] == 3
    assert framework["weighted_share"] == framework["dominant_share"] / framework["weight"]
    # A task shows RUNNING as soon as its agent says so (the latest state rides on the STARTING
    # update); the RUNNING update itself may land between the two reads, and with it a later
    # ``updated_at``. Everything else is the same, and the time only moves forward.
    assert len(state["tasks"]) == len(expected["tasks"])
    for ours, theirs in zip(state["tasks"], expected["tasks"], strict=True):
        updated = theirs.pop("updated_at")
        assert {k: ours[k] for k in theirs} == theirs
        assert ours["updated_at"] >= updated

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


def post_json(address: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    """``(status, JSON answer)`` of ``POST http://address/path`` with a JSON body."""
    request = urllib.request.Request(
        f"http://{address}{path}", json.dumps(body).encode(), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_completed_tasks_logs_last_status_and_maintenance_over_http(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    """Issue 24, item 10 (the data the dashboard shows): a command task that ended and its
    framework are in /api/v1/completed; its stdout and stderr come from its agent through
    /api/v1/logs; a running task's last status says who reported it and when; an agent is
    deactivated by a POST that carries the dashboard's header, and by nothing else."""
    agent_factory(master, 1, "cpus:4;mem:8192")
    script = 'echo "hello from $FAIRSHARE_TASK_ID"; echo second; echo oops >&2'
    done = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "run", "--master", master.address, "--name", "hi",
         "--task", "cpus:0.2;mem:64", "--command", script],
        cwd=ROOT, env=daemon_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    http = master.metrics_address
    completed = get_json(http, "/api/v1/completed")
    (task,) = completed["tasks"]
    assert (task["task_id"], task["state"], task["command"]) == ("hi-1", "FINISHED", True)
    assert task["exit_code"] == 0 and task["ended_at"] > 0 and task["source"] == "AGENT"
    (ended,) = completed["frameworks"]
    assert ended["name"] == "hi" and ended["framework_id"] == task["framework_id"]
    logs = "/api/v1/logs?task_id=hi-1"
    assert get(http, logs) == (200, "text/plain; charset=utf-8", "hello from hi-1\nsecond\n")
    assert get(http, f"{logs}&file=stderr&framework_id={task['framework_id']}")[2] == "oops\n"
    assert get(http, f"{logs}&tail=1")[2] == "second\n"
    status, _, body = get(http, "/api/v1/logs?task_id=nobody-1")
    assert status == 404 and "no sandbox of task 'nobody-1'" in json.loads(body)["error"]
    assert get(http, f"{logs}&tail=-1")[0] == 400

    run_framework(clients, master, "batch", "cpus:1;mem:1024", 1)
    wait_for(lambda: get_json(http, "/api/v1/tasks?state=RUNNING")["total"] == 1, SETTLE, "running")
    agent_id = fairshare_status(master.address)["agents"][0]["id"]
    (running,) = get_json(http, f"/api/v1/tasks?agent_id={agent_id}")["tasks"]
    assert running["source"] == "AGENT" and running["updated_at"] > 0
    assert running["command"] is False
    assert get_json(http, "/api/v1/tasks?agent_id=nope")["total"] == 0

    body = {"action": "deactivate", "agent_ids": [agent_id]}
    plain = {"Content-Type": "application/json"}
    assert post_json(http, "/api/v1/maintenance", body, plain)[0] == 403
    assert fairshare_status(master.address)["agents"][0]["state"] == "ACTIVE"
    assert get(http, "/api/v1/maintenance")[0] == 405  # no state change on GET
    dashboard = {**plain, "X-Fairshare-Request": "dashboard"}
    assert post_json(http, "/api/v1/maintenance", body, dashboard) == (200, body)
    assert fairshare_status(master.address)["agents"][0]["state"] == "DEACTIVATED"


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
