"""A text progress bar for long simulations, on a stream (stderr), with no dependency.

Invariants: writes nothing unless enabled; redraws only when the shown percentage changes (so a
run of millions of steps writes at most 101 lines' worth); ``close`` ends the line. It never
touches the simulation: results are the same with or without it.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["ProgressBar", "progress_wanted"]

WIDTH = 30


def progress_wanted(flag: bool, stream: TextIO | None = None) -> bool:
    """Show a bar when asked (``--progress``) or when ``stream`` (stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    return flag or (hasattr(stream, "isatty") and stream.isatty())


class ProgressBar:
    """``bar(fraction)`` draws ``label [#####.....]  42%`` on one line of ``stream``."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.shown = -1

    def __call__(self, fraction: float) -> None:
        percent = max(0, min(100, int(fraction * 100)))
        if percent == self.shown:
            return
        self.shown = percent
        filled = percent * WIDTH // 100
        bar = "#" * filled + "." * (WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {percent:3d}%")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (only if something was drawn)."""
        if self.shown >= 0:
            self.stream.write("\n")
            self.stream.flush()
