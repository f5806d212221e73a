"""A port that is taken (issue 16 item 1): every daemon says which flag and why, in one line,
without a gRPC core log line; ``fairshare up`` names the failing daemon with the end of its log,
keeps the logs, and replaces a taken default port (5050, 9100) by a free one."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemons import ROOT, daemon_env

from master.commands.local_cluster import free_port_or_any


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something listens on for the test's duration."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        yield taken.getsockname()[1]


def fairshare(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--port", "--metrics-port"])
def test_master_on_a_taken_port_says_which_flag(flag: str, busy_port: int, tmp_path: Path) -> None:
    ports = {"--port": "0", "--metrics-port": "0", flag: str(busy_port)}
    done = fairshare("master", "--work-dir", str(tmp_path), *(x for p in ports.items() for x in p))
    assert done.returncode == 1
    assert f"fairshare master: {flag} {busy_port}: Address already in use" in done.stderr
    assert "add_port.cc" not in done.stderr and "Traceback" not in done.stderr
    if flag == "--metrics-port":
        assert "node_exporter" in done.stderr


def test_agent_on_a_taken_port_says_which_flag(busy_port: int, tmp_path: Path) -> None:
    done = fairshare(
        "agent", "--master", "127.0.0.1:1", "--resources", "cpus:1;mem:64", "--port",
        str(busy_port), "--metrics-port", "0", "--work-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 1
    assert f"--port {busy_port}: Address already in use" in done.stderr
    assert "add_port.cc" not in done.stderr


def test_up_names_the_failure_and_keeps_the_logs(busy_port: int, tmp_path: Path) -> None:
    base = tmp_path / "up"
    done = fairshare(
        "up", "--agents", "1", "--port", str(busy_port), "--metrics-port", "0",
        "--work-dir", str(base), "--for", "1s",
    )  # fmt: skip
    assert done.returncode == 1
    assert f"--port {busy_port}: Address already in use" in done.stderr
    assert f"logs are kept in {base}" in done.stderr
    assert "add_port.cc" not in done.stderr


def test_up_keeps_the_logs_of_a_master_that_died(tmp_path: Path) -> None:
    done = fairshare(
        "up", "--agents", "1", "--port", "0", "--metrics-port", "0",
        "--work-dir", str(tmp_path), "--for", "1s", "--policy", "drf",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # the control: a clean run works
    (tmp_path / "master").rename(tmp_path / "old-master")
    (tmp_path / "master").write_text("not a directory")  # the master's work dir: cannot start
    failed = fairshare(
        "up", "--agents", "1", "--port", "0", "--metrics-port", "0", "--work-dir", str(tmp_path)
    )
    assert failed.returncode == 1
    assert "logs are kept in" in failed.stderr and "Traceback" not in failed.stderr


def test_a_taken_default_port_is_replaced_and_a_chosen_one_is_an_error(busy_port: int) -> None:
    port, note = free_port_or_any("--metrics-port", busy_port, busy_port)  # the default
    assert port == 0 and note is not None and f"{busy_port} is taken" in note
    with pytest.raises(Exception, match=f"--metrics-port {busy_port}: Address already in use"):
        free_port_or_any("--metrics-port", busy_port, 9100)
    assert free_port_or_any("--port", 0, 5050) == (0, None)
