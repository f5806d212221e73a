"""``fairshare.work_dir_lock``: one holder at a time, named to whoever is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from fairshare.work_dir_lock import WorkDirLock, WorkDirLocked


def test_a_second_holder_is_refused_with_the_first_ones_description(tmp_path: Path) -> None:
    first = WorkDirLock.acquire(tmp_path, "master", "pid 1, fairshare master (starting)")
    first.describe("pid 1, fairshare master serving 10.0.0.1:5050")
    with pytest.raises(WorkDirLocked, match=r"held by pid 1, fairshare master serving 10\.0"):
        WorkDirLock.acquire(tmp_path, "master", "pid 2")
    assert "pid 1" in (tmp_path / "master.lock").read_text()  # the refused one wrote nothing
    first.release()
    first.release()  # idempotent
    second = WorkDirLock.acquire(tmp_path, "master", "pid 2")
    assert (tmp_path / "master.lock").read_text() == "pid 2\n"
    second.release()
