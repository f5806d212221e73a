"""Role paths (``eng/dev``) on real processes: ``fairshare weights --role eng/dev`` against a real
master (set, listed, durable across a restart; a malformed path refused by the master's own
check too), an ACL rule on the subtree ``eng/*`` (a principal sets weights of ``eng/dev`` and
below, PERMISSION_DENIED for ``sci`` and ``eng``; frameworks subscribe in ``eng/dev``), and role
weights kept by path in etcd (the HA masters' registry).

Masters start on port 0 through ``master_factory`` (``test_weights``) or ``start_secure_master``
with tokens and an ACL file (``test_authorization``); ``reap_processes`` kills them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon
from fairshare.cli import main
from fairshare.credentials import entry_toml, hash_secret, new_secret
from fairshare.etcd import leader_key
from fairshare.master_target import EtcdTarget
from fairshare.transport import ClientSecurity
from fairshare.v1 import operator_pb2
from faults import restart_master
from secure import Pki, channel, start_secure_master
from wire_fakes import FrameworkConn, get_state
from wire_fakes import operator as operator_stub

from master.ha.etcd_thread import EtcdThread
from master.model import FrameworkInfo
from master.registry.etcd_store import EtcdRegistry

ACL = """
permissive = false

[[register_frameworks]]
principals = ["team"]
roles = ["eng/*"]

[[set_weights]]
principals = ["lead"]
roles = ["eng/*"]

[[set_weights]]
principals = ["ops"]
roles = "ANY"

[[view_state]]
principals = ["ops", "lead"]
"""
PRINCIPALS = ("team", "lead", "ops")


def test_weights_of_a_role_path_are_set_listed_and_kept(
    master_factory: Callable[..., Daemon], capsys: pytest.CaptureFixture[str]
) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS)
    base = ["weights", "--master", master.address]
    with grpc.insecure_channel(master.address) as opened:
        framework = FrameworkConn(opened, "ci", role="eng/dev")
        assert main([*base, "--role", "eng/dev", "--set", "3"]) == 0
        assert capsys.readouterr().out.splitlines() == ["set role eng/dev  3"]
        assert main([*base, "--role", "eng/dev/ci", "--set", "0.5"]) == 0
        capsys.readouterr()
        assert main(base) == 0
        listed = ["role eng/dev  3", "role eng/dev/ci  0.5"]
        assert capsys.readouterr().out.splitlines() == listed
        [shown] = [f for f in get_state(opened).frameworks if f.framework_info.name == "ci"]
        assert shown.framework_info.role == "eng/dev"
        assert shown.framework_info.framework_id == framework.id
        with pytest.raises(grpc.RpcError) as refused:  # the master's own check, not the CLI's
            request = operator_pb2.SetWeightRequest(role="eng//dev", weight=2.0)
            operator_stub(opened).SetWeight(request, timeout=10)
        error: Any = refused.value
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "role 'eng//dev' has an empty segment" in error.details()
    master = restart_master(master, *DEFAULT_MASTER_FLAGS)
    assert main(["weights", "--master", master.address]) == 0
    assert capsys.readouterr().out.splitlines() == listed  # kept in the registry by path


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[Daemon, Pki, dict[str, Path]]]:
    """A master with tokens for ``PRINCIPALS`` and the ACL above; each principal's token file."""
    pki = Pki(tmp_path / "pki")
    tokens = {p: f"{p}:{new_secret()}" for p in PRINCIPALS}
    credentials = tmp_path / "credentials.toml"
    credentials.write_text(
        "\n".join(entry_toml(p, hash_secret(t.partition(":")[2])) for p, t in tokens.items())
    )
    acls = tmp_path / "acls.toml"
    acls.write_text(ACL)
    files = {}
    for principal, token in tokens.items():
        files[principal] = tmp_path / f"{principal}.token"
        files[principal].write_text(token + "\n")
    flags = ("--credentials", str(credentials), "--acls", str(acls))
    master = start_secure_master(tmp_path / "master", pki, *flags, mutual=False)
    yield master, pki, files
    assert "Traceback" not in master.log()


