"""The fault tally (issue 5): faults injected into a real cluster under a steady workload, then
every task launched is accounted for; none may be lost without a report, launched twice or
reported twice. ``fault_scenario.py`` describes the scenario (and runs it alone)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_scenario import Scenario


@pytest.mark.parametrize("io_workers", [0, 2], ids=["one-process", "io-workers"])
def test_fault_tally_loses_no_task(tmp_path: Path, io_workers: int) -> None:
    scenario = Scenario(tmp_path, io_workers)
    try:
        result = scenario.run()
    finally:
        scenario.stop()
    print("\n".join(result.lines()))
    assert sum(result.faults.values()) >= 4
    assert result.faults["dropped acknowledgements"] > 0
    assert result.launched > 7  # B's 2 s tasks ended and were replaced meanwhile
    assert result.accounted == result.launched, result.lines()
    assert not result.lost_unreported
    assert result.duplicate_launches == 0
    assert result.duplicate_updates == 0
