"""deploy/prometheus/prometheus-secured.yml scrapes a secured cluster (issue 24, item 2): a real
Prometheus with that file (its CA, client certificate and targets put in for this host's) scrapes
a master serving mutual TLS with the ACL of deploy/systemd/acls.toml and an agent ``agent-1``
serving TLS, as the principal ``prometheus``; the example ACL loads, and the file the systemd
settings name as the ACL example is there. Skipped when Debian's ``prometheus`` is absent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemons import ROOT, STARTED, start_agent, wait_for
from secure import Pki, start_secure_master
from test_prometheus import PROMETHEUS, Prometheus

from master.acl import Acl

DEPLOY = ROOT / "deploy"
SECURED = DEPLOY / "prometheus" / "prometheus-secured.yml"
ACLS = DEPLOY / "systemd" / "acls.toml"


def test_the_acl_example_the_systemd_settings_name_is_there_and_loads() -> None:
    settings = (DEPLOY / "systemd" / "fairshare.toml").read_text()
    assert 'acls = "/etc/fairshare/acls.toml"' in settings and "an example sits beside" in settings
    acl = Acl.load(ACLS)
    scraper = acl.decide("view_state", "prometheus")
    assert scraper.allowed and scraper.rule.level == "full"  # /metrics needs the full view
    assert acl.decide("register_agents", "agent-1").allowed
    assert not acl.decide("register_agents", "batch").allowed
    assert acl.decide("register_frameworks", "batch", "batch/nightly").allowed
    assert not acl.decide("register_frameworks", "web", "batch").allowed


class _Stop:
    def __init__(self, server: Prometheus) -> None:
        self.server = server

    def kill(self) -> None:
        if self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait()


def _config(pki: Pki, master: str, agent: str) -> dict[str, Any]:
    """The deploy file with this test's CA, Prometheus certificate and targets."""
    config: dict[str, Any] = yaml.safe_load(SECURED.read_text())
    cert, key = pki.files("prometheus")
    files = {"ca_file": pki.ca.cert, "cert_file": cert, "key_file": key}
    targets = {"fairshare-master": [master], "fairshare-agent": [agent]}
    for job in config["scrape_configs"]:
        assert job["scheme"] == "https"
        tls = job["tls_config"]
        assert set(tls) == set(files), tls  # the CA and the client certificate, nothing else
        job["tls_config"] = {name: str(path) for name, path in files.items()}
        job["static_configs"][0]["targets"] = targets[job["job_name"]]
    config["global"]["scrape_interval"] = "1s"
    config["global"]["scrape_timeout"] = "1s"
    config["rule_files"] = [str(DEPLOY / "prometheus" / "rules.yml")]
    return config


def test_the_secured_scrape_config_scrapes_a_secured_master_and_agent(tmp_path: Path) -> None:
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (Debian: apt-get install prometheus)")
    pki = Pki(tmp_path / "pki")
    master = start_secure_master(tmp_path / "master", pki, "--acls", str(ACLS))
    agent = start_agent(
        master.address, tmp_path / "agent", *pki.flags("agent-1"), resources="cpus:2;mem:1024"
    )
    agent.wait_ready()
    work = tmp_path / "prometheus"
    work.mkdir()
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump(_config(pki, master.metrics_address, agent.metrics_address)))
    shutil.copy(DEPLOY / "prometheus" / "rules.yml", work / "rules.yml")
    server = Prometheus(PROMETHEUS, config, work)
    STARTED.append(_Stop(server))
    wait_for(server.ready, 30, "prometheus ready")

    def scraped() -> bool:
        up = {sample["metric"]["job"]: sample["value"][1] for sample in server.query("up")}
        return up == {"fairshare-master": "1", "fairshare-agent": "1"}

    wait_for(scraped, 60, "both secured targets up")
    assert server.query("fairshare_build_info"), "the master's metrics reached Prometheus"
    assert server.query("fairshare_agent_build_info"), "the agent's metrics reached Prometheus"
