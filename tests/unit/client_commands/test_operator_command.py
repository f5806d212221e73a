"""``fairshare agents``: flags, exit codes and the calls it makes (against an in-process server)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from fairshare.cli import main
from fairshare.v1 import operator_pb2, operator_pb2_grpc


class _Recorder(operator_pb2_grpc.OperatorServiceServicer):
    """Records the maintenance calls; ids starting with ``ag-x`` are unknown."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def _check(self, ids: list[str], context: grpc.ServicerContext) -> None:
        unknown = [i for i in ids if i.startswith("ag-x")]
        if unknown:
            context.abort(grpc.StatusCode.NOT_FOUND, f"agent {unknown[0]!r} is not connected")

    def DeactivateAgents(
        self, request: operator_pb2.DeactivateAgentsRequest, context: grpc.ServicerContext
    ) -> operator_pb2.DeactivateAgentsResponse:
        self._check(list(request.agent_ids), context)
        self.calls.append(("deactivate", list(request.agent_ids)))
        return operator_pb2.DeactivateAgentsResponse()

    def ReactivateAgents(
        self, request: operator_pb2.ReactivateAgentsRequest, context: grpc.ServicerContext
    ) -> operator_pb2.ReactivateAgentsResponse:
        self._check(list(request.agent_ids), context)
        self.calls.append(("reactivate", list(request.agent_ids)))
        return operator_pb2.ReactivateAgentsResponse()

    def DrainAgent(
        self, request: operator_pb2.DrainAgentRequest, context: grpc.ServicerContext
    ) -> operator_pb2.DrainAgentResponse:
        self._check([request.agent_id], context)
        grace = (
            request.deadline.ToTimedelta().total_seconds() if request.HasField("deadline") else None
        )
        self.calls.append(("drain", [request.agent_id, str(grace)]))
        state = operator_pb2.GetStateResponse.Agent.State
        if request.agent_id == "ag-idle":
            return operator_pb2.DrainAgentResponse(state=state.STATE_DRAINED)
        response = operator_pb2.DrainAgentResponse(state=state.STATE_DRAINING)
        if grace is not None:
            response.deadline.FromSeconds(1_800_000_000)
        return response


@pytest.fixture
def server() -> Iterator[tuple[str, _Recorder]]:
    recorder = _Recorder()  # type: ignore[abstract]  # the other methods answer UNIMPLEMENTED
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    operator_pb2_grpc.add_OperatorServiceServicer_to_server(recorder, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    yield f"127.0.0.1:{port}", recorder
    grpc_server.stop(None)


def test_deactivate_and_reactivate_send_every_id_in_one_call(
    server: tuple[str, _Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    address, recorder = server
    assert main(["agents", "--master", address, "--deactivate", "ag-1", "ag-2"]) == 0
    assert main(["agents", "--master", address, "--reactivate", "ag-1", "ag-2"]) == 0
    assert recorder.calls == [("deactivate", ["ag-1", "ag-2"]), ("reactivate", ["ag-1", "ag-2"])]
    out = capsys.readouterr().out.splitlines()
    assert out == ["deactivated 2 agent(s): ag-1 ag-2", "reactivated 2 agent(s): ag-1 ag-2"]


def test_an_unknown_agent_exits_1_with_the_masters_reason(
    server: tuple[str, _Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    address, recorder = server
    assert main(["agents", "--master", address, "--reactivate", "ag-1", "ag-xyz"]) == 1
    err = capsys.readouterr().err
    assert "NOT_FOUND" in err and "ag-xyz" in err
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--master", "nohost", "--deactivate", "ag-1"], "--master 'nohost': "),
        (["--master", "127.0.0.1:99999", "--deactivate", "ag-1"], "--master '127.0.0.1:99999': "),
        (["--master", "127.0.0.1:5050", "--deactivate", "ag-1", ""], "--deactivate: "),
        (["--master", "127.0.0.1:5050", "--reactivate", " "], "--reactivate: "),
        (["--master", "127.0.0.1:5050", "--drain", " "], "--drain: "),
        (["--master", "127.0.0.1:5050", "--drain", "ag-1", "--deadline=-5s"], "--deadline: "),
        (["--master", "127.0.0.1:5050", "--drain", "ag-1", "--deadline", "soon"], "--deadline: "),
        (["--master", "127.0.0.1:5050", "--deadline", "5s"], "--deadline: only with --drain"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agents", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fairshare agents: {flag}")


@pytest.mark.parametrize(
    "argv",
    [
        ["--master", "127.0.0.1:5050", "--deactivate"],  # no id
        ["--master", "127.0.0.1:5050", "--deactivate", "a", "--reactivate", "b"],  # both
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["agents", *argv])
    assert raised.value.code == 2


def test_an_unreachable_master_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "--master", "127.0.0.1:1", "--deactivate", "ag-1"]) == 1
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_the_master_comes_from_the_environment_without_the_flag(
    server: tuple[str, _Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, recorder = server
    monkeypatch.setenv("FAIRSHARE_MASTER", address)
    assert main(["agents", "--deactivate", "ag-1"]) == 0
    monkeypatch.setenv("FAIRSHARE_MASTER", "127.0.0.1:1")
    monkeypatch.setenv("FAIRSHARE_AGENTS_MASTER", address)  # the command's own variable wins
    assert main(["agents", "--reactivate", "ag-1"]) == 0
    assert recorder.calls == [("deactivate", ["ag-1"]), ("reactivate", ["ag-1"])]


def test_drain_sends_the_deadline_and_says_what_happens(
    server: tuple[str, _Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24, item 11: ``--drain ID [--deadline D]``."""
    address, recorder = server
    assert main(["agents", "--master", address, "--drain", "ag-1", "--deadline", "10m"]) == 0
    assert main(["agents", "--master", address, "--drain", "ag-2"]) == 0
    assert main(["agents", "--master", address, "--drain", "ag-idle"]) == 0
    assert main(["agents", "--master", address, "--drain", "ag-xyz"]) == 1
    assert recorder.calls == [("drain", ["ag-1", "600.0"]), ("drain", ["ag-2", "None"]),
                              ("drain", ["ag-idle", "None"])]  # fmt: skip
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("draining agent ag-1: it is offered to nobody; its tasks still")
    assert "2027-01-15 08:00:00Z" in lines[0]
    assert "its tasks may run to their end" in lines[1]
    assert lines[2].startswith("agent ag-idle is DRAINED")
    assert "NOT_FOUND" in err and "ag-xyz" in err
