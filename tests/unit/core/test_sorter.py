"""The ``Sorter``: frameworks ordered by (key, times chosen, id), remove-then-add, lazy re-sort."""

from __future__ import annotations

import pytest

from master.core.sorter import Sorter


class Keys:
    """A ``key_of`` callback over a dict, counting calls."""

    def __init__(self, **keys: float) -> None:
        self.keys = dict(keys)
        self.chosen: dict[str, int] = dict.fromkeys(keys, 0)
        self.calls = 0

    def __call__(self, framework_id: str) -> tuple[float, int]:
        self.calls += 1
        return self.keys[framework_id], self.chosen[framework_id]

    def set(self, framework_id: str, key: float, chosen: int | None = None) -> None:
        self.keys[framework_id] = key
        self.chosen.setdefault(framework_id, 0)
        if chosen is not None:
            self.chosen[framework_id] = chosen


def make(keys: Keys) -> Sorter:
    sorter = Sorter(keys)
    for framework_id in keys.keys:
        sorter.add(framework_id)
    return sorter


def test_orders_by_key_first() -> None:
    sorter = make(Keys(a=0.5, b=0.1, c=0.3))
    assert list(sorter.ordered()) == ["b", "c", "a"]
    assert len(sorter) == 3
    assert "a" in sorter
    assert "z" not in sorter
    sorter.check()


def test_ties_go_to_fewer_times_chosen_then_smaller_id() -> None:
    keys = Keys(b=0.2, a=0.2, c=0.2)
    keys.chosen.update(a=2, b=1, c=1)
    sorter = make(keys)
    assert list(sorter.ordered()) == ["b", "c", "a"]
    keys.chosen.update(a=0)
    sorter.update("a")
    assert list(sorter.ordered()) == ["a", "b", "c"]
    sorter.check()


def test_update_removes_then_adds_with_the_new_key() -> None:
    keys = Keys(a=0.1, b=0.2, c=0.3)
    sorter = make(keys)
    keys.set("a", 0.9)
    assert list(sorter.ordered()) == ["a", "b", "c"]  # not updated yet: old key kept
    with pytest.raises(AssertionError, match="stale"):
        sorter.check()
    sorter.update("a")
    assert list(sorter.ordered()) == ["b", "c", "a"]
    assert sorter.entry("a") == (0.9, 0, "a")
    sorter.check()


def test_update_of_an_absent_framework_is_ignored() -> None:
    keys = Keys(a=0.1)
    sorter = make(keys)
    keys.set("z", 0.0)
    sorter.update("z")
    assert list(sorter.ordered()) == ["a"]
    assert sorter.entry("z") is None


def test_add_of_a_present_framework_updates_it() -> None:
    keys = Keys(a=0.1, b=0.2)
    sorter = make(keys)
    keys.set("a", 0.3)
    sorter.add("a")
    assert list(sorter.ordered()) == ["b", "a"]
    assert len(sorter) == 2
    sorter.check()


def test_discard_removes_and_tolerates_absent() -> None:
    sorter = make(Keys(a=0.1, b=0.2))
    sorter.discard("a")
    sorter.discard("a")
    sorter.discard("nope")
    assert list(sorter.ordered()) == ["b"]
    assert len(sorter) == 1
    sorter.check()


def test_invalidate_is_lazy_and_rebuilds_on_read() -> None:
    keys = Keys(a=0.1, b=0.2, c=0.3)
    sorter = make(keys)
    keys.keys.update(a=0.9, b=0.5, c=0.1)
    sorter.invalidate()
    calls = keys.calls
    sorter.discard("b")  # while invalid: bookkeeping only, no key is read
    keys.set("d", 0.2)
    sorter.add("d")  # reads d's key once
    assert keys.calls == calls + 1
    assert list(sorter.ordered()) == ["c", "d", "a"]  # rebuilt with fresh keys
    assert keys.calls == calls + 1 + 3
    assert list(sorter.ordered()) == ["c", "d", "a"]
    assert keys.calls == calls + 1 + 3  # no second rebuild
    sorter.check()


def test_update_while_invalid_then_rebuild() -> None:
    keys = Keys(a=0.1, b=0.2)
    sorter = make(keys)
    sorter.invalidate()
    keys.set("a", 0.7)
    sorter.update("a")
    assert sorter.entry("a") == (0.7, 0, "a")
    assert list(sorter.ordered()) == ["b", "a"]
    sorter.check()


def test_check_detects_stale_entries_and_is_quiet_when_fresh() -> None:
    keys = Keys(a=0.1, b=0.2)
    sorter = make(keys)
    sorter.check()
    keys.chosen["b"] = 5
    with pytest.raises(AssertionError):
        sorter.check()
    sorter.update("b")
    sorter.check()


def test_empty_sorter() -> None:
    sorter = Sorter(Keys())
    assert list(sorter.ordered()) == []
    assert len(sorter) == 0
    sorter.invalidate()
    assert list(sorter.ordered()) == []
    sorter.check()
