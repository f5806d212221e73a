"""Server mixes for simulated clusters: the Google mix of DRFH Table I, drawn with a seed.

Invariant: drawing is a pure function of (mix, count, scale, the ``random.Random`` passed in);
the module holds no global random state. Capacities are normalized so the maximum server is 1
CPU and 1 memory unit (multiply with ``scale`` for other units).
"""

from __future__ import annotations

import random

from fairshare.resources import ResourceVector

__all__ = ["GOOGLE_MIX", "MIXES", "draw_servers"]

GOOGLE_MIX: tuple[tuple[int, float, float], ...] = (
    # (number of servers, CPUs, memory) -- DRFH Table I, normalized to the maximum server.
    (6732, 0.50, 0.50),
    (3863, 0.50, 0.25),
    (1001, 0.50, 0.75),
    (795, 1.00, 1.00),
    (126, 0.25, 0.25),
    (52, 0.50, 0.12),
    (5, 0.50, 0.03),
    (5, 0.50, 0.97),
    (3, 1.00, 0.50),
    (1, 0.50, 0.06),
)

MIXES: dict[str, tuple[tuple[int, float, float], ...]] = {"google": GOOGLE_MIX}


def draw_servers(
    mix: str, count: int, rng: random.Random, scale: float = 1.0
) -> list[ResourceVector]:
    """``count`` servers drawn independently, each class with probability ∝ its server count."""
    table = MIXES[mix]
    weights = [float(n) for n, _, _ in table]
    picks = rng.choices(range(len(table)), weights=weights, k=count)
    return [ResourceVector(cpus=table[i][1] * scale, mem=table[i][2] * scale) for i in picks]
