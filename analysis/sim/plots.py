"""The PNG plots of a users scenario (``shares.png``, ``utilization.png``, and ``roles.png``
when users sit in roles), drawn so that no series hides another; ``draw_roles_grid`` draws the
roles of several variants side by side (naive versus hdrf, ``analysis.sim.variants``).

Invariants: every series is labelled with the user's name (not its framework id); series that
overlap stay visible: each gets its own line style and marker, drawn in order of decreasing width
so a later line never covers an earlier one completely; the y axis runs a little past the largest
value (a line at 1.0 is not drawn on the frame); the title names the scenario, the policy and the
placement. Pure matplotlib on a figure the caller saves (``draw_figure``); ``pyplot`` comes from
``analysis.sim.output`` (matplotlib is optional).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PLOTS", "ROLE_PLOT", "draw_figure", "draw_roles_grid", "plots_of", "series_names"]

PLOTS = (
    ("dominant_share", "global dominant share", "shares.png"),
    ("utilization", "utilization", "utilization.png"),
)
ROLE_PLOT = ("role_dominant_share", "role dominant share", "roles.png")
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*")


def series_names(result: dict[str, Any]) -> dict[str, str]:
    """Label of each series key: users by name (with the id when names repeat)."""
    users = result.get("users", [])
    counts: dict[str, int] = {}
    for user in users:
        counts[user.get("name", user["id"])] = counts.get(user.get("name", user["id"]), 0) + 1
    labels = {}
    for user in users:
        name = user.get("name", user["id"])
        labels[user["id"]] = name if counts[name] == 1 else f"{name} ({user['id']})"
    return labels


def plots_of(result: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The figures of a run: shares and utilization, and the roles' shares if it has roles."""
    return (*PLOTS, ROLE_PLOT) if ROLE_PLOT[0] in result["series"] else PLOTS


def draw_figure(plt: Any, result: dict[str, Any], key: str, what: str, title: str) -> Any:
    """One figure of ``result["series"][key]`` (a matplotlib Figure; the caller saves it)."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    _draw_series(ax, result, key)
    ax.set_ylabel(what)
    ax.set_title(
        f"{title}: {what} (policy {result.get('policy', '?')},"
        f" placement {result.get('placement', '?')})",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def draw_roles_grid(plt: Any, docs: dict[str, dict[str, Any]], title: str) -> Any:
    """Each run's roles' dominant shares over time, one panel per run (two per row, in the
    order given: a naive run beside its hdrf run); a Figure the caller saves."""
    names = [name for name, doc in docs.items() if ROLE_PLOT[0] in doc["series"]]
    rows = (len(names) + 1) // 2
    columns = 1 if len(names) == 1 else 2
    fig, axes = plt.subplots(
        rows, columns, figsize=(6 * columns, 3.4 * rows), squeeze=False, sharey=True
    )
    for index, name in enumerate(names):
        ax = axes[index // 2][index % 2]
        doc = docs[name]
        _draw_series(ax, doc, ROLE_PLOT[0])
        ax.set_title(f"{name} (hierarchy {doc.get('hierarchy', '?')})", fontsize=10)
        if index % 2 == 0:
            ax.set_ylabel("dominant share held")
    for index in range(len(names), rows * columns):
        axes[index // 2][index % 2].set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _draw_series(ax: Any, result: dict[str, Any], key: str) -> None:
    """The lines of ``result["series"][key]`` on ``ax``, each its own style (module docstring)."""
    series = result["series"]
    labels = {} if key == ROLE_PLOT[0] else series_names(result)  # roles: their paths
    top = 1.0
    count = len(series[key])
    for index, (name, values) in enumerate(series[key].items()):
        points = [(t, v) for t, v in zip(series["time"], values, strict=True) if v is not None]
        if not points:
            continue
        top = max(top, max(v for _, v in points))
        ax.step(
            [t for t, _ in points],
            [v for _, v in points],
            where="post",
            label=labels.get(name, name),
            linestyle=STYLES[index % len(STYLES)],
            linewidth=1.2 + 2.0 * (count - index) / max(count, 1),
            marker=MARKERS[index % len(MARKERS)],
            markevery=max(1, len(points) // 12),
            markersize=5,
            alpha=0.9,
            zorder=2 + index,
        )
    ax.set_xlabel("time (s)")
    ax.set_ylim(0, top * 1.08)
    ax.grid(alpha=0.3)
    if count:
        ax.legend(loc="best", fontsize=8)
