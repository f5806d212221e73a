"""TLS on every port (issue 13): a real master, agent and ``fairshare run`` over mutual TLS, and
every handshake that must fail failing (wrong CA either way, no client certificate,
plaintext), with nothing registered by the refused clients."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import ROOT, Client, Daemon, daemon_env, reachable_work_dir, wait_for
from fairshare.transport import INSECURE, ClientSecurity
from secure import Pki, fairshare_cli, get_state, start_secure_master


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


def _status(address: str, pki: Pki) -> dict[str, object]:
    done = fairshare_cli("status", "--master", address, "--json", *pki.flags("operator"))
    assert done.returncode == 0, done.stderr
    document: dict[str, object] = json.loads(done.stdout)
    return document


@pytest.mark.parametrize("workers", ["0", "2"], ids=["one-process", "io-workers"])
def test_master_agent_and_run_over_mutual_tls(tmp_path: Path, pki: Pki, workers: str) -> None:
    master = start_secure_master(tmp_path / "master", pki, "--io-workers", workers)
    argv = ["--master", master.address, "--resources", "cpus:4;mem:8192", "--port", "0"]
    argv += ["--metrics-port", "0", "--work-dir", str(tmp_path / "agent"), *pki.flags("agent-1")]
    agent = Daemon("agent", argv, tmp_path / "agent", "agent.addr")
    agent.wait_ready()
    run = Client(
        ["-m", "fairshare.cli", "run", "--master", master.address, "--name", "web",
         "--task", "cpus:1;mem:128", "--count", "2", *pki.flags("batch")],
        tmp_path / "run.log",
    )  # fmt: skip

    def two_running() -> bool:
        tasks = _status(master.address, pki)["frameworks"]
        return any(f["tasks"].get("RUNNING") == 2 for f in tasks)  # type: ignore[attr-defined]

    wait_for(two_running, 30, "two tasks RUNNING over mutual TLS")
    log = master.log()
    assert "tls=mutual" in log and "authentication=certificate" in log
    assert 'reachable="loopback only"' in log
    # The agent's own port serves TLS too: its health answers over TLS only.
    agent_health = fairshare_cli(
        "status", "--master", agent.address, "--json", *pki.flags("operator")
    )
    assert agent_health.returncode == 1 and "not a fairshare master" in agent_health.stderr
    plain = fairshare_cli("status", "--master", agent.address, "--json")
    assert plain.returncode == 1 and "serves TLS and this client does not" in plain.stderr
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(20) == 0, run.log()
    assert agent.stop() == 0
    assert master.stop() == 0


@pytest.mark.parametrize("workers", ["0", "2"], ids=["one-process", "io-workers"])
def test_wrong_ca_no_certificate_and_plaintext_refused_at_handshake(
    tmp_path: Path, pki: Pki, workers: str
) -> None:
    master = start_secure_master(tmp_path / "master", pki, "--io-workers", workers)
    other = Pki(tmp_path / "other-pki")  # another CA, with certificates of the very same names
    refused = {
        "client trusts another CA": other.security("operator"),
        "client certificate of another CA": ClientSecurity(
            ca=pki.ca.cert, cert=other.files("operator")[0], key=other.files("operator")[1]
        ),
        "no client certificate": pki.security(None),
        "plaintext": INSECURE,
    }
    for why, security in refused.items():
        with pytest.raises(grpc.RpcError) as caught:
            get_state(master.address, security)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, why  # type: ignore[attr-defined]
    # An agent whose certificate another CA signed never registers: the master knows no agent.
    argv = ["--master", master.address, "--resources", "cpus:1;mem:512", "--port", "0"]
    argv += ["--metrics-port", "0", "--work-dir", str(tmp_path / "agent")]
    intruder = Daemon("agent", [*argv, *other.flags("agent-1")], tmp_path / "agent", "agent.addr")
    intruder.wait_ready()
    wait_for(lambda: "UNAVAILABLE" in intruder.log(), 20, "the intruder's refused connection")
    state = get_state(master.address, pki.security("operator"))
    assert not state.agents and not state.frameworks
    assert intruder.stop() == 0
    assert master.stop() == 0


def test_flags_that_do_not_fit_are_refused_naming_them(tmp_path: Path, pki: Pki) -> None:
    cert, key = pki.files("master")
    for flags, named in (
        (["--tls-cert", str(cert)], "--tls-cert and --tls-key"),
        (["--tls-ca", str(pki.ca.cert)], "--tls-ca"),
        (["--host", "0.0.0.0"], "--allow-insecure"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key)], "--tls-cert"),
    ):
        done = fairshare_cli("master", "--port", "0", "--work-dir", str(tmp_path / "m"), *flags)
        assert done.returncode == 2, (flags, done.stderr)
        assert named in done.stderr, (flags, done.stderr)
    done = fairshare_cli("status", "--master", "127.0.0.1:1", "--tls-cert", str(cert))
    assert done.returncode == 2 and "--tls-ca" in done.stderr, done.stderr


def test_up_tls_runs_a_mutual_tls_cluster(tmp_path: Path) -> None:
    base = reachable_work_dir(tmp_path / "up")  # its command task's user reaches its sandbox
    up = subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", "up", "--tls", "--agents", "1",
         "--resources", "cpus:2;mem:2048", "--port", "0", "--metrics-port", "0",
         "--work-dir", str(base)],
        cwd=ROOT, env=daemon_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        addr = base / "master" / "master.addr"
        address = wait_for(lambda: addr.exists() and addr.read_text().strip(), 30, "the master")
        ca = base / "tls"
        flags = ["--tls-ca", str(ca / "ca.pem"), "--tls-cert", str(ca / "operator.pem")]
        flags += ["--tls-key", str(ca / "operator.key")]

        def one_agent() -> bool:
            done = fairshare_cli("status", "--master", address, "--json", *flags)
            return done.returncode == 0 and len(json.loads(done.stdout)["agents"]) == 1

        wait_for(one_agent, 30, "the agent registered over mutual TLS")
        assert fairshare_cli("status", "--master", address).returncode == 1  # plaintext: refused
        context = _dashboard_with_the_browser_bundle(base)
        # issue 24, item 10: the dashboard's log route reads a task's output from its agent
        # over mutual TLS (the master presents its own certificate to the agent)
        run = fairshare_cli("run", "--master", address, "--name", "hi", "--task",
                            "cpus:0.2;mem:64", "--command", "echo hello over tls", *flags,
                            timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr
        dashboard = (base / "master" / "metrics.addr").read_text().strip()
        url = f"https://{dashboard}/api/v1/logs?task_id=hi-1"
        with urllib.request.urlopen(url, context=context, timeout=30) as answer:
            assert answer.read() == b"hello over tls\n"
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0, output
    assert "mutual TLS; try: fairshare status" in output
    assert f"import {base / 'tls' / 'operator.p12'} (no password)" in output


def _dashboard_with_the_browser_bundle(base: Path) -> ssl.SSLContext:
    """The PKCS#12 bundle ``up --tls`` made for browsers opens the dashboard: what a browser
    would take from it (certificate, key, no password) is what the HTTPS request presents
    (returned: a context presenting it)."""
    read = subprocess.run(
        ["openssl", "pkcs12", "-in", str(base / "tls" / "operator.p12"), "-passin", "pass:",
         "-nodes", "-clcerts"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    identity = base / "browser.pem"
    identity.write_text(read.stdout)
    context = ssl.create_default_context(cafile=str(base / "tls" / "ca.pem"))
    context.load_cert_chain(identity)
    dashboard = (base / "master" / "metrics.addr").read_text().strip()
    with urllib.request.urlopen(f"https://{dashboard}/", context=context, timeout=10) as page:
        assert page.status == 200 and b"fairshare" in page.read().lower()
    return context


def test_an_exposed_master_says_so_in_one_line_with_its_true_bind_address(
    master_factory: Any,
) -> None:
    master = master_factory("--host", "0.0.0.0", "--allow-insecure")
    line = wait_for(
        lambda: next((x for x in master.log().splitlines() if "security.exposure" in x), ""),
        what="the exposure line",
    )
    assert "WARNING" in line and 'reachable="all interfaces"' in line, line
    assert "grpc=0.0.0.0:" in line and "tls=off" in line and "authentication=off" in line, line
    assert "bind=0.0.0.0:" in master.log()


def test_every_tls_mistake_is_named_in_one_line(
    tmp_path: Path, pki: Pki, master_factory: Any
) -> None:
    """Issue 24, item 5: plaintext against TLS, no client certificate, a foreign CA either way,
    TLS against plaintext and a command pointed at the dashboard port each get one line naming
    the mistake (not gRPC's "Socket closed"), and gRPC's own lines reach no one's stderr;
    ``fairshare logs`` too (the second newcomer pass found it printing gRPC's text)."""
    master = start_secure_master(tmp_path / "master", pki)
    other = Pki(tmp_path / "other")  # another cluster's CA
    cert, key = other.files("operator")
    plain = master_factory("--port", "0", "--metrics-port", "0")
    ca = ("--tls-ca", str(pki.ca.cert))
    cases = [
        (master.address, (), "serves TLS and this client does not: give --tls-ca"),
        (master.address, ca, "requires a client certificate: give --tls-cert/--tls-key"),
        (master.address, ("--tls-ca", str(other.ca.cert)), "is not signed by --tls-ca"),
        (master.address, (*ca, "--tls-cert", str(cert), "--tls-key", str(key)),
         "does not trust the client certificate --tls-cert"),
        (plain.address, pki.flags("operator"), "does not serve TLS: leave out --tls-ca"),
        (master.metrics_address, pki.flags("operator"), "is an HTTP port"),
        (plain.metrics_address, (), "is an HTTP port"),
    ]  # fmt: skip
    for address, flags, named in cases:
        for command, *words in (("status",), ("agents",), ("logs", "x-1")):
            done = fairshare_cli(command, *words, "--master", address, *flags)
            assert done.returncode == 1, (command, address, flags, done.stdout)
            lines = done.stderr.splitlines()
            assert len(lines) == 1 and named in lines[0], (command, address, flags, done.stderr)
            assert lines[0].startswith(f"fairshare {command}: ")
    started = time.monotonic()
    run = fairshare_cli("run", "--master", master.address, "--name", "x", "--task", "cpus:1")
    assert run.returncode == 1 and time.monotonic() - started < 20  # not --connect-timeout's 30
    assert (
        run.stderr.splitlines()
        == [
            line
            for line in run.stderr.splitlines()
            if "serves TLS and this client does not" in line
        ]
        and run.stderr
    ), run.stderr
    assert "ssl_transport_security" not in master.log()  # gRPC's own lines: errors only


def test_the_sdk_reads_the_tls_variables_and_names_a_tls_mistake_at_once(
    tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, item 6: a framework started where ``fairshare status`` works (the
    ``FAIRSHARE_TLS_*`` variables) connects the same way; without them, against a TLS master,
    it fails within seconds naming the mistake instead of after its timeouts."""
    from framework_sdk import Framework, FrameworkInfo, UnavailableError

    master = start_secure_master(tmp_path / "master", pki)
    cert, key = pki.files("operator")

    async def subscribe() -> str:
        async with Framework.connect(master.address, FrameworkInfo(name="sdk")) as fw:
            return fw.framework_id

    for name in ("FAIRSHARE_TLS_CA", "FAIRSHARE_TLS_CERT", "FAIRSHARE_TLS_KEY"):
        monkeypatch.delenv(name, raising=False)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="serves TLS and this client does not"):
        asyncio.run(subscribe())
    assert time.monotonic() - started < 10
    monkeypatch.setenv("FAIRSHARE_TLS_CA", str(pki.ca.cert))
    monkeypatch.setenv("FAIRSHARE_TLS_CERT", str(cert))
    monkeypatch.setenv("FAIRSHARE_TLS_KEY", str(key))
    assert asyncio.run(subscribe()).startswith("fw-")


def test_a_client_certificate_cannot_pose_as_a_master_or_an_agent(tmp_path: Path, pki: Pki) -> None:
    """Issue 23, item 6: every certificate ``up --tls`` minted carried serverAuth and named
    localhost, so any principal could serve as a master or an agent to the others. A client's
    certificate now carries clientAuth only: a server presenting it is refused by every client,
    while a daemon's certificate (serverAuth, naming the host) serves and a client's still
    identifies its principal to the real master."""
    impostor_work = tmp_path / "impostor"
    cert, key = pki.files("batch")  # a principal's client certificate
    argv = ["--port", "0", "--metrics-port", "0", "--work-dir", str(impostor_work),
            "--tls-cert", str(cert), "--tls-key", str(key)]  # fmt: skip
    impostor = Daemon("master", argv, impostor_work, "master.addr")
    try:
        impostor.wait_ready()
        done = fairshare_cli("status", "--master", impostor.address, "--json",
                             *pki.flags("operator"))  # fmt: skip
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        with pytest.raises(grpc.RpcError) as refused:
            get_state(impostor.address, pki.security("operator"))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # its HTTP port too: a TLS client checking the purpose refuses the handshake
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        with pytest.raises(urllib.error.URLError) as https:
            urllib.request.urlopen(f"https://{impostor.metrics_address}/health", context=context)
        assert "certificate" in str(https.value.reason).lower()
    finally:
        impostor.kill()
    master = start_secure_master(tmp_path / "master", pki)  # a daemon's certificate serves
    state = get_state(master.address, pki.security("batch"))  # and batch's is still a client's
    assert state.master_id
    assert master.stop() == 0
