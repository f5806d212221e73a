"""Bounds everywhere a peer can write (issue 23, finding 5): labels, attributes, resource names
and reservations refused at the source with INVALID_ARGUMENT naming the field and its bound; a
GetState trimmed to the message limit by its stated rule; an offers event split; metric families
bounded; a registry row from before the bounds loads without its attributes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fairshare.resources import ResourceVector
from fairshare.transport import MAX_MESSAGE_BYTES
from fairshare.v1 import common_pb2, operator_pb2
from prometheus_client.core import GaugeMetricFamily

from master.core.errors import InvalidArgument
from master.core.input_bounds import (
    MAX_AGENT_RESERVATIONS,
    MAX_ATTRIBUTES,
    MAX_LABEL_VALUE,
    MAX_LABELS,
)
from master.metrics import MAX_SERIES_PER_FAMILY, bounded
from master.model import AgentSpec
from master.registry import AgentEntry, SqliteRegistry
from master.runtime.recovery import bounded_spec
from master.service import convert
from master.service.message_fit import fit_state, split_by_size

C = common_pb2


def _task(**labels: str) -> common_pb2.TaskInfo:
    info = C.TaskInfo(task_id="t", resources=C.Resources(items=[C.Resource(name="cpus", millis=1)]))
    info.labels.update(labels)
    return info


def _agent(**fields: object) -> common_pb2.AgentInfo:
    info = C.AgentInfo(
        hostname="h", resources=C.Resources(items=[C.Resource(name="cpus", millis=1)])
    )
    for name, value in fields.items():
        getattr(info, name).extend(value)  # type: ignore[arg-type]
    return info


@pytest.mark.parametrize(
    ("info", "named"),
    [
        (_task(**{f"k{i}": "v" for i in range(MAX_LABELS + 1)}), f"labels: more than {MAX_LABELS}"),
        (_task(k="v" * (MAX_LABEL_VALUE + 1)), f"at most {MAX_LABEL_VALUE}"),
        (_task(**{f"k{i}": "v" * 4000 for i in range(17)}), "more than 65536 bytes of labels"),
        (_task(**{"k" * 257: "v"}), "label key of 257 characters; at most 256"),
    ],
)
def test_labels_beyond_their_bounds_are_refused_at_accept(
    info: common_pb2.TaskInfo, named: str
) -> None:
    with pytest.raises(InvalidArgument, match=named) as caught:
        convert.task_launch(info)
    assert "task 't': labels" in str(caught.value)
    convert.task_launch(_task(**{f"k{i}": "v" * 400 for i in range(MAX_LABELS)}))  # 51 KB: fine


@pytest.mark.parametrize(
    ("info", "named"),
    [
        (
            _agent(attributes=[C.Attribute(name=f"a{i}", value="v") for i in range(129)]),
            f"agent_info.attributes: more than {MAX_ATTRIBUTES} attributes",
        ),
        (
            _agent(attributes=[C.Attribute(name="rack", value="v" * 1025)]),
            "attribute 'rack' has a value of 1025 characters; at most 1024",
        ),
        (
            _agent(attributes=[C.Attribute(name="a" * 300, value="v")]),
            "agent_info.attributes: a name has 300 characters; at most 256",
        ),
        (
            _agent(attributes=[C.Attribute(name=f"a{i}", value="v" * 1000) for i in range(70)]),
            "more than 65536 bytes of attributes",
        ),
        (
            C.AgentInfo(
                resources=C.Resources(
                    items=[C.Resource(name=f"r{i:03}", millis=1) for i in range(33)]
                )
            ),
            "agent_info.resources: more than 32 resource names",
        ),
        (
            C.AgentInfo(resources=C.Resources(items=[C.Resource(name="r" * 65, millis=1)])),
            "has 65 characters; at most 64",
        ),
        (
            _agent(
                reservations=[
                    C.Reservation(role=f"r{i}", resources=C.Resources())
                    for i in range(MAX_AGENT_RESERVATIONS + 1)
                ]
            ),
            f"agent_info.reservations: 65 reservations; at most {MAX_AGENT_RESERVATIONS}",
        ),
    ],
)
def test_agent_info_beyond_its_bounds_is_refused(info: common_pb2.AgentInfo, named: str) -> None:
    with pytest.raises(InvalidArgument, match=named):
        convert.agent_spec(info)


def test_a_demand_of_too_many_resource_names_is_refused() -> None:
    demand = C.Demand(
        task_resources=C.Resources(items=[C.Resource(name=f"r{i:03}", millis=1) for i in range(33)])
    )
    with pytest.raises(InvalidArgument, match=r"demand\.task_resources: more than 32"):
        convert.demand_spec(demand, True)


def _state(tasks: int, label_bytes: int, agents: int = 0) -> operator_pb2.GetStateResponse:
    state = operator_pb2.GetStateResponse(master_id="m")
    for i in range(tasks):
        task = state.tasks.add(framework_id="f")
        task.info.task_id = f"t{i:05}"
        task.info.labels["k"] = "x" * label_bytes
        task.status.message = "m" * 100
    for i in range(agents):
        agent = state.agents.add(agent_id=f"a{i:05}")
        agent.agent_info.attributes.add(name="rack", value="r" * 1000)
    return state


def test_a_state_within_the_budget_is_whole() -> None:
    state = _state(10, 100)
    fit_state(state, budget=10_000)
    assert not state.trimmed and state.tasks[0].info.labels["k"]


def test_a_large_state_loses_task_details_first() -> None:
    state = _state(10, 1000, agents=2)
    fit_state(state, budget=4000)
    assert list(state.trimmed) == ["task details"]
    assert len(state.tasks) == 10 and not state.tasks[0].info.labels
    assert not state.tasks[0].status.message and state.agents[0].agent_info.attributes


def test_then_agent_attributes_then_the_tails_of_its_lists() -> None:
    state = _state(100, 1000, agents=10)
    fit_state(state, budget=1500)
    assert state.ByteSize() <= 1500
    assert state.trimmed[:2] == ["task details", "agent attributes"]
    assert state.trimmed[2].startswith("tasks: ") and state.trimmed[2].endswith(" of 100 left out")
    kept = [task.info.task_id for task in state.tasks]
    assert kept == [f"t{i:05}" for i in range(len(kept))]  # a prefix, in id order


def test_offers_are_split_within_the_budget_in_order() -> None:
    offers = [C.Offer(offer_id=f"o{i}", hostname="h" * 1000) for i in range(10)]
    groups = split_by_size(offers, budget=3100)
    assert [o.offer_id for g in groups for o in g] == [f"o{i}" for i in range(10)]
    assert all(sum(o.ByteSize() + 6 for o in g) <= 3100 for g in groups)
    assert len(groups) == 4
    assert split_by_size([]) == []


def test_a_metric_family_is_bounded() -> None:
    family = GaugeMetricFamily("fairshare_x", "x", labels=["resource"])
    for i in range(MAX_SERIES_PER_FAMILY + 5):
        family.add_metric([f"r{i}"], 1)
    dropped: dict[str, int] = {}
    assert len(bounded(family, dropped).samples) == MAX_SERIES_PER_FAMILY
    assert dropped == {"fairshare_x": 5}


def test_a_registry_row_from_before_the_bounds_loads_without_its_attributes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    big = tuple((f"a{i}", "v" * 1000) for i in range(100))
    spec = AgentSpec("h", 0, ResourceVector(cpus=1), big)
    with caplog.at_level(logging.WARNING):
        loaded = bounded_spec("ag-1", spec)
    assert loaded.attributes == () and loaded.resources == spec.resources
    (record,) = [r for r in caplog.records if r.getMessage() == "registry.agent.trimmed"]
    assert "ag-1" in str(record.__dict__)
    small = AgentSpec("h", 0, ResourceVector(cpus=1), (("rack", "r1"),))
    assert bounded_spec("ag-2", small) is small


def test_queued_launches_for_one_agent_go_out_within_the_message_limit() -> None:
    from master.core import LaunchTasks, TaskLaunch
    from master.model import TaskDetails
    from master.service.streams import agent_messages

    labels = tuple((f"k{i:03}", "x" * 500) for i in range(120))  # 60 KB per task
    launches = [
        LaunchTasks(
            "ag",
            "fw",
            tuple(
                TaskLaunch(
                    f"t{n}-{i}", "t", ResourceVector(cpus=1), None, TaskDetails(labels=labels)
                )
                for i in range(10)
            ),
        )
        for n in range(40)  # 40 Accepts of 600 KB each, queued before the stream drained: 24 MB
    ]
    messages = agent_messages(launches)
    assert len(messages) == 2
    assert all(m.ByteSize() <= MAX_MESSAGE_BYTES for m in messages)
    sent = [t.task_id for m in messages for c in m.commands.commands for t in c.launch_tasks.tasks]
    assert sent == [t.task_id for launch in launches for t in launch.tasks]


class _Aborted(Exception):
    pass


class _Context:
    code: object = None

    async def abort(self, code: object, details: str) -> None:
        self.code, self.details = code, details
        raise _Aborted


def test_an_oversize_answer_is_resource_exhausted_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    import grpc

    from master.service.errors import maps_errors

    class Servicer:
        @maps_errors
        async def Huge(self, request: object, context: object) -> operator_pb2.GetStateResponse:
            return operator_pb2.GetStateResponse(master_id="x" * (MAX_MESSAGE_BYTES + 1))

    context = _Context()
    with caplog.at_level(logging.WARNING), pytest.raises(_Aborted):
        asyncio.run(Servicer().Huge(None, context))  # type: ignore[arg-type]
    assert context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than the 16777216-byte message limit" in context.details
    assert "Traceback" not in caplog.text


def test_the_registry_sums_each_principals_agents_and_counts_names(tmp_path: Path) -> None:
    """What ``--max-principal-resources`` and ``--max-resource-names`` read: kept by every
    change, agents GONE out of it, and loaded back when the registry is opened again."""
    registry = SqliteRegistry.open(tmp_path)
    spec = AgentSpec("h", 0, ResourceVector(cpus=40, mem=1024, gpus=1))
    for n, principal in ((1, "rack"), (2, "rack"), (3, "other")):
        registry.admit_agent(AgentEntry(f"ag-{n}", spec, 0.0, principal=principal))
    assert registry.resources_of["rack"] == {"cpus": 80_000, "mem": 2_048_000, "gpus": 2_000}
    assert registry.resource_names == {"cpus": 3, "mem": 3, "gpus": 3}
    registry.set_agent_state("ag-3", "GONE")
    assert "other" not in registry.resources_of
    smaller = AgentSpec("h", 0, ResourceVector(cpus=1, mem=1))
    registry.admit_agent(AgentEntry("ag-2", smaller, 0.0, principal="rack"))
    assert registry.resources_of["rack"] == {"cpus": 41_000, "mem": 1_025_000, "gpus": 1_000}
    assert registry.resource_names == {"cpus": 2, "mem": 2, "gpus": 1}
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    assert reopened.resources_of == {"rack": {"cpus": 41_000, "mem": 1_025_000, "gpus": 1_000}}
    reopened.close()
