"""The seed papers' experiments on the simulator: DRF Table 1, DRFH Fig. 2-3 and Fig. 4."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from fairshare.resources import ResourceVector

from analysis.sim.engine import Simulator
from analysis.sim.scenario import Scenario, parse_scenario
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def load(name: str, **changes: object) -> Scenario:
    raw = json.loads((SCENARIOS / name).read_text())
    raw.update(changes)
    return parse_scenario(raw)


# -- DRF Table 1 -----------------------------------------------------------------------------------
#
# The sequence of progressive-filling picks the core makes, one task at a time: the core does a
# whole run at once and batches its offers, so to show the order in which it serves frameworks
# the trace lets it pick one task per run (it asks for the frameworks in fairness order and
# declares one more wanted task for the first one that can still place a task, accepts the offer,
# and repeats until nobody can take another task). Only core calls change state.


@dataclass(frozen=True, slots=True)
class Pick:
    """One task given to ``framework_id``, and every framework's dominant share after it."""

    framework_id: str
    agent_id: str
    shares: dict[str, float]


def _try_one(state: MasterState, framework_id: str, limit: int, now: float) -> Pick | None:
    fw = state.frameworks[framework_id]
    shape, wanted = fw.demand, fw.wanted
    if shape is None or fw.live_tasks >= min(wanted, limit):
        return None
    others = {fid: (f.demand, f.wanted) for fid, f in state.frameworks.items() if fid != fw.id}
    for fid, (other_shape, _) in others.items():
        state.handle_update_demand(fid, other_shape, state.frameworks[fid].live_tasks, now)
    state.handle_update_demand(framework_id, shape, fw.live_tasks + 1, now)
    messages = state.handle_allocate(now)
    for fid, (other_shape, other_wanted) in others.items():
        state.handle_update_demand(fid, other_shape, other_wanted, now)
    state.handle_update_demand(framework_id, shape, wanted, now)
    for message in messages:
        if isinstance(message, SendOffers):
            offer = message.offers[0]
            task = TaskLaunch(f"{framework_id}-{fw.live_tasks + 1}", "task", offer.resources)
            state.handle_accept(framework_id, [offer.offer_id], [task], now, refuse_seconds=0.0)
            shares = {fid: state.dominant_share(fid) for fid in state.frameworks}
            return Pick(framework_id, offer.agent_id, shares)
    return None


def trace_picks(state: MasterState, now: float = 0.0, limit: int = 10_000) -> list[Pick]:
    """Let the core pick one task at a time until no framework can take one more."""
    picks: list[Pick] = []
    while len(picks) < limit:
        for framework_id in state.ordered_frameworks():
            pick = _try_one(state, framework_id, limit, now)
            if pick is not None:
                picks.append(pick)
                break
        else:
            return picks
    return picks


def table1_state() -> MasterState:
    # The core breaks ties (equal shares) by times chosen, then framework id: B's id sorts first
    # so that, as in the paper, B is picked first when both shares are 0.
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("server", ResourceVector(cpus=9, mem=18), 0.0)
    for framework_id, shape in (("fw-1-B", "cpus:3;mem:1"), ("fw-2-A", "cpus:1;mem:4")):
        state.handle_add_framework(framework_id, 0.0)
        state.handle_update_demand(framework_id, ResourceVector.parse(shape), 100, 0.0)
    return state


def test_drf_table1_sequence_of_picks_and_shares() -> None:
    picks = trace_picks(table1_state())
    names = ["B" if p.framework_id == "fw-1-B" else "A" for p in picks]
    assert names == ["B", "A", "A", "B", "A"]
    assert [p.shares["fw-1-B"] for p in picks] == pytest.approx([1 / 3, 1 / 3, 1 / 3, 2 / 3, 2 / 3])
    assert [p.shares["fw-2-A"] for p in picks] == pytest.approx([0, 2 / 9, 4 / 9, 4 / 9, 2 / 3])


def test_drf_table1_in_one_allocation_run_and_in_the_simulator() -> None:
    result = Simulator(load("drf-table1.json")).run()
    running = {u["name"]: u["tasks_running"] for u in result.users}
    assert running == {"A": 3, "B": 2}
    assert result.shares["fw-1-B"][-1] == pytest.approx(2 / 3)
    assert result.shares["fw-2-A"][-1] == pytest.approx(2 / 3)
    assert result.utilization == {"cpus": [1.0, 1.0], "mem": [pytest.approx(14 / 18)] * 2}


