"""``Scraper``: a thread that GETs a daemon's /metrics every ``period`` seconds, like Prometheus.

Used by ``bench_live.py --metrics-cost``. It records how long each scrape took, how many bytes
and series it returned and how many failed; ``stop()`` ends the thread (bounded join).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path


class Scraper:
    """Scrape ``http://<work_dir/metrics.addr>/metrics`` every ``period`` seconds."""

    def __init__(self, work_dir: Path, period: float = 1.0) -> None:
        address = (work_dir / "metrics.addr").read_text(encoding="utf-8").strip()
        self.url = f"http://{address}/metrics"
        self.period = period
        self.durations: list[float] = []
        self.failures = 0
        self.last_bytes = 0
        self.last_series = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5.0) as response:
                    body = response.read()
                self.durations.append(time.monotonic() - began)
                self.last_bytes = len(body)
                self.last_series = sum(
                    1 for line in body.splitlines() if line and not line.startswith(b"#")
                )
            except OSError:
                self.failures += 1
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))