def test_a_subtree_rule_lets_a_principal_weigh_and_subscribe_below_eng_only(
    secured: tuple[Daemon, Pki, dict[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    master, pki, files = secured

    def weights(who: str, *flags: str) -> tuple[int, str]:
        code = main(["weights", "--master", master.address, "--tls-ca", str(pki.ca.cert),
                     "--token-file", str(files[who]), *flags])  # fmt: skip
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    assert weights("lead", "--role", "eng/dev", "--set", "3") == (0, "set role eng/dev  3\n")
    assert weights("lead", "--role", "eng/dev/ci", "--set", "2")[0] == 0
    for outside in ("sci", "eng", "*", "engineering/dev"):
        code, said = weights("lead", "--role", outside, "--set", "2")
        assert code == 1 and "PERMISSION_DENIED" in said, (outside, said)
    assert weights("ops", "--role", "sci", "--set", "1.5")[0] == 0  # ANY

    security = ClientSecurity(ca=pki.ca.cert, token=files["team"].read_text().strip())
    with channel(master.address, security) as team:
        framework = FrameworkConn(team, "ci", role="eng/dev")  # register_frameworks eng/*
        for role in ("eng", "sci", "*"):
            with pytest.raises(grpc.RpcError) as refused:
                FrameworkConn(team, f"in-{role}", role=role)
            denied: Any = refused.value
            assert denied.code() == grpc.StatusCode.PERMISSION_DENIED, role
        # a framework's weight is authorized by its role: eng/dev is inside eng/*
        assert weights("lead", "--framework", framework.id, "--set", "4")[0] == 0
        code, listed = weights("lead")
        assert code == 0
        assert listed.splitlines() == [
            "role eng/dev  3",
            "role eng/dev/ci  2",
            "role sci  1.5",
            f"framework {framework.id}  4",
        ]


def test_role_paths_round_trip_in_etcd(etcd_url: str, tmp_path: Path) -> None:
    """What one term writes by path, the next term reads back (``test_etcd_registry``'s way)."""
    etcd = EtcdThread(EtcdTarget.parse(etcd_url), timeout=2.0)
    try:
        first = _etcd_registry(etcd, _new_term(etcd, b"one"))
        first.load(_dir(tmp_path / "m1"))
        first.set_weight("role", "batch", 2.0)
        first.set_weight("role", "eng", 1.0)
        first.set_weight("role", "eng/dev", 3.0)
        first.set_weight("role", "eng/dev/ci", 0.5)
        first.put_framework(
            FrameworkInfo(framework_id="fw-1", name="ci", role="eng/dev/ci", weight=1.0), 100.0
        )
        first.set_weight("role", "eng", None)  # its own key only: the paths below stay
        second = _etcd_registry(etcd, _new_term(etcd, b"two"))
        second.load(_dir(tmp_path / "m2"))
        assert second.role_weights == {"batch": 2.0, "eng/dev": 3.0, "eng/dev/ci": 0.5}
        assert second.frameworks["fw-1"].spec.role == "eng/dev/ci"
    finally:
        etcd.stop()


def _new_term(etcd: EtcdThread, value: bytes) -> int:
    key = leader_key(etcd.client.target)

    async def put() -> int:
        await etcd.client.call(lambda client: client.delete(key))
        await etcd.client.call(lambda client: client.put(key, value))
        found: Any = await etcd.client.call(lambda client: client.get(key))
        return int(found.create_revision)

    return etcd.run(put(), 10)


def _etcd_registry(etcd: EtcdThread, epoch: int) -> EtcdRegistry:
    return EtcdRegistry(etcd.client.target, etcd.client, etcd.run, epoch, 2.0)


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
