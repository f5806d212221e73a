"""``ShareHistory``: the frameworks' dominant and weighted shares over the last hour, for the
dashboard's chart.

Every ``interval`` seconds the dashboard side of the master takes one ``PoolSummary`` (the
figures of the snapshot the API reads that the metrics report too, without its views of every
agent, task and offer; taken on the runtime's loop) and keeps, per framework, its dominant and
weighted share and the pool's used fraction per resource. Only these numbers are kept, never the
state itself.

Invariants: at most ``window / interval`` points are kept (oldest dropped first); a point holds at
most ``max_frameworks`` frameworks (those with the largest dominant shares), so the memory is
bounded whatever the cluster does; times are wall-clock seconds; names are those the frameworks
had when the point was taken.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from master.runtime.views import PoolSummary

__all__ = ["ShareHistory"]

log = logging.getLogger("fairshare.master")


class ShareHistory:
    """Bounded samples of the frameworks' shares and the pool's utilization."""

    def __init__(
        self, interval: float = 10.0, window: float = 3600.0, max_frameworks: int = 50
    ) -> None:
        self.interval = interval
        self.window = window
        self.max_frameworks = max_frameworks
        self._points: deque[dict[str, Any]] = deque(maxlen=max(1, int(window / interval)))

    def record(self, summary: PoolSummary, at: float) -> None:
        """Keep one point of ``summary`` taken at wall-clock time ``at``."""
        largest = sorted(summary.frameworks, key=lambda f: -f.dominant_share)
        frameworks = {
            view.spec.framework_id: {
                "name": view.spec.name,
                "dominant_share": round(view.dominant_share, 6),
                "weighted_share": round(view.weighted_share, 6),
            }
            for view in largest[: self.max_frameworks]
        }
        used = summary.used.to_dict()
        utilization = {
            name: round(used.get(name, 0.0) / total, 6)
            for name, total in summary.total.to_dict().items()
            if total > 0
        }
        self._points.append({"time": at, "frameworks": frameworks, "utilization": utilization})

    def document(self) -> dict[str, Any]:
        """``/api/v1/history``: the kept points, oldest first."""
        return {"interval": self.interval, "window": self.window, "points": list(self._points)}

    async def run(self, take: Callable[[], PoolSummary | None]) -> None:
        """Record a point now and every ``interval`` seconds (until cancelled); ``take``
        returns None while there is nothing to record (a master that does not lead)."""
        while True:
            try:
                summary = take()
                if summary is not None:
                    self.record(summary, time.time())
            except Exception:  # one bad sample must not end the history
                log.exception("history.sample.failed")
            await asyncio.sleep(self.interval)
