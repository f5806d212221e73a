"""Property tests of quota (``master.core.quota``) on the pure core, tasks mode, one run.

Instances: one pool, frameworks in roles ``a``, ``a/x``, ``b``, ``c`` with drawn shapes and
wanted counts, drawn limits and guarantees (kept consistent by construction, checked by the
core anyway); validate on.

- *limits hold*: after a run no role's subtree holds more of a limited resource than its limit
  (offered plus used; the run starts from nothing, so there is no forced overrun);
- *feasible guarantees are met*: when the top-level guarantees fit in the pool, every framework
  wants more than the pool holds and each role runs one task shape, each guaranteed role ends
  holding at least its guarantee of each guaranteed resource its tasks use, less one task of
  every guaranteed role (whole tasks overshoot a guarantee by up to one);
- *no quota is no change*: quotas that bind nobody (a limit above the pool, on a role with no
  framework) leave every offer as the run without quotas makes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.roles import is_within
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from master.core import CoreConfig, MasterState, SendOffers
from master.core.quota import Quota

ROLES = ("a", "a/x", "b", "c")
UNLIMITED = 10**6
EMPTY = ResourceVector()


@dataclass(frozen=True)
class Case:
    pool: ResourceVector
    frameworks: tuple[tuple[str, ResourceVector, int], ...]  # role, shape, wanted
    quotas: tuple[tuple[str, Quota], ...]


@st.composite
def cases(draw: st.DrawFn, guarantees: bool) -> Case:
    pool = ResourceVector.from_millis(
        {"cpus": draw(st.integers(8, 40)) * 1000, "mem": draw(st.integers(8, 40)) * 1000}
    )

    def shape() -> ResourceVector:
        return ResourceVector.from_millis(
            {"cpus": draw(st.integers(1, 3)) * 1000, "mem": draw(st.integers(0, 3)) * 1000}
        )

    # with guarantees, one shape per top-level role: a role whose own frameworks mix shapes
    # can spend a guaranteed resource on tasks that do not need the other one it is promised
    # (whole tasks: which of its frameworks fills first is its own business)
    per_role = {role: shape() for role in ("a", "b", "c")}
    frameworks = tuple(
        (
            role := draw(st.sampled_from(ROLES)),
            per_role[role.split("/")[0]] if guarantees else shape(),
            UNLIMITED if guarantees else draw(st.sampled_from((2, 6, UNLIMITED))),
        )
        for _ in range(draw(st.integers(1, 5)))
    )
    quotas = []
    budget = {"cpus": pool.millis("cpus"), "mem": pool.millis("mem")}
    for role in ("a", "b", "c"):
        if not draw(st.booleans()):
            continue
        guarantee = EMPTY
        if guarantees:
            share = draw(st.integers(0, 3))  # quarters of what is left of the pool
            millis = {n: budget[n] * share // 4 // 1000 * 1000 for n in budget}
            budget = {n: budget[n] - millis[n] for n in budget}
            guarantee = ResourceVector.from_millis({n: m for n, m in millis.items() if m})
        limit = None
        if not guarantees and draw(st.booleans()):
            limit = ResourceVector.from_millis({"cpus": draw(st.integers(1, 12)) * 1000})
        if guarantee or limit is not None:
            quotas.append((role, Quota(guarantee, limit)))
    return Case(pool, frameworks, tuple(quotas))


def run(case: Case, quotas: bool = True) -> MasterState:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s1", case.pool, 0.0)
    for index, (role, shape, wanted) in enumerate(case.frameworks):
        state.handle_add_framework(f"f{index}", 0.0, role=role)
        state.handle_update_demand(f"f{index}", shape, wanted, 0.0)
    if quotas:
        for role, quota in case.quotas:
            state.handle_set_quota(role, quota.guarantee, quota.limit, 0.0)
    state.handle_allocate(1.0)
    return state


def held(state: MasterState, role: str) -> ResourceVector:
    return sum(
        (fw.allocated for fw in state.frameworks.values() if is_within(fw.role, role)), EMPTY
    )


@settings(max_examples=150, deadline=None)
@given(cases(guarantees=False))
def test_no_subtree_ever_holds_more_than_its_limit(case: Case) -> None:
    state = run(case)
    for role, quota in case.quotas:
        if quota.limit is not None:
            assert held(state, role).millis("cpus") <= quota.limit.millis("cpus"), role


@settings(max_examples=150, deadline=None)
@given(cases(guarantees=True))
def test_feasible_guarantees_are_met_up_to_one_task(case: Case) -> None:
    assume(case.quotas)
    # feasible: the tasks each guaranteed role needs to reach its guarantee fit in the pool
    needed = EMPTY
    for role, quota in case.quotas:
        shapes = [shape for r, shape, _ in case.frameworks if is_within(r, role)]
        if shapes:
            tasks = (
                max(
                    -(-millis // shapes[0].millis(name))
                    for name, millis in quota.guarantee.millis_items()
                    if shapes[0].millis(name)
                )
                if any(shapes[0].millis(n) for n in quota.guarantee.names())
                else 0
            )
            needed = needed + shapes[0] * tasks
    assume(needed.fits_in(case.pool))
    state = run(case)
    for role, quota in case.quotas:
        shapes = [shape for r, shape, _ in case.frameworks if is_within(r, role)]
        if not shapes:
            continue  # nobody asks: its guarantee is kept free as headroom instead
        holds = held(state, role)
        # whole tasks: every guaranteed role may pass its guarantee by one task in the first
        # stage, taking room another one's last task needed
        slack = {
            name: sum(
                max((sh.millis(name) for r, sh, _ in case.frameworks if is_within(r, q)), default=0)
                for q, _ in case.quotas
            )
            for name in quota.guarantee.names()
        }
        for name, millis in quota.guarantee.millis_items():
            if any(shape.millis(name) for shape in shapes):
                assert holds.millis(name) >= millis - slack[name], (role, name, holds)


@settings(max_examples=100, deadline=None)
@given(cases(guarantees=False))
def test_quotas_that_bind_nobody_change_nothing(case: Case) -> None:
    idle = Case(case.pool, case.frameworks, (("nobody", Quota(EMPTY, case.pool * 2)),))

    def offers(state: MasterState) -> list[tuple[str, str, int]]:
        return sorted(
            (o.framework_id, str(o.resources), o.fair_tasks)
            for m in state.handle_allocate(2.0)
            if isinstance(m, SendOffers)
            for o in m.offers
        )

    def fresh(with_quota: bool) -> MasterState:
        state = MasterState(CoreConfig(validate=True))
        state.handle_add_agent("s1", case.pool, 0.0)
        for index, (role, shape, wanted) in enumerate(case.frameworks):
            state.handle_add_framework(f"f{index}", 0.0, role=role)
            state.handle_update_demand(f"f{index}", shape, wanted, 0.0)
        if with_quota:
            for role, quota in idle.quotas:
                state.handle_set_quota(role, quota.guarantee, quota.limit, 0.0)
        return state

    assert offers(fresh(True)) == offers(fresh(False))
