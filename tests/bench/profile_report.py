"""Print the hot spots of the master's profiles written by ``profiled_master.py``.

``print_profiles(prefix, phases, top)`` reads ``prefix.PHASE.pstats`` for each measured phase of
``bench_live`` and prints, for each, the ``top`` functions by own time
(``tottime``) with their call counts and cumulative times; paths are shortened to the repository
or to ``site-packages``.
"""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def where(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name  # a built-in
    short = path
    if path.startswith(str(ROOT)):
        short = path[len(str(ROOT)) + 1 :]
    elif "site-packages/" in path:
        short = path.split("site-packages/", 1)[1]
    elif "/lib/python" in path:
        short = "stdlib/" + path.split("/lib/python", 1)[1].split("/", 1)[1]
    return f"{short}:{line}({name})"


AREAS = (
    ("master code (master/, framework_sdk/)", ("master/", "framework_sdk/")),
    (
        "gRPC aio internals (Cython: Context.run, grpc/)",
        ("<method 'run' of '_contextvars", "grpc/"),
    ),
    (
        "asyncio event loop (asyncio, selectors, epoll)",
        ("stdlib/asyncio/", "stdlib/selectors", "select.epoll"),
    ),
    (
        "protobuf and generated code",
        (
            "google/protobuf",
            "fairshare/v1",
            "<method 'SerializeToString",
            "<method 'ParseFromString",
            "FromString",
        ),
    ),
    ("logging", ("stdlib/logging/",)),
)


def area_of(name: str) -> str:
    for area, markers in AREAS:
        for marker in markers:
            if marker in name:
                return area
    return "other (builtins, stdlib)"


def print_areas(stats: Any, total: float) -> None:
    """Own time summed by area: where the master's main thread spends its CPU."""
    sums: dict[str, float] = {}
    for key, (_, _, own, _, _) in stats.stats.items():
        area = area_of(where(key))
        sums[area] = sums.get(area, 0.0) + own
    for area, own in sorted(sums.items(), key=lambda item: item[1], reverse=True):
        print(f"  {own:7.2f} s {own / total if total else 0.0:6.1%}  {area}")


def print_profile(path: Path, title: str, top: int) -> None:
    stats: Any = pstats.Stats(str(path))
    total = stats.total_tt
    print(f"\nmaster profile, {title}: {total:.1f} s of profiled CPU (main thread), by area:")
    print_areas(stats, total)
    print(f"top {top} functions by own time:")
    print(f"  {'own s':>7} {'own %':>6} {'cum s':>7} {'calls':>10}  function")
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for key, (_, calls, own, cumulative, _callers) in rows:
        share = own / total if total else 0.0
        print(f"  {own:7.2f} {share:6.1%} {cumulative:7.2f} {calls:10,d}  {where(key)}")


def print_profiles(prefix: str, phases: list[str], top: int) -> None:
    """Print the profile of each phase in ``phases`` that was written."""
    for phase in phases:
        path = Path(f"{prefix}.{phase}.pstats")
        if path.exists():
            print_profile(path, phase, top)
        else:
            print(f"\nno master profile for {phase}")
