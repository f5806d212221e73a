"""The container image definition and the compose file (deploy/container, deploy/compose) agree
with each other and with the daemons' flags: the agents reach the master by its service name,
Prometheus scrapes every daemon's metrics port, Grafana is provisioned with the dashboard file
that exists and the Prometheus of the compose file. (Building and running them needs a
container engine: deploy/README.md says what was run.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_runs_a_master_three_agents_prometheus_and_grafana() -> None:
    services = load(COMPOSE / "compose.yaml")["services"]
    assert set(services) == {"master", "agent-1", "agent-2", "agent-3", "prometheus", "grafana"}
    master = services["master"]["command"]
    assert master[0] == "master" and flag(master, "--host") == "0.0.0.0"
    port, metrics = flag(master, "--port"), flag(master, "--metrics-port")
    for name in ("agent-1", "agent-2", "agent-3"):
        command = services[name]["command"]
        assert command[0] == "agent" and flag(command, "--master") == f"master:{port}"
        assert flag(command, "--host") == "0.0.0.0" and flag(command, "--hostname") == name
    scrape = {
        job["job_name"]: [t for group in job["static_configs"] for t in group["targets"]]
        for job in load(COMPOSE / "prometheus.yml")["scrape_configs"]
    }
    assert scrape["fairshare-master"] == [f"master:{metrics}"]
    assert scrape["fairshare-agent"] == [
        f"{name}:{flag(services[name]['command'], '--metrics-port')}"
        for name in ("agent-1", "agent-2", "agent-3")
    ]


def test_grafana_is_provisioned_with_the_dashboard_and_the_compose_prometheus() -> None:
    services = load(COMPOSE / "compose.yaml")["services"]
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in services["grafana"]["volumes"])
    local = "../grafana/fairshare-dashboard.json"
    assert (COMPOSE / local).resolve() == (DEPLOY / "grafana" / "fairshare-dashboard.json")
    assert (COMPOSE / local).exists()
    provider = load(COMPOSE / "grafana/provisioning/dashboards/fairshare.yml")["providers"][0]
    assert (
        str(Path(mounts["../grafana/fairshare-dashboard.json"]).parent)
        == (provider["options"]["path"])
    )
    (source,) = load(COMPOSE / "grafana/provisioning/datasources/prometheus.yml")["datasources"]
    listen = next(a for a in services["prometheus"]["command"] if a.startswith("--web.listen"))
    assert source["url"] == f"http://prometheus:{listen.rsplit(':', 1)[1]}"
    prometheus_mounts = dict(v.rsplit(":", 2)[:2] for v in services["prometheus"]["volumes"])
    for local in prometheus_mounts:
        assert (COMPOSE / local).exists(), local


def test_the_image_runs_the_fairshare_command_and_its_scripts_are_executable() -> None:
    containerfile = (DEPLOY / "container" / "Containerfile").read_text(encoding="utf-8")
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "fairshare"]' in containerfile
    assert "--no-index" in containerfile  # no network needed at build time
    for script in ("build.sh", "build-base.sh"):
        assert os.access(DEPLOY / "container" / script, os.X_OK), script
    image = load(COMPOSE / "compose.yaml")["services"]["master"]["image"]
    assert image == "localhost/fairshare:latest"
    assert "localhost/fairshare:latest" in (DEPLOY / "container" / "build.sh").read_text()
