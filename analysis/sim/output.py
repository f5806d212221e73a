"""Writing simulation results: ``results.json`` always, PNG plots only with matplotlib.

Invariant: matplotlib is an optional extra (``pip install '.[numeric]'``), imported only here and
only when a plot is drawn; without it the document says so in ``plots_skipped`` and ``plots`` is
empty, so results never depend on whether it is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["pyplot", "write_results"]

NO_MATPLOTLIB = (
    "matplotlib is not installed (optional extra: pip install -e '.[test,numeric]', naming every"
    " extra you use: '.[numeric]' alone replaces them)"
)


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend (call only when installed)."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def write_results(
    doc: dict[str, Any],
    out: Path,
    plot: Callable[[Path], list[str]],
    skip_reason: str | None = None,
) -> None:
    """Draw the plots (``plot(out)`` returns the file names) unless ``skip_reason`` or no
    matplotlib, then write ``out/results.json``."""
    out.mkdir(parents=True, exist_ok=True)
    if skip_reason is None and importlib.util.find_spec("matplotlib") is None:
        skip_reason = NO_MATPLOTLIB
    if skip_reason is None:
        doc["plots"] = plot(out)
    else:
        doc["plots"] = []
        doc["plots_skipped"] = skip_reason
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
