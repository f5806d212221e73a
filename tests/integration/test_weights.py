"""``fairshare weights`` against a real master: operator weights of roles and frameworks, their
precedence in GetState, bad input, and their durability across a master restart."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon
from fairshare.cli import main
from faults import restart_master
from wire_fakes import FrameworkConn, get_state


def weight_of(master: Daemon, name: str) -> float:
    with grpc.insecure_channel(master.address) as channel:
        state = get_state(channel)
    [framework] = [f for f in state.frameworks if f.framework_info.name == name]
    return framework.weight


def test_weights_set_list_clear_and_survive_a_restart(
    master_factory: Callable[..., Daemon], capsys: pytest.CaptureFixture[str]
) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS)
    with grpc.insecure_channel(master.address) as channel:
        fw = FrameworkConn(
            channel, "etl", role="batch", weight=2.0, failover_timeout={"seconds": 60}
        )
        fid = fw.subscribed.framework_id
        base = ["weights", "--master", master.address]
        assert main([*base, "--role", "batch", "--set", "3"]) == 0
        # under the role tree (hdrf, the default) the role's weight weighs the role among its
        # siblings; the framework keeps the weight it subscribed with inside its role
        assert weight_of(master, "etl") == 2.0
        assert main([*base, "--framework", fid, "--set", "5"]) == 0
        assert weight_of(master, "etl") == 5.0  # the operator's weight for the framework
        assert main([*base, "--role", "web", "--set", "1.5"]) == 0
        assert main([*base, "--role", "web", "--clear"]) == 0
        capsys.readouterr()
        assert main(base) == 0
        assert capsys.readouterr().out.splitlines() == [
            "role batch  3",
            f"framework {fid}  5",
        ]
        master = restart_master(master, *DEFAULT_MASTER_FLAGS)
        assert main(["weights", "--master", master.address]) == 0
        assert capsys.readouterr().out.splitlines() == ["role batch  3", f"framework {fid}  5"]
        assert weight_of(master, "etl") == 5.0  # recovered before the framework is back
        assert main(["weights", "--master", master.address, "--framework", fid, "--clear"]) == 0
        assert weight_of(master, "etl") == 2.0
    master.kill()


def test_flat_copies_a_role_weight_onto_its_frameworks(
    master_factory: Callable[..., Daemon],
) -> None:
    """``--hierarchy flat`` keeps the per-framework order of before the role tree: a role's
    operator weight is every one of its frameworks' weight unless the operator set its own."""
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--hierarchy", "flat")
    with grpc.insecure_channel(master.address) as channel:
        fw = FrameworkConn(channel, "etl", role="batch", weight=2.0)
        fid = fw.subscribed.framework_id
        base = ["weights", "--master", master.address]
        assert main([*base, "--role", "batch", "--set", "3"]) == 0
        assert weight_of(master, "etl") == 3.0  # the role's weight over the subscribed one
        assert main([*base, "--framework", fid, "--set", "5"]) == 0
        assert weight_of(master, "etl") == 5.0  # the framework's over its role's
        assert main([*base, "--framework", fid, "--clear"]) == 0
        assert weight_of(master, "etl") == 3.0


@pytest.mark.parametrize(
    ("flags", "code", "says"),
    [
        (["--set", "2"], 2, "--set/--clear: name the target"),
        (["--role", "batch"], 2, "--role/--framework: say --set W or --clear"),
        (["--role", "batch", "--set", "0"], 2, "--set: 0.0 is not a weight"),
        (["--role", "batch", "--set", "nan"], 2, "--set: nan is not a weight"),
        (["--role", "a b", "--set", "2"], 2, "--role: role 'a b' is malformed"),
        (["--framework", "fw-nobody", "--set", "2"], 1, "NOT_FOUND"),
    ],
)
def test_bad_weights_exit_with_a_message_and_change_nothing(
    master: Daemon,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    code: int,
    says: str,
) -> None:
    assert main(["weights", "--master", master.address, *flags]) == code
    assert says in capsys.readouterr().err
    assert main(["weights", "--master", master.address]) == 0
    assert capsys.readouterr().out.startswith("(no weights set")  # nothing was stored
