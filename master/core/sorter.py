"""The ``Sorter``: frameworks in fairness order, kept sorted as their allocations change.

Like Mesos's DRF sorter: entries are ``(key, times_chosen, framework_id)`` so ties on the fairness
key go to the framework chosen fewer times, then to the smaller id. An update removes the old
entry and adds the new one (O(log n), sortedcontainers). When the pool total changes every key
changes at once; the owner then calls ``invalidate`` and the sorter rebuilds lazily, on the next
read, through the ``key_of`` callback (Mesos's lazy full re-sort).

Invariants:
- each framework appears at most once; ``_entries[fid]`` is exactly the tuple stored in the list;
- when not invalid, the list is sorted by ``(key, times_chosen, id)`` with keys as of the last
  ``add``/``update``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sortedcontainers import SortedList

__all__ = ["Sorter", "SorterEntry"]

SorterEntry = tuple[float, int, str]


class Sorter:
    """Frameworks ordered by ``(fairness key, times chosen, id)``; lowest first."""

    __slots__ = ("_entries", "_invalid", "_key_of", "_list")

    def __init__(self, key_of: Callable[[str], tuple[float, int]]) -> None:
        """``key_of(framework_id)`` returns the current ``(key, times_chosen)``."""
        self._key_of = key_of
        self._list: SortedList = SortedList()
        self._entries: dict[str, SorterEntry] = {}
        self._invalid = False

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, framework_id: object) -> bool:
        return framework_id in self._entries

    def add(self, framework_id: str) -> None:
        """Insert a framework with its current key (no-op if present: it is updated instead)."""
        if framework_id in self._entries:
            self.update(framework_id)
            return
        key, chosen = self._key_of(framework_id)
        entry = (key, chosen, framework_id)
        self._entries[framework_id] = entry
        if not self._invalid:
            self._list.add(entry)

    def discard(self, framework_id: str) -> None:
        """Remove a framework if present."""
        entry = self._entries.pop(framework_id, None)
        if entry is not None and not self._invalid:
            self._list.remove(entry)

    def update(self, framework_id: str) -> None:
        """Re-position a framework after its allocation (or weight) changed: remove then add."""
        old = self._entries.get(framework_id)
        if old is None:
            return
        key, chosen = self._key_of(framework_id)
        entry = (key, chosen, framework_id)
        if entry == old:
            return
        self._entries[framework_id] = entry
        if not self._invalid:
            self._list.remove(old)
            self._list.add(entry)

    def invalidate(self) -> None:
        """Every key changed (the pool total did): rebuild on the next read."""
        self._invalid = True

    def _rebuild(self) -> None:
        entries = {}
        for framework_id in self._entries:
            key, chosen = self._key_of(framework_id)
            entries[framework_id] = (key, chosen, framework_id)
        self._entries = entries
        self._list = SortedList(entries.values())
        self._invalid = False

    def ordered(self) -> Iterator[str]:
        """Framework ids, most deprived first."""
        if self._invalid:
            self._rebuild()
        for entry in list(self._list):
            yield entry[2]

    def take_entries(self) -> list[SorterEntry]:
        """Lend the entries, sorted, to an allocation run (a sorted list is a valid binary heap).

        Until ``restore_entries`` the sorter is empty; the run must give every entry back.
        """
        if self._invalid:
            self._rebuild()
        entries = list(self._list)
        self._list = SortedList()
        self._entries = {}
        return entries

    def restore_entries(self, entries: list[SorterEntry]) -> None:
        """Take back the entries lent by ``take_entries``, re-keyed by the run."""
        self._list = SortedList(entries)
        self._entries = {entry[2]: entry for entry in entries}

    def entry(self, framework_id: str) -> SorterEntry | None:
        """The stored entry of a framework (for inspection and invariant checks)."""
        if self._invalid:
            self._rebuild()
        return self._entries.get(framework_id)

    def check(self) -> None:
        """Assert the sorter's invariants against the current keys (for ``validate``)."""
        if self._invalid:
            self._rebuild()
        assert len(self._list) == len(self._entries), "sorter list and index differ in size"
        for framework_id, entry in self._entries.items():
            key, chosen = self._key_of(framework_id)
            assert entry == (key, chosen, framework_id), (
                f"sorter entry {entry} of {framework_id} is stale: key is {(key, chosen)}"
            )
        assert list(self._list) == sorted(self._entries.values()), "sorter list is out of order"
