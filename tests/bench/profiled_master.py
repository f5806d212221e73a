"""Run ``python -m fairshare.cli`` unchanged, with cProfile switched on and off by signals.

``python tests/bench/profiled_master.py OUT_PREFIX master --port 0 ...``: SIGUSR1 starts a new
profile of the master's thread (the event loop's, where all master code runs), SIGUSR2 stops it
and writes ``OUT_PREFIX.N.pstats`` (N = 1, 2, ... in order). ``bench_live.py --profile`` uses it
to profile each measured window alone. The profile slows the master: figures taken under it are
lower than without.
"""

from __future__ import annotations

import cProfile
import signal
import sys
from types import FrameType

from fairshare.cli import main


class SignalProfiler:
    """A cProfile.Profile per SIGUSR1..SIGUSR2 window."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.profile: cProfile.Profile | None = None
        self.written = 0

    def start(self, signum: int, frame: FrameType | None) -> None:
        if self.profile is None:
            self.profile = cProfile.Profile()
            self.profile.enable()

    def stop(self, signum: int, frame: FrameType | None) -> None:
        if self.profile is not None:
            self.profile.disable()
            self.written += 1
            self.profile.dump_stats(f"{self.prefix}.{self.written}.pstats")
            self.profile = None


if __name__ == "__main__":
    profiler = SignalProfiler(sys.argv[1])
    signal.signal(signal.SIGUSR1, profiler.start)
    signal.signal(signal.SIGUSR2, profiler.stop)
    sys.exit(main(sys.argv[2:]))
