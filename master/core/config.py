"""``CoreConfig``: the settings of the allocation core (immutable; picked once per master)."""

from __future__ import annotations

from dataclasses import dataclass

from master.core.placement import DEFAULT_SAMPLE_SIZE

__all__ = ["CoreConfig"]


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """Settings of the allocation core."""

    policy: str = "drf"
    placement: str = "best-fit"
    sample_size: int = DEFAULT_SAMPLE_SIZE
    seed: int = 0
    default_refuse_seconds: float = 5.0
    offer_timeout: float | None = None
    slots_per_agent: int = 14
    offer_id_prefix: str = "o"
    validate: bool = False
    # The fit-aware choice (master.core.fit): how many frameworks within one task of the most
    # deprived may claim its chosen agent; 0 is plain progressive filling.
    fit_window: int = 8
