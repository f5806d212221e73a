"""The role tree in every operator view, live: a real master and agent, two ``fairshare run``
frameworks in roles ``eng/dev`` and ``sci``, ``eng`` weighed 2 with ``fairshare weights``.

``fairshare roles --json``, ``fairshare status --json``, ``/api/v1/roles`` and ``/metrics`` all
show ``eng/dev``, ``sci`` and their parent ``eng`` with the same numbers: the weight, the share
and weighted share, the frameworks, the RUNNING tasks and the resources of each subtree. The
views are read once the cluster is settled (the tasks running, no offer outstanding); as they
are read one after the other, the comparison is polled (bounded) until one round agrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from daemons import ROOT, Client, Daemon, daemon_env, fairshare_status, wait_for
from prometheus_client.parser import text_string_to_metric_families

SETTLE = 30.0
MIB = 1048576
TENANTS = (("dev", "eng/dev", "cpus:1;mem:1024", 2), ("lab", "sci", "cpus:1;mem:2048", 1))


def fairshare(*argv: str) -> subprocess.CompletedProcess[str]:
    """``fairshare *argv`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def http_get(address: str, path: str) -> str:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as answer:
        assert answer.status == 200, path
        body: str = answer.read().decode("utf-8")
    return body


def roles_json(master: Daemon) -> dict[str, Any]:
    done = fairshare("roles", "--master", master.address, "--json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def role_metrics(master: Daemon) -> dict[tuple[str, str, str], float]:
    """``(metric, role, resource or "")`` -> value, for the ``fairshare_role_*`` samples."""
    text = http_get(master.metrics_address, "/metrics")
    return {
        (s.name, s.labels["role"], s.labels.get("resource", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("fairshare_role_")
    }


def settled(master: Daemon) -> dict[str, Any] | None:
    """``fairshare status --json`` once every tenant runs its tasks and no offer is out."""
    document = fairshare_status(master.address)
    running = {f["name"]: f["tasks"].get("RUNNING", 0) for f in document["frameworks"]}
    wanted = {name: count for name, _, _, count in TENANTS}
    return document if running == wanted and not document["offers"] else None


Round = tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[tuple[str, str, str], float]]


def one_round(master: Daemon) -> Round | None:
    """``roles --json``, ``status --json``, ``/api/v1/roles`` and the role metrics, when the
    three documents agree (a round that straddles a change is read again)."""
    roles = roles_json(master)
    status = fairshare_status(master.address)
    api = json.loads(http_get(master.metrics_address, "/api/v1/roles"))
    metrics = role_metrics(master)
    if not roles["roles"] == status["roles"] == api["roles"]:
        return None
    return roles, status, api, metrics


def test_roles_status_http_and_metrics_show_the_same_tree(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    done = fairshare("weights", "--master", master.address, "--role", "eng", "--set", "2")
    assert done.returncode == 0, done.stderr
    for name, role, task, count in TENANTS:
        clients(
            "-m", "fairshare.cli", "run", "--master", master.address, "--name", name,
            "--role", role, "--task", task, "--count", str(count),
        )  # fmt: skip
    agent_factory(master, 1, "cpus:4;mem:8192")
    wait_for(lambda: settled(master), SETTLE, "dev running 2 tasks and lab 1, no offer out")
    roles, status, api, metrics = wait_for(
        lambda: one_round(master), SETTLE, "roles, status and /api/v1/roles to agree"
    )

    assert roles["hierarchy"] == status["hierarchy"] == api["hierarchy"] == "hdrf"
    by_path = {role["role"]: role for role in roles["roles"]}
    assert list(by_path) == ["eng", "eng/dev", "sci"]  # pre-order: a parent before its children
    eng, dev, sci = by_path["eng"], by_path["eng/dev"], by_path["sci"]
    assert (eng["weight"], dev["weight"], sci["weight"]) == (2.0, 1.0, 1.0)
    assert (eng["parent"], dev["parent"], sci["parent"]) == (None, "eng", None)
    assert (eng["frameworks"], eng["subtree_frameworks"], eng["running_tasks"]) == (0, 1, 2)
    assert (dev["frameworks"], dev["subtree_frameworks"], dev["running_tasks"]) == (1, 1, 2)
    assert (sci["frameworks"], sci["subtree_frameworks"], sci["running_tasks"]) == (1, 1, 1)
    assert eng["allocated"] == dev["allocated"] == {"cpus": 2.0, "mem": 2048.0}
    assert sci["allocated"] == {"cpus": 1.0, "mem": 2048.0}
    for role in roles["roles"]:
        assert role["weighted_share"] == pytest.approx(role["share"] / role["weight"])
    assert dev["share"] == pytest.approx(0.5) and sci["share"] == pytest.approx(0.25)
    assert eng["weighted_share"] == pytest.approx(eng["share"] / 2)
    # the subtrees' sums are those of the frameworks status lists
    frameworks = {f["name"]: f for f in status["frameworks"]}
    assert dev["allocated"] == frameworks["dev"]["allocated"]
    assert sci["allocated"] == frameworks["lab"]["allocated"]
    assert api["totals"] == {
        "roles": 3,
        "frameworks": 2,
        "running_tasks": 3,
        "allocated": {"cpus": 3.0, "mem": 4096.0},
    }

    assert {key[1] for key in metrics} == {"eng", "eng/dev", "sci"}
    for path, role in by_path.items():
        assert metrics[("fairshare_role_share", path, "")] == pytest.approx(role["weighted_share"])
        assert metrics[("fairshare_role_weight", path, "")] == role["weight"]
        for resource, amount in role["allocated"].items():
            base = amount * MIB if resource == "mem" else amount
            assert metrics[("fairshare_role_allocated", path, resource)] == base, (path, resource)

    table = fairshare("roles", "--master", master.address)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["eng", "eng/dev", "sci"]
    assert lines[2].startswith("  eng/dev")
    bad = fairshare("roles", "--master", master.address, "--role", "eng//dev")
    assert bad.returncode == 2 and "fairshare roles: --role 'eng//dev'" in bad.stderr
