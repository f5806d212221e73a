"""``OperatorServicer.SetQuota`` / ``GetQuotas`` over a runtime without a network: the request's
shape checked with INVALID_ARGUMENT naming the field, the runtime's refusals as their precise
codes, nothing changed on any error, and the answers' wire form."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from fairshare.v1 import common_pb2 as C
from fairshare.v1 import operator_pb2 as pb
from fairshare.wire import resources_from_pb, resources_to_pb
from test_runtime_cycle import R, agent, framework, offers_of, scenario, settle

from master.runtime import MasterRuntime
from master.service.operator import OperatorServicer


class Aborted(Exception):
    """What the fake context's ``abort`` raises."""


class Context:
    """The part of ``grpc.aio.ServicerContext`` the servicers use on errors."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted


async def call(method: Any, request: Any) -> tuple[Any, Context]:
    context = Context()
    try:
        return await method(request, context), context
    except Aborted:
        return None, context


def res(text: str) -> Any:
    return resources_to_pb(R(text))


def test_set_then_get_quotas_on_the_wire() -> None:
    async def test(runtime: MasterRuntime) -> None:
        service = OperatorServicer(runtime.operator)
        agent(runtime, "cpus:12;mem:16384")
        _, events = framework(runtime, "etl", role="eng/dev")
        await settle()
        assert offers_of(events)  # eng/dev now holds the whole agent (a coarse offer)
        request = pb.SetQuotaRequest(role="eng", guarantee=res("cpus:16;mem:65536"))
        answer, context = await call(service.SetQuota, request)
        assert context.code is None, context.details
        assert answer.quota.role == "eng" and not answer.quota.HasField("limit")
        assert resources_from_pb(answer.quota.consumed) == R("cpus:12;mem:16384")
        request = pb.SetQuotaRequest(role="sci", limit=res("cpus:4"))
        answer, _ = await call(service.SetQuota, request)
        assert resources_from_pb(answer.quota.limit) == R("cpus:4")
        listed, _ = await call(service.GetQuotas, pb.GetQuotasRequest())
        assert [q.role for q in listed.quotas] == ["eng", "sci"]
        assert resources_from_pb(listed.guaranteed) == R("cpus:16;mem:65536")
        assert resources_from_pb(listed.total) == R("cpus:12;mem:16384")
        assert listed.overcommitted
        answer, _ = await call(service.SetQuota, pb.SetQuotaRequest(role="eng", clear=True))
        assert not answer.HasField("quota") and answer.rescinded_offers == 0
        listed, _ = await call(service.GetQuotas, pb.GetQuotasRequest())
        assert [q.role for q in listed.quotas] == ["sci"] and not listed.overcommitted

    scenario(test)


BAD = [
    (pb.SetQuotaRequest(guarantee=res("cpus:1")), "INVALID_ARGUMENT", "role is empty"),
    (pb.SetQuotaRequest(role="a b", guarantee=res("cpus:1")), "INVALID_ARGUMENT", "role 'a b'"),
    (pb.SetQuotaRequest(role="eng"), "INVALID_ARGUMENT", "guarantee and limit are both unset"),
    (
        pb.SetQuotaRequest(role="eng", guarantee=res("cpus:1"), clear=True),
        "INVALID_ARGUMENT",
        "must be unset when clear",
    ),
    (
        pb.SetQuotaRequest(role="eng", limit=C.Resources(), clear=True),
        "INVALID_ARGUMENT",
        "must be unset when clear",
    ),
    (
        pb.SetQuotaRequest(role="eng", limit=C.Resources()),
        "INVALID_ARGUMENT",
        "limit names no resource",
    ),
    (
        pb.SetQuotaRequest(role="eng", guarantee=res("cpus:1"), force=True),
        "INVALID_ARGUMENT",
        "force is only for a limit",
    ),
    (
        pb.SetQuotaRequest(
            role="eng", guarantee=C.Resources(items=[{"name": "cpus", "millis": 0}])
        ),
        "INVALID_ARGUMENT",
        "guarantee: cpus is 0",
    ),
    (
        pb.SetQuotaRequest(role="eng", limit=C.Resources(items=[{"name": "cpus", "millis": -1}])),
        "INVALID_ARGUMENT",
        "limit: resource 'cpus'",
    ),
    (
        pb.SetQuotaRequest(role="eng", limit=C.Resources(items=[{"name": "CPU", "millis": 1}])),
        "INVALID_ARGUMENT",
        "limit: resource name 'CPU' is malformed",
    ),
    (
        pb.SetQuotaRequest(role="eng", guarantee=res("cpus:8"), limit=res("cpus:4")),
        "INVALID_ARGUMENT",
        "above its limit",
    ),
    (
        pb.SetQuotaRequest(role="eng/dev", guarantee=res("cpus:64")),
        "INVALID_ARGUMENT",
        "its sub-roles guarantee cpus:64",
    ),
    (pb.SetQuotaRequest(role="etl", limit=res("cpus:1")), "FAILED_PRECONDITION", "with force"),
]


@pytest.mark.parametrize(("request_", "code", "says"), BAD)
def test_bad_requests_get_precise_codes_and_change_nothing(
    request_: pb.SetQuotaRequest, code: str, says: str
) -> None:
    async def test(runtime: MasterRuntime) -> None:
        service = OperatorServicer(runtime.operator)
        agent(runtime, "cpus:4;mem:4096")
        framework(runtime, "etl", role="etl")
        await settle()
        await call(service.SetQuota, pb.SetQuotaRequest(role="eng", guarantee=res("cpus:16")))
        before = dict(runtime.state.core.quotas), runtime.state.registry.writes
        _, context = await call(service.SetQuota, request_)
        assert context.code == getattr(grpc.StatusCode, code), context.details
        assert says in context.details
        assert (dict(runtime.state.core.quotas), runtime.state.registry.writes) == before

    scenario(test)
