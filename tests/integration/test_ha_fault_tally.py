"""The HA fault tally (issue 12): the leader killed, paused and cut off from etcd in turn under
a steady workload; no task lost without a report or launched twice, no acknowledged registry
write lost. ``ha_fault_scenario.py`` describes the scenario (and runs it alone)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ha_fault_scenario import HaScenario


@pytest.mark.parametrize("io_workers", [0, 2], ids=["one-process", "io-workers"])
def test_ha_fault_tally_loses_nothing(tmp_path: Path, io_workers: int) -> None:
    scenario = HaScenario(tmp_path, io_workers)
    try:
        result = scenario.run(rounds=1)
    finally:
        scenario.stop()
    print("\n" + "\n".join(result.lines()))
    tasks = result.tasks
    assert sum(tasks.faults.values()) == 3
    assert result.watch.changes >= 3
    assert tasks.launched > 7  # B's 2 s tasks ended and were replaced meanwhile
    assert tasks.accounted == tasks.launched, result.lines()
    assert not tasks.lost_unreported
    assert tasks.duplicate_launches == 0
    assert result.weights_acknowledged > 0
    assert not result.weights_lost, result.lines()
    assert result.fenced_checks == 2 and not result.overlaps, result.lines()
