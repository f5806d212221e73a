"""A hypothesis state machine driving ``MasterState`` (validate on) through random event sequences.

Good events: agents come and go, frameworks register, declare demands (a shape and a wanted
count, or ``None`` for coarse offers), get offers, accept some (launching random tasks that fit),
decline (with or without a refusal), suppress, revive, disconnect and reconnect, kill tasks,
receive task statuses, have their role weights changed, and time passes (with an offer timeout
in some runs). After every good event the machine checks what that event promised (offers
dropped, tasks STAGING, resources returned, filters set, messages sent) and, after every
allocation, that it was Pareto-efficient: no framework that wants more has a next task
(``fairness.footprint`` of its shape) fitting on an agent it has not refused, and every coarse
framework has refused every agent with something free.

Bad requests (unknown, foreign or used offer ids, duplicate ids, launches exceeding the offers or
naming another agent, duplicate or empty task ids, empty task resources, negative or NaN refusals,
NaN/zero/negative/infinite weights, unknown frameworks, agents and tasks, empty ids, ...) must
raise the right ``CoreError`` subclass, exactly, and change nothing observable (``snapshot``).

Invariants after every step: ``MasterState.validate()`` (the wrapper only runs it after calls that
did not raise), plus the pool-wide conservation ``sum_agents free + sum_frameworks allocated ==
total == sum_agents total``, and every offer holding positive resources that fit its agent.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from fairshare.resources import ResourceVector
from fairshare.task_states import advance
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from master.core import (
    AlreadyExists,
    CoreConfig,
    CoreError,
    FailedPrecondition,
    InvalidArgument,
    KillTask,
    LaunchTasks,
    MasterState,
    NotFound,
    PermissionDenied,
    RescindOffer,
    SendOffers,
    TaskLaunch,
    TaskState,
    TaskStatusChange,
)

EMPTY = ResourceVector()
NAMES = ("cpus", "mem", "disk", "gpus")
SCALE = {"cpus": 1000, "mem": 512_000, "disk": 1_000_000, "gpus": 1000}
ROLES = ("*", "analytics", "batch", "batch/nightly", "batch/nightly/ci")
BAD_WEIGHTS = (math.nan, 0.0, -1.0, math.inf, -math.inf, True, "2")
BAD_REFUSALS = (-1.0, -0.001, math.nan, -math.inf)


def vectors(max_units: int, min_units: int = 1) -> st.SearchStrategy[ResourceVector]:
    """Vectors on a random non-empty subset of the resources, sometimes with odd milli parts."""

    @st.composite
    def build(draw: st.DrawFn) -> ResourceVector:
        mask = draw(st.integers(1, (1 << len(NAMES)) - 1))
        millis = {}
        for bit, name in enumerate(NAMES):
            if mask >> bit & 1:
                millis[name] = draw(st.integers(min_units, max_units)) * SCALE[name] + draw(
                    st.sampled_from((0, 0, 0, 1, 499))
                )
        return ResourceVector.from_millis(millis)

    return build()


# -- the observable state --------------------------------------------------------------------------


def _freeze(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _record(record: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((f.name, _freeze(getattr(record, f.name))) for f in dataclasses.fields(record))


def snapshot(state: MasterState) -> dict[str, Any]:
    """Everything a later call or a reader could observe of ``state``."""
    placement = state.placement
    rng = getattr(placement, "_rng", None)
    return {
        "agents": tuple(
            (
                a.id,
                a.hostname,
                a.total,
                a.free,
                _freeze(a.attributes),
                frozenset(a.offer_ids),
                frozenset(a.task_keys),
                a.registered_at,
            )
            for a in state.agent_list
        ),
        "agent_index": tuple(state.agents),
        "inactive_agents": tuple(
            (a.id, a.free, frozenset(a.task_keys)) for a in state.agents.values() if not a.active
        ),
        "frameworks": {fid: _record(fw) for fid, fw in state.frameworks.items()},
        "offers": {oid: _record(offer) for oid, offer in state.offers.items()},
        "tasks": {key: _record(task) for key, task in state.tasks.items()},
        "role_weights": dict(state.role_weights),
        "total": state.total,
        "largest_agent": state.largest_agent,
        "order": state.ordered_frameworks(),
        "shares": {fid: state.share(fid) for fid in state.frameworks},
        "coarse_start": state.coarse_start,
        # private but observable later: the next offer id and the placement's scan state
        "next_offer": getattr(state, "_next_offer", None),
        "placement": (
            _freeze(getattr(placement, "_cursor", None)),
            _freeze(getattr(placement, "_cursors", None)),
            getattr(rng, "_state", None),
        ),
    }


# -- the machine ----------------------------------------------------------------------------------


class CoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = MasterState(CoreConfig(validate=True))
        self.now = 0.0
        self.counter = 0
        self.dead_offers: set[str] = set()  # ids of offers accepted, declined or rescinded
        self.removed_agents: set[str] = set()
        self.removed_frameworks: set[str] = set()

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @initialize(
        policy=st.sampled_from(("drf", "drf", "drf", "asset", "pf", "slots")),
        placement=st.sampled_from(("best-fit", "first-fit", "random")),
        offer_timeout=st.sampled_from((None, None, 0.5, 2.0, 10.0)),
        default_refuse=st.sampled_from((0.0, 1.0, 5.0)),
        seed=st.integers(0, 2**16),
        sample_size=st.sampled_from((1, 2, 16)),
        agents=st.lists(vectors(8), min_size=1, max_size=3),
        demands=st.lists(
            st.tuples(st.one_of(st.none(), vectors(3)), st.sampled_from((1, 3, 1000))),
            min_size=1,
            max_size=3,
        ),
        hierarchy=st.sampled_from(("", "hdrf", "naive", "flat")),
    )
    def configure(
        self,
        hierarchy: str,
        policy: str,
        placement: str,
        offer_timeout: float | None,
        default_refuse: float,
        seed: int,
        sample_size: int,
        agents: list[ResourceVector],
        demands: list[tuple[ResourceVector | None, int]],
    ) -> None:
        """A configuration, and a few agents and frameworks to start from."""
        self.state = MasterState(
            CoreConfig(
                validate=True,
                policy=policy,
                placement=placement,
                seed=seed,
                offer_timeout=offer_timeout,
                default_refuse_seconds=default_refuse,
                slots_per_agent=4,
                sample_size=sample_size,
                hierarchy=hierarchy if policy == "drf" else "",
            )
        )
        for resources in agents:
            self.state.handle_add_agent(self.fresh("ag"), resources, self.now)
        for shape, wanted in demands:
            framework_id = self.fresh("fw")
            self.state.handle_add_framework(framework_id, self.now)
            self.state.handle_update_demand(framework_id, shape, wanted, self.now)

    # -- helpers -----------------------------------------------------------------------------------

    def _messages_of(self, messages: list[Any], kind: type) -> list[Any]:
        assert all(isinstance(m, kind) for m in messages), messages
        return messages

    def _drop(self, offer_ids: Any) -> None:
        self.dead_offers.update(offer_ids)

    def _live_frameworks(self) -> list[str]:
        return sorted(self.state.frameworks)

    def _offering_frameworks(self) -> list[str]:
        return sorted(
            fid for fid, fw in self.state.frameworks.items() if fw.offer_ids and fw.active
        )

    # -- agents -----------------------------------------------------------------------------------

    @rule(data=st.data(), resources=vectors(8), reuse=st.booleans())
    def add_agent(self, data: st.DataObject, resources: ResourceVector, reuse: bool) -> None:
        if reuse and self.removed_agents:
            agent_id = data.draw(st.sampled_from(sorted(self.removed_agents)))
            self.removed_agents.discard(agent_id)
        else:
            agent_id = self.fresh("ag")
        attributes = data.draw(st.sampled_from(({}, {"rack": "r1"}, {"zone": "b", "ssd": "yes"})))
        before = self.state.total
        assert (
            self.state.handle_add_agent(agent_id, resources, self.now, attributes=attributes) == []
        )
        assert self.state.total == before + resources
        assert self.state.agents[agent_id].free == resources

    @precondition(lambda self: self.state.agents)
    @rule(data=st.data(), lost=st.sampled_from((TaskState.LOST, TaskState.GONE)))
    def remove_agent(self, data: st.DataObject, lost: TaskState) -> None:
        agent_id = data.draw(st.sampled_from(sorted(self.state.agents)))
        agent = self.state.agents[agent_id]
        offers = set(agent.offer_ids)
        tasks = set(agent.task_keys)
        messages = self.state.handle_remove_agent(agent_id, self.now, state=lost)
        rescinded = {m.offer_id for m in messages if isinstance(m, RescindOffer)}
        ended = {(m.framework_id, m.task_id) for m in messages if isinstance(m, TaskStatusChange)}
        assert rescinded == offers and ended == tasks and len(messages) == len(offers) + len(tasks)
        assert all(m.state is lost for m in messages if isinstance(m, TaskStatusChange))
        assert agent_id not in self.state.agents
        assert not offers & self.state.offers.keys() and not tasks & self.state.tasks.keys()
        assert all(agent_id not in fw.filters for fw in self.state.frameworks.values())
        self._drop(offers)
        self.removed_agents.add(agent_id)

    @precondition(lambda self: self.state.agents)
    @rule(data=st.data(), deactivate=st.booleans())
    def agent_maintenance(self, data: st.DataObject, deactivate: bool) -> None:
        """The operator deactivates or reactivates an agent (either may be a no-op)."""
        agent_id = data.draw(st.sampled_from(sorted(self.state.agents)))
        agent = self.state.agents[agent_id]
        offers, tasks, total = set(agent.offer_ids), set(agent.task_keys), self.state.total
        if deactivate:
            messages = self._messages_of(
                self.state.handle_deactivate_agent(agent_id, self.now), RescindOffer
            )
            assert {m.offer_id for m in messages} == offers and len(messages) == len(offers)
            assert not agent.active and not agent.offer_ids
            self._drop(offers)
        else:
            assert self.state.handle_reactivate_agent(agent_id, self.now) == []
            assert agent.active and agent.offer_ids == offers
        assert agent.task_keys == tasks and self.state.total == total
        assert any(a is agent for a in self.state.agent_list) == agent.active

    # -- frameworks -------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        role=st.sampled_from(ROLES),
        weight=st.sampled_from((1.0, 1.0, 2.0, 0.5, 3)),
        reuse=st.booleans(),
    )
    def add_framework(self, data: st.DataObject, role: str, weight: float, reuse: bool) -> None:
        if reuse and self.removed_frameworks:
            framework_id = data.draw(st.sampled_from(sorted(self.removed_frameworks)))
            self.removed_frameworks.discard(framework_id)
        else:
            framework_id = self.fresh("fw")
        assert (
            self.state.handle_add_framework(framework_id, self.now, role=role, weight=weight) == []
        )
        fw = self.state.frameworks[framework_id]
        if self.state.hierarchy == "flat":  # the role's weight is copied onto its frameworks
            assert fw.weight == self.state.role_weights.get(role, float(weight))
        else:  # the role's weight weighs its node in the tree
            assert fw.weight == float(weight)
        assert fw.allocated == EMPTY and not fw.task_ids and not fw.offer_ids
        assert framework_id in self.state.ordered_frameworks()

    @precondition(lambda self: self.state.frameworks)
    @rule(data=st.data())
    def remove_framework(self, data: st.DataObject) -> None:
        framework_id = data.draw(st.sampled_from(self._live_frameworks()))
        fw = self.state.frameworks[framework_id]
        offers, task_ids = set(fw.offer_ids), set(fw.task_ids)
        freed = fw.allocated
        free_before = sum((a.free for a in self.state.agents.values()), EMPTY)
        messages = self._messages_of(
            self.state.handle_remove_framework(framework_id, self.now), KillTask
        )
        assert {m.task_id for m in messages} == task_ids
        assert framework_id not in self.state.frameworks
        assert sum((a.free for a in self.state.agents.values()), EMPTY) == free_before + freed
        assert framework_id not in self.state.ordered_frameworks()
        self._drop(offers)
        self.removed_frameworks.add(framework_id)

    @precondition(lambda self: self.state.frameworks)
    @rule(
        data=st.data(),
        shape=st.one_of(st.none(), vectors(3)),
        wanted=st.sampled_from((0, 1, 2, 5, 1000)),
    )
    def update_demand(self, data: st.DataObject, shape: ResourceVector | None, wanted: int) -> None:
        framework_id = data.draw(st.sampled_from(self._live_frameworks()))
        assert self.state.handle_update_demand(framework_id, shape, wanted, self.now) == []
        fw = self.state.frameworks[framework_id]
        assert fw.demand == shape and fw.wanted == (wanted if shape is not None else 0)

    @precondition(lambda self: self.state.frameworks)
    @rule(data=st.data(), action=st.sampled_from(("suppress", "revive", "deactivate", "activate")))
    def framework_switch(self, data: st.DataObject, action: str) -> None:
        framework_id = data.draw(st.sampled_from(self._live_frameworks()))
        fw = self.state.frameworks[framework_id]
        offers = set(fw.offer_ids)
        if action == "suppress":
            assert self.state.handle_suppress(framework_id, self.now) == []
            assert fw.suppressed and fw.offer_ids == offers  # suppress keeps outstanding offers
        elif action == "revive":
            assert self.state.handle_revive(framework_id, self.now) == []
            assert not fw.suppressed and not fw.filters
        elif action == "deactivate":
            messages = self._messages_of(
                self.state.handle_deactivate_framework(framework_id, self.now), RescindOffer
            )
            assert {m.offer_id for m in messages} == offers
            assert not fw.active and not fw.offer_ids and fw.offered_tasks == 0
            self._drop(offers)
        else:
            assert self.state.handle_activate_framework(framework_id, self.now) == []
            assert fw.active
        listed = framework_id in self.state.ordered_frameworks()
        assert listed == (fw.active and not fw.suppressed)

    @rule(role=st.sampled_from(ROLES), weight=st.sampled_from((0.25, 1.0, 2.0, 5)))
    def set_weight(self, role: str, weight: float) -> None:
        assert self.state.handle_set_weight(role, weight, self.now) == []
        assert self.state.role_weights[role] == weight
        role_frameworks = [fw for fw in self.state.frameworks.values() if fw.role == role]
        if self.state.hierarchy == "flat":
            assert all(fw.weight == weight for fw in role_frameworks if fw.operator_weight is None)
        elif role_frameworks:
            assert self.state.role_shares()[role].weight == weight

    # -- allocation -------------------------------------------------------------------------------

    @rule()
    def allocate(self) -> None:
        state = self.state
        before = {fid: set(fw.offer_ids) for fid, fw in state.frameworks.items()}
        messages = self._messages_of(state.handle_allocate(self.now), SendOffers)
        assert len({m.framework_id for m in messages}) == len(messages)
        for message in messages:
            fw = state.frameworks[message.framework_id]
            assert fw.active and not fw.suppressed
            assert message.offers
            for offer in message.offers:
                assert offer.offer_id in state.offers and offer.offer_id not in before[fw.id]
                assert offer.offer_id not in self.dead_offers
                assert offer.resources and offer.agent_id in state.agents
                assert state.agents[offer.agent_id].active, "offered a deactivated agent"
                until = fw.filters.get(offer.agent_id)
                assert until is None or until <= self.now, "offered a refused agent"
                if fw.demand is None:
                    assert offer.fair_tasks == 0
                else:
                    footprint = state.fairness.footprint(fw.demand)
                    assert offer.fair_tasks >= 1
                    assert offer.resources == footprint * offer.fair_tasks
            if fw.demand is not None:
                assert fw.live_tasks + fw.offered_tasks <= fw.wanted
        event(f"allocation made {(sum(len(m.offers) for m in messages) and 'some') or 'no'} offers")
        self._check_pareto()

    def _check_pareto(self) -> None:
        """Right after a run: nothing that any framework wants fits where it may go."""
        state = self.state
        for fw in state.frameworks.values():
            if not fw.active or fw.suppressed:
                continue
            refused = {a for a, until in fw.filters.items() if until > self.now}
            usable = [a for a in state.agent_list if a.id not in refused]
            if fw.demand is None:
                assert not [a.id for a in usable if a.free], f"coarse {fw.id} left agents unoffered"
            elif fw.live_tasks + fw.offered_tasks < fw.wanted:
                footprint = state.fairness.footprint(fw.demand)
                assert not [a.id for a in usable if footprint.fits_in(a.free)], (
                    f"{fw.id} wants more and its task fits"
                )

    @precondition(
        lambda self: any(fw.offer_ids and fw.active for fw in self.state.frameworks.values())
    )
    @rule(data=st.data(), refuse=st.sampled_from((None, 0.0, 1.0, 30.0)))
    def accept(self, data: st.DataObject, refuse: float | None) -> None:
        state = self.state
        framework_id = data.draw(st.sampled_from(self._offering_frameworks()))
        fw = state.frameworks[framework_id]
        agent_id = data.draw(
            st.sampled_from(sorted({state.offers[o].agent_id for o in fw.offer_ids}))
        )
        mine = sorted(o for o in fw.offer_ids if state.offers[o].agent_id == agent_id)
        offer_ids = data.draw(st.lists(st.sampled_from(mine), min_size=1, unique=True))
        held = sum((state.offers[o].resources for o in offer_ids), EMPTY)
        launches = []
        left = held
        for _ in range(data.draw(st.integers(0, 4))):
            if not left:
                break
            if fw.demand is not None and fw.demand.fits_in(left) and data.draw(st.booleans()):
                resources = fw.demand
            else:
                millis = {
                    name: data.draw(st.integers(0, amount)) for name, amount in left.millis_items()
                }
                resources = ResourceVector.from_millis(millis)
                if not resources:
                    continue
            left = left - resources
            launches.append(
                TaskLaunch(
                    self.fresh("t"),
                    "task",
                    resources,
                    agent_id=data.draw(st.sampled_from((None, agent_id))),
                )
            )
        agent = state.agents[agent_id]
        free_before, allocated_before = agent.free, fw.allocated
        messages = state.handle_accept(framework_id, offer_ids, launches, self.now, refuse)
        event(f"accept launching {len(launches)} task(s)")
        needed = held - left
        if launches:
            assert messages == [LaunchTasks(agent_id, framework_id, tuple(launches))]
        else:
            assert messages == []
        assert not set(offer_ids) & state.offers.keys()
        assert agent.free == free_before + left
        assert fw.allocated == allocated_before - held + needed
        for launch in launches:
            task = state.tasks[(framework_id, launch.task_id)]
            assert task.state is TaskState.STAGING and task.agent_id == agent_id
        seconds = state.config.default_refuse_seconds if refuse is None else refuse
        if left and seconds > 0:
            assert fw.filters[agent_id] >= self.now + seconds
        self._drop(offer_ids)

    @precondition(lambda self: self.state.offers)
    @rule(data=st.data(), refuse=st.sampled_from((None, 0.0, 0.5, 5.0, math.inf)))
    def decline(self, data: st.DataObject, refuse: float | None) -> None:
        state = self.state
        framework_id = data.draw(
            st.sampled_from(sorted({o.framework_id for o in state.offers.values()}))
        )
        fw = state.frameworks[framework_id]
        offer_ids = data.draw(
            st.lists(st.sampled_from(sorted(fw.offer_ids)), min_size=1, unique=True)
        )
        held = sum((state.offers[o].resources for o in offer_ids), EMPTY)
        agents = {state.offers[o].agent_id for o in offer_ids}
        allocated_before = fw.allocated
        assert state.handle_decline(framework_id, offer_ids, self.now, refuse) == []
        assert fw.allocated == allocated_before - held
        assert not set(offer_ids) & state.offers.keys()
        seconds = state.config.default_refuse_seconds if refuse is None else refuse
        for agent_id in agents:
            if seconds > 0:
                assert fw.filters[agent_id] >= self.now + seconds
        self._drop(offer_ids)

    # -- tasks ------------------------------------------------------------------------------------

    @precondition(lambda self: self.state.tasks)
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        framework_id, task_id = data.draw(st.sampled_from(sorted(self.state.tasks)))
        task = self.state.tasks[(framework_id, task_id)]
        messages = self.state.handle_kill(framework_id, task_id, self.now)
        assert messages == [KillTask(task.agent_id, framework_id, task_id)]
        assert task.state is TaskState.KILLING
        assert (framework_id, task_id) in self.state.tasks  # resources return on the status

    @precondition(lambda self: self.state.tasks)
    @rule(data=st.data(), new=st.sampled_from(list(TaskState)))
    def task_status(self, data: st.DataObject, new: TaskState) -> None:
        key = data.draw(st.sampled_from(sorted(self.state.tasks)))
        task = self.state.tasks[key]
        agent = self.state.agents[task.agent_id]
        fw = self.state.frameworks[key[0]]
        old, free_before, allocated_before = task.state, agent.free, fw.allocated
        assert self.state.handle_task_status(task.agent_id, key[0], key[1], new, self.now) == []
        if new.is_terminal:
            assert key not in self.state.tasks and key not in agent.task_keys
            assert agent.free == free_before + task.resources
            assert fw.allocated == allocated_before - task.resources
        else:
            assert self.state.tasks[key] is task
            assert task.state is advance(old, new)  # states only move forward
            assert agent.free == free_before and fw.allocated == allocated_before

    # -- time --------------------------------------------------------------------------------------

    @rule(dt=st.sampled_from((0.0, 0.25, 1.0, 3.0, 12.0)))
    def tick(self, dt: float) -> None:
        self.now += dt
        state = self.state
        timeout = state.config.offer_timeout
        expiring = {
            o.offer_id
            for o in state.offers.values()
            if timeout is not None and o.created_at + timeout <= self.now
        }
        messages = self._messages_of(state.handle_tick(self.now), RescindOffer)
        assert {m.offer_id for m in messages} == expiring
        assert not expiring & state.offers.keys()
        for fw in state.frameworks.values():
            assert all(until > self.now for until in fw.filters.values())
        self._drop(expiring)

    # -- bad requests ---------------------------------------------------------------------------

    def _expect(self, error: type[CoreError], call: Any) -> None:
        before = snapshot(self.state)
        with pytest.raises(CoreError) as caught:
            call()
        assert type(caught.value) is error, (
            type(caught.value).__name__,
            error.__name__,
            caught.value,
        )
        assert snapshot(self.state) == before, "a refused request changed the state"

    def _bad_requests(self, data: st.DataObject) -> list[tuple[str, type[CoreError], Any]]:
        """(name, expected error, call) for every bad request that applies to the state now."""
        s, now = self.state, self.now
        out: list[tuple[str, type[CoreError], Any]] = []
        ghost = "nobody-" + str(self.counter)
        fws = self._live_frameworks()
        good_shape = ResourceVector(cpus=1)
        out += [
            (
                "add agent, empty id",
                InvalidArgument,
                lambda: s.handle_add_agent("", good_shape, now),
            ),
            (
                "add agent, no resources",
                InvalidArgument,
                lambda: s.handle_add_agent(ghost, EMPTY, now),
            ),
            ("add framework, empty id", InvalidArgument, lambda: s.handle_add_framework("", now)),
            ("remove unknown agent", NotFound, lambda: s.handle_remove_agent(ghost, now)),
            ("deactivate unknown agent", NotFound, lambda: s.handle_deactivate_agent(ghost, now)),
            ("reactivate unknown agent", NotFound, lambda: s.handle_reactivate_agent(ghost, now)),
            (
                "deactivate agent, empty id",
                InvalidArgument,
                lambda: s.handle_deactivate_agent("", now),
            ),
            (
                "reactivate agent, empty id",
                InvalidArgument,
                lambda: s.handle_reactivate_agent("", now),
            ),
            ("remove unknown framework", NotFound, lambda: s.handle_remove_framework(ghost, now)),
            ("deactivate unknown", NotFound, lambda: s.handle_deactivate_framework(ghost, now)),
            ("activate unknown", NotFound, lambda: s.handle_activate_framework(ghost, now)),
            ("suppress unknown", NotFound, lambda: s.handle_suppress(ghost, now)),
            ("revive unknown", NotFound, lambda: s.handle_revive(ghost, now)),
            ("demand unknown", NotFound, lambda: s.handle_update_demand(ghost, good_shape, 1, now)),
            ("decline unknown framework", NotFound, lambda: s.handle_decline(ghost, ["o-1"], now)),
            (
                "accept unknown framework",
                NotFound,
                lambda: s.handle_accept(ghost, ["o-1"], [], now),
            ),
            ("kill unknown framework", NotFound, lambda: s.handle_kill(ghost, "t", now)),
            (
                "status of unknown task",
                NotFound,
                lambda: s.handle_task_status(ghost, ghost, ghost, TaskState.RUNNING, now),
            ),
            ("weight of empty role", InvalidArgument, lambda: s.handle_set_weight("", 1.0, now)),
        ]
        weight = data.draw(st.sampled_from(BAD_WEIGHTS), label="bad weight")
        out += [
            ("bad role weight", InvalidArgument, lambda: s.handle_set_weight("batch", weight, now)),
            (
                "bad framework weight",
                InvalidArgument,
                lambda: s.handle_add_framework(ghost, now, role="fresh-role", weight=weight),
            ),
        ]
        if s.agents:
            agent_id = data.draw(st.sampled_from(sorted(s.agents)), label="agent")
            out.append(
                (
                    "duplicate agent",
                    AlreadyExists,
                    lambda: s.handle_add_agent(agent_id, good_shape, now),
                )
            )
        if fws:
            fid = data.draw(st.sampled_from(fws), label="framework")
            fw = s.frameworks[fid]
            refusal = data.draw(st.sampled_from(BAD_REFUSALS), label="bad refusal")
            out += [
                ("duplicate framework", AlreadyExists, lambda: s.handle_add_framework(fid, now)),
                (
                    "empty demand shape",
                    InvalidArgument,
                    lambda: s.handle_update_demand(fid, EMPTY, 1, now),
                ),
                (
                    "negative wanted",
                    InvalidArgument,
                    lambda: s.handle_update_demand(fid, good_shape, -1, now),
                ),
                (
                    "boolean wanted",
                    InvalidArgument,
                    lambda: s.handle_update_demand(fid, good_shape, True, now),
                ),  # type: ignore[arg-type]
                ("kill unknown task", NotFound, lambda: s.handle_kill(fid, ghost, now)),
                ("decline unknown offer", NotFound, lambda: s.handle_decline(fid, [ghost], now)),
                ("decline no offers", InvalidArgument, lambda: s.handle_decline(fid, [], now)),
            ]
            if self.dead_offers:
                dead = data.draw(st.sampled_from(sorted(self.dead_offers)), label="dead offer")
                out.append(
                    ("decline used offer", NotFound, lambda: s.handle_decline(fid, [dead], now))
                )
            if fw.offer_ids:
                mine = sorted(fw.offer_ids)
                out += [
                    (
                        "decline negative refusal",
                        InvalidArgument,
                        lambda: s.handle_decline(fid, mine[:1], now, refusal),
                    ),
                    (
                        "decline duplicate ids",
                        InvalidArgument,
                        lambda: s.handle_decline(fid, [mine[0], mine[0]], now),
                    ),
                ]
            if not fw.active:
                out.append(
                    (
                        "accept while disconnected",
                        FailedPrecondition,
                        lambda: s.handle_accept(fid, [ghost], [], now),
                    )
                )
            else:
                out += [
                    (
                        "accept unknown offer",
                        NotFound,
                        lambda: s.handle_accept(fid, [ghost], [], now),
                    ),
                    (
                        "accept no offers",
                        InvalidArgument,
                        lambda: s.handle_accept(fid, [], [], now),
                    ),
                ]
                if self.dead_offers:
                    used = data.draw(st.sampled_from(sorted(self.dead_offers)), label="used offer")
                    out.append(
                        (
                            "accept used offer",
                            NotFound,
                            lambda: s.handle_accept(fid, [used], [], now),
                        )
                    )
                foreign = sorted(o for o, offer in s.offers.items() if offer.framework_id != fid)
                if foreign:
                    other = data.draw(st.sampled_from(foreign), label="foreign offer")
                    out += [
                        (
                            "accept foreign offer",
                            PermissionDenied,
                            lambda: s.handle_accept(fid, [other], [], now),
                        ),
                        (
                            "decline foreign offer",
                            PermissionDenied,
                            lambda: s.handle_decline(fid, [other], now),
                        ),
                    ]
                if fw.offer_ids:
                    out += self._bad_launches(data, fid)
        if s.tasks:
            task_fid, tid = data.draw(st.sampled_from(sorted(s.tasks)), label="task")
            task = s.tasks[(task_fid, tid)]
            others = sorted(set(s.agents) - {task.agent_id})
            if others:
                wrong = data.draw(st.sampled_from(others), label="wrong agent")
                out.append(
                    (
                        "status from the wrong agent",
                        PermissionDenied,
                        lambda: s.handle_task_status(wrong, task_fid, tid, TaskState.FINISHED, now),
                    )
                )
            out.append(
                (
                    "status of another framework's task",
                    NotFound,
                    lambda: s.handle_task_status(
                        task.agent_id, ghost, tid, TaskState.FINISHED, now
                    ),
                )
            )
        return out

    def _bad_launches(
        self, data: st.DataObject, fid: str
    ) -> list[tuple[str, type[CoreError], Any]]:
        s, now = self.state, self.now
        fw = s.frameworks[fid]
        offer_id = data.draw(st.sampled_from(sorted(fw.offer_ids)), label="offer")
        offer = s.offers[offer_id]
        held = offer.resources
        name, amount = next(iter(held.millis_items()))
        unit = ResourceVector.from_millis({name: 1})
        fresh1, fresh2 = self.fresh("t"), self.fresh("t")
        refusal = data.draw(st.sampled_from(BAD_REFUSALS), label="accept refusal")
        out: list[tuple[str, type[CoreError], Any]] = [
            (
                "launch exceeding the offer",
                InvalidArgument,
                lambda: s.handle_accept(
                    fid, [offer_id], [TaskLaunch(fresh1, "x", held + unit)], now
                ),
            ),
            (
                "two launches exceeding the offer",
                InvalidArgument,
                lambda: s.handle_accept(
                    fid,
                    [offer_id],
                    [TaskLaunch(fresh1, "x", held), TaskLaunch(fresh2, "y", unit)],
                    now,
                ),
            ),
            (
                "launch with no resources",
                InvalidArgument,
                lambda: s.handle_accept(fid, [offer_id], [TaskLaunch(fresh1, "x", EMPTY)], now),
            ),
            (
                "launch with an empty task id",
                InvalidArgument,
                lambda: s.handle_accept(fid, [offer_id], [TaskLaunch("", "x", unit)], now),
            ),
            (
                "same task id twice",
                InvalidArgument,
                lambda: s.handle_accept(
                    fid,
                    [offer_id],
                    [TaskLaunch(fresh1, "x", unit), TaskLaunch(fresh1, "y", unit)],
                    now,
                ),
            ),
            (
                "launch naming another agent",
                InvalidArgument,
                lambda: s.handle_accept(
                    fid,
                    [offer_id],
                    [TaskLaunch(fresh1, "x", unit, agent_id=offer.agent_id + "-x")],
                    now,
                ),
            ),
            (
                "accept duplicate offer ids",
                InvalidArgument,
                lambda: s.handle_accept(fid, [offer_id, offer_id], [], now),
            ),
            (
                "accept with a bad refusal",
                InvalidArgument,
                lambda: s.handle_accept(fid, [offer_id], [], now, refusal),
            ),
        ]
        if fw.task_ids:
            existing = data.draw(st.sampled_from(sorted(fw.task_ids)), label="existing task")
            out.append(
                (
                    "launch an existing task id",
                    AlreadyExists,
                    lambda: s.handle_accept(
                        fid, [offer_id], [TaskLaunch(existing, "x", unit)], now
                    ),
                )
            )
        elsewhere = sorted(o for o in fw.offer_ids if s.offers[o].agent_id != offer.agent_id)
        if elsewhere:
            other = data.draw(st.sampled_from(elsewhere), label="offer on another agent")
            out.append(
                (
                    "offers on two agents",
                    InvalidArgument,
                    lambda: s.handle_accept(fid, [offer_id, other], [], now),
                )
            )
        assert amount > 0
        return out

    @precondition(
        lambda self: any(fw.offer_ids and fw.active for fw in self.state.frameworks.values())
    )
    @rule(data=st.data())
    def bad_launch(self, data: st.DataObject) -> None:
        """The bad accepts that need an outstanding offer (drawn more often than the rest)."""
        framework_id = data.draw(st.sampled_from(self._offering_frameworks()))
        name, error, call = data.draw(st.sampled_from(self._bad_launches(data, framework_id)))
        event(f"bad request: {name}")
        self._expect(error, call)

    @rule(data=st.data())
    def bad_request(self, data: st.DataObject) -> None:
        requests = self._bad_requests(data)
        name, error, call = data.draw(st.sampled_from(requests), label="bad request")
        event(f"bad request: {name}")
        self._expect(error, call)

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def core_invariants(self) -> None:
        self.state.validate()

    @invariant()
    def conservation(self) -> None:
        state = self.state
        totals = sum((a.total for a in state.agents.values()), EMPTY)
        free = sum((a.free for a in state.agents.values()), EMPTY)
        allocated = sum((fw.allocated for fw in state.frameworks.values()), EMPTY)
        offered = sum((o.resources for o in state.offers.values()), EMPTY)
        used = sum((t.resources for t in state.tasks.values()), EMPTY)
        assert totals == state.total
        assert free + allocated == state.total
        assert free + offered + used == state.total
        for offer in state.offers.values():
            assert offer.resources, f"offer {offer.offer_id} is empty"
            assert offer.resources.fits_in(state.agents[offer.agent_id].total)
        for task in state.tasks.values():
            assert not task.state.is_terminal


CoreMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
TestCoreStateMachine = CoreMachine.TestCase


ALL_BAD_REQUESTS = {
    "add agent, empty id",
    "add agent, no resources",
    "add framework, empty id",
    "remove unknown agent",
    "deactivate unknown agent",
    "reactivate unknown agent",
    "deactivate agent, empty id",
    "reactivate agent, empty id",
    "remove unknown framework",
    "deactivate unknown",
    "activate unknown",
    "suppress unknown",
    "revive unknown",
    "demand unknown",
    "decline unknown framework",
    "accept unknown framework",
    "kill unknown framework",
    "status of unknown task",
    "weight of empty role",
    "bad role weight",
    "bad framework weight",
    "duplicate agent",
    "duplicate framework",
    "empty demand shape",
    "negative wanted",
    "boolean wanted",
    "kill unknown task",
    "decline unknown offer",
    "decline no offers",
    "decline used offer",
    "decline negative refusal",
    "decline duplicate ids",
    "accept while disconnected",
    "accept unknown offer",
    "accept no offers",
    "accept used offer",
    "accept foreign offer",
    "decline foreign offer",
    "status from the wrong agent",
    "status of another framework's task",
    "launch exceeding the offer",
    "two launches exceeding the offer",
    "launch with no resources",
    "launch with an empty task id",
    "same task id twice",
    "launch naming another agent",
    "accept duplicate offer ids",
    "accept with a bad refusal",
    "launch an existing task id",
    "offers on two agents",
}


@settings(max_examples=15, deadline=None)
@given(data=st.data(), placement=st.sampled_from(("best-fit", "first-fit", "random")))
def test_every_bad_request_is_refused_without_change(data: st.DataObject, placement: str) -> None:
    """Every kind of bad request, on a state where each applies: two agents, a framework holding
    offers on both plus a running task, a second framework with an offer, a disconnected third,
    used offers. (The state machine draws them at random; this makes sure none is skipped.)"""
    machine = CoreMachine()
    machine.state = MasterState(CoreConfig(validate=True, placement=placement))
    state = machine.state
    state.handle_add_agent("ag-a", ResourceVector(cpus=4, mem=4096), 0.0)
    state.handle_add_agent("ag-b", ResourceVector(cpus=4, mem=4096), 0.0)
    for framework_id in ("fw-a", "fw-b", "fw-c"):
        state.handle_add_framework(framework_id, 0.0)
    state.handle_update_demand("fw-a", ResourceVector(cpus=1, mem=512), 1000, 0.0)
    state.handle_update_demand("fw-b", ResourceVector(cpus=1, mem=512), 1, 0.0)
    state.handle_deactivate_framework("fw-c", 0.0)
    state.handle_allocate(0.0)
    first = min(state.frameworks["fw-a"].offer_ids)
    agent_id = state.offers[first].agent_id
    state.handle_accept(
        "fw-a", [first], [TaskLaunch("t-1", "x", ResourceVector(cpus=1, mem=512))], 0.0, 0.0
    )
    machine.dead_offers.add(first)
    state.handle_allocate(0.0)
    assert state.frameworks["fw-b"].offer_ids and ("fw-a", "t-1") in state.tasks
    assert {state.offers[o].agent_id for o in state.frameworks["fw-a"].offer_ids} == {
        "ag-a",
        "ag-b",
    }, agent_id
    seen = set()
    for framework_id in ("fw-a", "fw-b", "fw-c"):
        # pin the framework the generic requests act on
        requests = machine._bad_requests(_Pinned(data, framework_id))
        requests += machine._bad_launches(data, "fw-a")
        for name, error, call in requests:
            machine._expect(error, call)
            seen.add(name)
        state.validate()
    assert seen == ALL_BAD_REQUESTS, sorted(ALL_BAD_REQUESTS ^ seen)


class _Pinned:
    """A ``st.data()`` stand-in that picks ``framework_id`` whenever a framework is drawn."""

    def __init__(self, data: st.DataObject, framework_id: str) -> None:
        self.data = data
        self.framework_id = framework_id

    def draw(self, strategy: st.SearchStrategy[Any], label: str | None = None) -> Any:
        if label == "framework":
            return self.framework_id
        if label == "task":
            return ("fw-a", "t-1")
        return self.data.draw(strategy, label=label)
