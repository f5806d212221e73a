"""deploy/compose/compose.yaml starts (issue 24, item 2): each service's command line run as its
container would run it, without a container engine.

The fairshare image's entrypoint is ``fairshare`` (deploy/container/Containerfile), so a
service's ``command`` is the argument list of ``fairshare``; the Prometheus image's is
``/usr/bin/prometheus`` (deploy/container/build-base.sh). What compose gives a container is
put in by hand, and only that: its network (a service name is 127.0.0.1 here, and each
container's ports, ``--port`` and ``--metrics-port``, are free ports of this host, since the
containers each have their own), its volumes (a directory under the test's ``tmp_path``).
Every other argument is passed as written, ``--host 0.0.0.0`` included: the master and the
three agents must serve (the compose file once had them exit 2 on the bind rule and loop under
``restart: unless-stopped``), the agents register with their resources and attributes,
``fairshare status`` (the compose file's ``exec`` line) answers, and Prometheus, with the
compose file's scrape config, scrapes all four daemons (skipped when Debian's ``prometheus``
is not installed).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemons import ROOT, STARTED, Daemon, daemon_env, fairshare_status, wait_for

COMPOSE = ROOT / "deploy" / "compose"
CONTAINERFILE = ROOT / "deploy" / "container" / "Containerfile"
FAIRSHARE_IMAGE = "localhost/fairshare:latest"
PROMETHEUS = shutil.which("prometheus")
SETTLE = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((COMPOSE / "compose.yaml").read_text())["services"]
    return services


def _entrypoint() -> list[str]:
    found = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", CONTAINERFILE.read_text(), re.MULTILINE)
    assert found, "the Containerfile names no ENTRYPOINT"
    entrypoint: list[str] = json.loads(found.group(1))
    return entrypoint


class Network:
    """What compose's network and volumes give the containers, here."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports: dict[tuple[str, str], int] = {}  # (service, container port) -> host port

    def port(self, service: str, port: str) -> int:
        return self.ports.setdefault((service, port), _free_port())

    def address(self, text: str) -> str:
        """``service:port`` as reached from another container."""
        service, _, port = text.rpartition(":")
        return f"127.0.0.1:{self.port(service, port)}"

    def volume(self, service: str, path: str) -> str:
        assert path.startswith("/var/lib/fairshare"), path  # the image's data directory
        return str(self.tmp / service / path.removeprefix("/var/lib/fairshare").lstrip("/"))

    def argv(self, service: str, command: list[str]) -> list[str]:
        """The service's ``fairshare`` arguments, with this host's ports, addresses and
        directories in place of the containers'."""
        argv: list[str] = []
        args = iter(command)
        for arg in args:
            argv.append(arg)
            if arg in ("--port", "--metrics-port"):
                argv.append(str(self.port(service, next(args))))
            elif arg == "--master":
                argv.append(self.address(next(args)))
            elif arg == "--work-dir":
                argv.append(self.volume(service, next(args)))
        return argv


def _start(network: Network, service: str, spec: dict[str, Any]) -> Daemon:
    assert spec["image"] == FAIRSHARE_IMAGE
    argv = network.argv(service, [str(arg) for arg in spec["command"]])
    kind, rest = argv[0], argv[1:]
    work_dir = Path(rest[rest.index("--work-dir") + 1])
    daemon = Daemon(kind, rest, work_dir, f"{kind}.addr")
    daemon.wait_ready(SETTLE)
    return daemon


def test_compose_services_start_as_their_containers_would(tmp_path: Path) -> None:
    assert _entrypoint()[-1] == "fairshare"  # a service's command is fairshare's arguments
    services = _services()
    network = Network(tmp_path)
    daemons = {name: _start(network, name, services[name]) for name in ("master",)}
    agents = sorted(n for n, spec in services.items() if spec.get("command", [""])[0] == "agent")
    assert agents == ["agent-1", "agent-2", "agent-3"]
    daemons.update({name: _start(network, name, services[name]) for name in agents})
    master = daemons["master"]
    state = wait_for(
        lambda: (s := fairshare_status(master.address)) and len(s["agents"]) == 3 and s,
        SETTLE,
        "the three agents registered",
    )
    by_name = {agent["hostname"]: agent for agent in state["agents"]}
    for name in agents:
        command = [str(arg) for arg in services[name]["command"]]
        resources = dict(
            part.split(":") for part in command[command.index("--resources") + 1].split(";")
        )
        total = by_name[name]["resources"]["total"]
        assert {key: float(value) for key, value in resources.items()} == total
        attributes = command[command.index("--attributes") + 1]
        assert by_name[name]["attributes"] == dict([attributes.split(":")])
    time.sleep(2)  # nothing exits a moment later either (restart: unless-stopped would loop)
    for name, daemon in daemons.items():
        assert daemon.proc.poll() is None, f"{name} exited:\n{daemon.log()}"
    header = (COMPOSE / "compose.yaml").read_text()
    exec_line = re.search(r"exec master fairshare (status --master \S+)", header)
    assert exec_line, "the compose file's header shows how to reach the master"
    status = exec_line.group(1).split()
    status[-1] = network.address(f"master:{status[-1].rsplit(':', 1)[1]}")
    done = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *status], cwd=ROOT, env=daemon_env(),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "agent-3" in done.stdout, done.stderr
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (Debian: apt-get install prometheus)")
    _scrape_like_the_prometheus_service(network, services["prometheus"], tmp_path)


class _Process:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _scrape_like_the_prometheus_service(
    network: Network, spec: dict[str, Any], tmp_path: Path
) -> None:
    """The Prometheus service's command line and mounted files, its targets reached by their
    service names (put in as this host's addresses)."""
    assert PROMETHEUS is not None
    etc = tmp_path / "prometheus-etc"
    etc.mkdir()
    mounts = {}
    for volume in spec["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = (COMPOSE / source).resolve()
    config = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text())
    for job in config["scrape_configs"]:
        for group in job["static_configs"]:
            group["targets"] = [network.address(target) for target in group["targets"]]
    for target, source in mounts.items():
        local = etc / Path(target).name
        if target == "/etc/prometheus/prometheus.yml":
            local.write_text(yaml.safe_dump(config))
        else:
            shutil.copy(source, local)
    listen = _free_port()
    argv = []
    for arg in (str(a) for a in spec["command"]):
        name, _, value = arg.partition("=")
        if name == "--config.file":
            value = str(etc / Path(value).name)
        elif name == "--storage.tsdb.path":
            value = str(tmp_path / "tsdb")
        elif name == "--web.listen-address":
            value = f"127.0.0.1:{listen}"
        argv.append(f"{name}={value}")
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen([PROMETHEUS, *argv], stdout=log, stderr=subprocess.STDOUT)
    STARTED.append(_Process(process))

    def targets_up() -> bool:
        assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
        try:
            url = f"http://127.0.0.1:{listen}/api/v1/targets"
            with urllib.request.urlopen(url, timeout=2) as answer:
                targets = json.loads(answer.read())["data"]["activeTargets"]
        except OSError:
            return False
        return len(targets) == 4 and all(t["health"] == "up" for t in targets)

    wait_for(targets_up, 60, "the compose Prometheus scraping the master and the three agents")
