"""``fairshare agent`` settings: bad flags exit 2 naming the flag (real ``python -m fairshare.cli``
subprocesses), and the precedence flags > ``FAIRSHARE_*`` environment > TOML file > defaults.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fairshare.resources import ResourceVector
from fairshare.settings import SettingsError, resource_vector

from agent.config import resolve
from agent.host_resources import host_resources
from agent.settings import parse_attributes

ROOT = Path(__file__).resolve().parents[3]


def run_agent(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "agent", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={**clean, **(env or {})},
    )


BAD = [
    (["--resources", "cpus:abc"], "--resources", "'abc'"),
    (["--resources", "cpus:-1"], "--resources", "negative"),
    (["--resources", ""], "--resources", "no resources"),
    (["--resources", "cpus:1;cpus:2"], "--resources", "twice"),
    (["--resources", "CPUS:1"], "--resources", "lower case"),
    (["--resources", "cpus"], "--resources", "NAME:VALUE"),
    (["--attributes", "rack"], "--attributes", "NAME:VALUE"),
    (["--attributes", "rack:r1;rack:r2"], "--attributes", "twice"),
    (["--attributes", "Rack:r1"], "--attributes", "lower case"),
    (["--attributes", "rack:"], "--attributes", "empty value"),
    (["--attributes", "rack:a:b"], "--attributes", "NAME:VALUE"),
    (["--status-update-retry", "soon"], "--status-update-retry", "duration"),
]


@pytest.mark.parametrize(("argv", "flag", "fragment"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_flag_exits_2_naming_the_flag(
    tmp_path: Path, argv: list[str], flag: str, fragment: str
) -> None:
    done = run_agent("--master", "127.0.0.1:1", "--work-dir", str(tmp_path), *argv)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(f"fairshare agent: {flag} ")
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "agent.addr").exists()


def test_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    done = run_agent(
        "--work-dir",
        str(tmp_path),
        env={
            "FAIRSHARE_MASTER": "127.0.0.1:1",
            "FAIRSHARE_AGENT_ATTRIBUTES": "zone",
        },
    )
    assert done.returncode == 2
    assert done.stderr.startswith("fairshare agent: FAIRSHARE_AGENT_ATTRIBUTES 'zone': ")


def test_the_master_defaults_to_the_local_one() -> None:
    assert resolve(args(), {}).master == "127.0.0.1:5050"
    assert resolve(args(), {"FAIRSHARE_MASTER": "m:7"}).master == "m:7"
    assert resolve(args(), {"FAIRSHARE_AGENT_MASTER": "a:8", "FAIRSHARE_MASTER": "m:7"}).master == (
        "a:8"
    )


def test_bad_master_and_port_exit_2() -> None:
    done = run_agent("--master", "nohostport")
    assert done.returncode == 2 and done.stderr.startswith("fairshare agent: --master 'nohostport'")
    done = run_agent("--master", "h:1", "--port", "http")
    assert done.returncode == 2 and "--port" in done.stderr  # argparse names it


def test_bad_config_file_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[agent]\nmaster = "127.0.0.1:1"\nresourcez = "cpus:1"\n')
    done = run_agent("--config", str(config))
    assert done.returncode == 2
    assert "unknown key 'resourcez'" in done.stderr
    config.write_text("not = [toml")
    assert "not valid TOML" in run_agent("--config", str(config)).stderr


# -- precedence (in process) ----------------------------------------------------------------------


def args(**flags: object) -> argparse.Namespace:
    return argparse.Namespace(**flags)


def test_defaults() -> None:
    settings = resolve(args(master="m:1"), {})
    assert settings.master == "m:1"
    assert settings.resources is None  # probe this host
    assert settings.attributes == ()
    assert (settings.host, settings.port, settings.metrics_port) == ("127.0.0.1", 0, 9101)
    assert settings.work_dir == Path("./fairshare-agent")
    assert (settings.log_format, settings.log_level) == ("text", "INFO")
    assert settings.status_update_retry == 1.0
    assert settings.hostname


def test_flags_beat_environment_beats_toml(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(
        '[master]\nport = 5050\n\n[agent]\nmaster = "toml:1"\nresources = "cpus:1"\n'
        'attributes = "rack:toml"\nport = 7001\nwork-dir = "/toml"\nstatus_update_retry = 0.25\n'
    )
    env = {
        "FAIRSHARE_CONFIG": str(config),
        "FAIRSHARE_AGENT_RESOURCES": "cpus:2",
        "FAIRSHARE_AGENT_PORT": "7002",
        "FAIRSHARE_PORT": "7003",  # not a shared setting: not this scheme's variable
        "FAIRSHARE_LOG_LEVEL": "debug",
    }
    settings = resolve(args(resources="cpus:3", master=None, port=None), env)
    assert settings.resources == ResourceVector.parse("cpus:3")  # flag
    assert settings.port == 7002  # environment
    assert settings.master == "toml:1"  # file
    assert settings.attributes == (("rack", "toml"),)
    assert settings.work_dir == Path("/toml")
    assert settings.status_update_retry == 0.25
    assert settings.log_level == "DEBUG"  # shared variable


def test_shared_top_level_keys_and_source_names_in_errors(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('master = "m:1"\n[agent]\nport = "x"\n')
    with pytest.raises(SettingsError, match=r"^port in .*agent.toml 'x': .*port number"):
        resolve(args(config=str(config)), {})
    config.write_text('master = "m:1"\n[agent]\nport = 7\n')
    assert resolve(args(config=str(config)), {}).master == "m:1"  # shared, at the top level
    config.write_text('master = "m:1"\nport = 7\n')  # the agent's port belongs in [agent]
    with pytest.raises(SettingsError, match=r"unknown top-level key 'port'"):
        resolve(args(config=str(config)), {})
    with pytest.raises(SettingsError, match=r"^FAIRSHARE_LOG_FORMAT 'xml'"):
        resolve(args(master="m:1"), {"FAIRSHARE_LOG_FORMAT": "xml"})
    with pytest.raises(SettingsError, match="cannot read"):
        resolve(args(config=str(tmp_path / "missing.toml")), {})


def test_parse_attributes_and_resources() -> None:
    assert parse_attributes(" rack : r1 ; zone:a;") == (("rack", "r1"), ("zone", "a"))
    assert parse_attributes("") == ()
    assert resource_vector("cpus:0.5;mem:512;gpus:1") == ResourceVector(cpus=0.5, mem=512, gpus=1)


def test_host_resources_probe(tmp_path: Path) -> None:
    found = host_resources(tmp_path)
    assert found["cpus"] >= 1
    assert found["mem"] >= 1
    assert found["disk"] >= 1
    assert found.names() == {"cpus", "mem", "disk"}


def test_trusting_the_master_and_verifying_clients_are_separate(tmp_path: Path) -> None:
    """Issue 23, item 6: ``--tls-ca`` (the master's CA) made the agent's ports demand client
    certificates too; ``--tls-client-ca`` is now the only setting that does."""
    from fairshare.local_ca import DAEMON, LocalCa

    from agent.config import load_security

    ca = LocalCa.create(tmp_path / "pki")
    mine = ca.issue("agent-1", DAEMON)
    tls = {"tls_ca": str(ca.cert), "tls_cert": str(mine.cert), "tls_key": str(mine.key)}
    trusting = load_security(resolve(args(master="m:1", **tls), {}))
    assert trusting.master.ca == ca.cert and trusting.server.mode == "tls"
    assert trusting.server.ca is None and trusting.authenticator.mode == "off"
    verifying = load_security(resolve(args(master="m:1", tls_client_ca=str(ca.cert), **tls), {}))
    assert verifying.server.mode == "mutual" and verifying.authenticator.mode == "certificate"
    with pytest.raises(SettingsError, match="--tls-client-ca"):
        resolve(args(master="m:1", tls_client_ca=str(ca.cert)), {})  # no --tls-cert
    with pytest.raises(SettingsError, match="--tls-client-ca or --credentials"):
        resolve(args(master="m:1", host="0.0.0.0", **tls), {})  # exposed, nobody verified