# -- DRFH Fig. 2-3 ---------------------------------------------------------------------------------


def running(scenario: Scenario) -> dict[str, int]:
    return {u["id"]: u["tasks_running"] for u in Simulator(scenario).run().users}


def test_drfh_fig2_per_server_drf_gives_6_and_6() -> None:
    raw = json.loads((SCENARIOS / "drfh-fig3.json").read_text())
    totals = {"user-1": 0, "user-2": 0}
    per_server = []
    for agent in raw["agents"]:
        alone = parse_scenario({**raw, "agents": [agent]})
        got = running(alone)
        per_server.append(got)
        for user_id, count in got.items():
            totals[user_id] += count
    assert per_server == [{"user-1": 5, "user-2": 1}, {"user-1": 1, "user-2": 5}]
    assert totals == {"user-1": 6, "user-2": 6}


def test_drfh_fig3_best_fit_gives_10_and_10() -> None:
    scenario = load("drfh-fig3.json")
    assert running(scenario) == {"user-1": 10, "user-2": 10}
    result = Simulator(scenario).run()
    # Each user is confined to "its" server: global dominant share 5/7 each (DRFH eq. 7).
    assert result.shares["user-1"][-1] == pytest.approx(5 / 7)
    assert result.shares["user-2"][-1] == pytest.approx(5 / 7)


def test_drfh_fig3_first_fit_falls_back_to_6_and_6() -> None:
    # First-Fit puts each user's first tasks on server 1 (the first that fits), like per-server
    # DRF; only Best-Fit steers each user to the server that suits its shape.
    assert running(load("drfh-fig3.json", placement="first-fit")) == {"user-1": 6, "user-2": 6}


# -- DRFH Fig. 4 -----------------------------------------------------------------------------------


def shares_at(result_times: list[float], series: list[float | None], t: float) -> float:
    index = max(i for i, when in enumerate(result_times) if when <= t)
    value = series[index]
    assert value is not None
    return value


@pytest.fixture(scope="module")
def fig4() -> Simulator:
    simulator = Simulator(load("drfh-fig4.json"))
    simulator.result = simulator.run()  # type: ignore[attr-defined]
    return simulator


def test_drfh_fig4_pool_is_drawn_from_table1(fig4: Simulator) -> None:
    total = fig4.state.total
    assert len(fig4.state.agents) == 100
    # The paper's draw has 52.75 CPU and 51.32 memory units; ours (seed 1) has:
    assert (total["cpus"], total["mem"]) == (53.25, 47.0)


def test_drfh_fig4_competing_users_get_equal_global_dominant_shares(fig4: Simulator) -> None:
    result = fig4.result  # type: ignore[attr-defined]
    times, shares = result.times, result.shares

    def at(user: str, t: float) -> float:
        return shares_at(times, shares[user], t)

    # user 1 alone: limited by memory (0.3 per task), as in the paper (40% CPU, 62% memory).
    assert at("user-1", 150) == pytest.approx(0.562, abs=0.005)
    # users 1 and 2 (paper: 44% each).
    assert abs(at("user-1", 450) - at("user-2", 450)) <= 0.02
    assert at("user-1", 450) == pytest.approx(0.455, abs=0.01)
    # three users (paper: 26% each): users 1 and 3 equal; user 2 higher only because the
    # servers it holds cannot host a task of user 1 or 3 (0.5 CPU / 0.25 mem servers).
    assert abs(at("user-1", 1000) - at("user-3", 1000)) <= 0.02
    assert at("user-1", 1000) == pytest.approx(0.281, abs=0.01)
    assert at("user-2", 1000) >= at("user-1", 1000)
    # users 2 and 3 after user 1 left.
    assert abs(at("user-2", 1450) - at("user-3", 1450)) <= 0.02


def test_drfh_fig4_three_user_phase_is_pareto_efficient() -> None:
    simulator = Simulator(load("drfh-fig4.json", until=1000))
    simulator.run()
    for shape in ("cpus:0.2;mem:0.3", "cpus:0.1;mem:0.3"):
        task = ResourceVector.parse(shape)
        assert not any(task.fits_in(a.free) for a in simulator.state.agents.values())
