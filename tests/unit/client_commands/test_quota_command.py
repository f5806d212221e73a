"""``fairshare quota``: flags, exit codes, the calls it makes and what it prints (against an
in-process server)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from fairshare.cli import main
from fairshare.resources import ResourceVector
from fairshare.v1 import operator_pb2 as pb
from fairshare.v1 import operator_pb2_grpc
from fairshare.wire import resources_from_pb, resources_to_pb


def res(text: str) -> object:
    return resources_to_pb(ResourceVector.parse(text))


class _Recorder(operator_pb2_grpc.OperatorServiceServicer):
    """Records SetQuota calls; role ``busy`` holds more than any limit, ``nope`` is refused."""

    def __init__(self) -> None:
        self.calls: list[pb.SetQuotaRequest] = []
        self.listed = pb.GetQuotasResponse()

    def SetQuota(
        self, request: pb.SetQuotaRequest, context: grpc.ServicerContext
    ) -> pb.SetQuotaResponse:
        if request.role == "nope":
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "no rule lets you update_quota")
        if request.role == "busy" and not request.force:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "set it with force")
        if request.role == "bad":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "guarantee is above its limit")
        self.calls.append(request)
        if request.clear:
            return pb.SetQuotaResponse()
        quota = pb.Quota(role=request.role, guarantee=request.guarantee, consumed=res("cpus:3"))
        if request.HasField("limit"):
            quota.limit.CopyFrom(request.limit)
        return pb.SetQuotaResponse(quota=quota, rescinded_offers=2 if request.force else 0)

    def GetQuotas(
        self, request: pb.GetQuotasRequest, context: grpc.ServicerContext
    ) -> pb.GetQuotasResponse:
        return self.listed


@pytest.fixture
def server() -> Iterator[tuple[str, _Recorder]]:
    recorder = _Recorder()  # type: ignore[abstract]  # the other methods answer UNIMPLEMENTED
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    operator_pb2_grpc.add_OperatorServiceServicer_to_server(recorder, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    yield f"127.0.0.1:{port}", recorder
    grpc_server.stop(None)


def test_set_force_and_clear_send_one_call_each(
    server: tuple[str, _Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    address, recorder = server
    base = ["quota", "--master", address, "--role"]
    assert main([*base, "eng", "--guarantee", "cpus:16;mem:65536", "--limit", "cpus:32"]) == 0
    assert main([*base, "busy", "--limit", "cpus:1", "--force"]) == 0
    assert main([*base, "eng", "--clear"]) == 0
    first, forced, cleared = recorder.calls
    assert resources_from_pb(first.guarantee) == ResourceVector.parse("cpus:16;mem:65536")
    assert resources_from_pb(first.limit) == ResourceVector.parse("cpus:32")
    assert not first.force and not first.clear
    assert forced.force and not forced.HasField("guarantee")
    assert cleared.clear and not cleared.HasField("limit") and not cleared.HasField("guarantee")
    assert capsys.readouterr().out.splitlines() == [
        "set the quota of eng: guarantee cpus:16;mem:65536, limit cpus:32 (consumed cpus:3)",
        "set the quota of busy: guarantee -, limit cpus:1 (consumed cpus:3)",
        "rescinded 2 offer(s) of its subtree; no task was killed",
        "cleared the quota of eng",
    ]


def test_the_list_shows_every_quota_and_says_overcommitted(
    server: tuple[str, _Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    address, recorder = server
    assert main(["quota", "--master", address]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ROLE  GUARANTEE  LIMIT  CONSUMED  RESERVED",
        "(no quotas or reservations set)",
    ]
    recorder.listed = pb.GetQuotasResponse(
        quotas=[
            pb.Quota(role="eng", guarantee=res("cpus:16"), limit=res("cpus:32"), consumed=res("")),
            pb.Quota(
                role="eng/dev",
                limit=res("cpus:8"),
                consumed=res("cpus:2;mem:64"),
                reserved=res("cpus:1"),
            ),
        ],
        guaranteed=res("cpus:16"),
        total=res("cpus:12;mem:16384"),
        overcommitted=True,
    )
    assert main(["quota", "--master", address]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ROLE     GUARANTEE  LIMIT    CONSUMED       RESERVED",
        "eng      cpus:16    cpus:32  -              -",
        "eng/dev  -          cpus:8   cpus:2;mem:64  cpus:1",
        "overcommitted: the top-level guarantees (cpus:16) exceed the pool (cpus:12;mem:16384);"
        " not every guarantee can be met until agents join",
    ]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--guarantee", "cpus:1"], "--guarantee/--limit/--force/--clear: name the role"),
        (["--clear"], "--guarantee/--limit/--force/--clear: name the role"),
        (["--role", "eng"], "--role: say --guarantee and/or --limit, or --clear"),
        (["--role", " ", "--clear"], "--role: the role is empty"),
        (["--role", "a b", "--clear"], "--role: role 'a b' is malformed"),
        (["--role", "eng", "--clear", "--limit", "cpus:1"], "--clear: removes the quota"),
        (["--role", "eng", "--guarantee", "cpus:1", "--force"], "--force: only with --limit"),
        (["--role", "eng", "--guarantee", "cpus:x"], "--guarantee: "),
        (["--role", "eng", "--guarantee", "cpus:0;mem:1"], "--guarantee: cpus is 0"),
        (["--role", "eng", "--limit", ""], "--limit: names no resource"),
        (["--role", "eng", "--limit", "cpus"], "--limit: "),
    ],
)
def test_bad_flags_exit_2_naming_the_flag_and_send_nothing(
    server: tuple[str, _Recorder],
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    says: str,
) -> None:
    address, recorder = server
    assert main(["quota", "--master", address, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fairshare quota: {says}"), err
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("role", "code", "says"),
    [
        ("busy", 1, "FAILED_PRECONDITION: set it with force"),
        ("nope", 1, "PERMISSION_DENIED: no rule lets you update_quota"),
        ("bad", 2, "INVALID_ARGUMENT: guarantee is above its limit"),
    ],
)
def test_a_refusing_master_exits_with_its_code_and_reason(
    server: tuple[str, _Recorder],
    capsys: pytest.CaptureFixture[str],
    role: str,
    code: int,
    says: str,
) -> None:
    address, recorder = server
    assert main(["quota", "--master", address, "--role", role, "--limit", "cpus:1"]) == code
    assert says in capsys.readouterr().err
    assert recorder.calls == []


def test_an_unreachable_master_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quota", "--master", "127.0.0.1:1"]) == 1
    assert "UNAVAILABLE" in capsys.readouterr().err
