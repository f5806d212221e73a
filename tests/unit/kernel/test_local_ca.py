"""What the local CA mints (fairshare.local_ca, issue 23 item 6): a client's certificate for
client authentication only and naming no host; a daemon's for both, naming its real names."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from fairshare.local_ca import CLIENT, DAEMON, LocalCa, LocalCaError


def _text(cert: Path) -> str:
    done = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-text"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout


def test_a_client_certificate_is_for_client_authentication_only(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path)
    text = _text(ca.issue("batch", CLIENT).cert)
    assert "TLS Web Client Authentication" in text
    assert "TLS Web Server Authentication" not in text
    assert "Subject Alternative Name" not in text and "localhost" not in text


def test_a_daemon_certificate_serves_and_names_its_hosts(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path)
    text = _text(ca.issue("agent-1", DAEMON, hosts=("agent1.example.org", "10.1.2.3")).cert)
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in text
    for name in ("DNS:localhost", "IP Address:127.0.0.1", "DNS:agent1.example.org",
                 "IP Address:10.1.2.3", f"DNS:{socket.gethostname().lower()}"):  # fmt: skip
        assert name in text, name


def test_a_bad_usage_or_host_is_refused(tmp_path: Path) -> None:
    ca = LocalCa.create(tmp_path)
    with pytest.raises(LocalCaError, match="usage"):
        ca.issue("x", "server")  # type: ignore[arg-type]
    with pytest.raises(LocalCaError, match="host"):
        ca.issue("y", DAEMON, hosts=("bad name,DNS:evil",))
