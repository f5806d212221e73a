"""The hand-off of a detached run to its follower (issue 24, item 4): what goes on the
follower's standard input comes back whole, the token and the TLS files included (paths made
absolute: the follower outlives the command's working directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fairshare.transport import ClientSecurity

from client_commands.detached import HandOff, log_path


def test_a_hand_off_survives_its_trip_through_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    security = ClientSecurity(
        ca=Path("ca.pem"), cert=Path("me.pem"), key=Path("me-key.pem"), token="me:secret"
    )
    handoff = HandOff(
        master="a:1,b:2",
        framework_id="fw-1",
        name="nightly",
        role="eng/dev",
        weight=2.0,
        failover_timeout=604800.0,
        shape="cpus:1;mem:64",
        count=2,
        command="echo hi",
        tasks={"nightly-1": "RUNNING", "nightly-2": "STARTING"},
        security=HandOff.security_of(security),
    )
    back = HandOff.from_json(handoff.to_json())
    assert back == handoff
    restored = back.client_security()
    assert restored.ca == tmp_path / "ca.pem" and restored.key == tmp_path / "me-key.pem"
    assert restored.token == "me:secret" and restored.cert == tmp_path / "me.pem"
    assert "\n" not in handoff.to_json()  # one line on the follower's stdin
    assert log_path("fw-1").name == "fairshare-run-fw-1.log"
