"""The status document shown: ``fairshare status``'s table and share bars, from the one JSON
document of the cluster (``fairshare.state_document``, built from ``GetStateResponse`` and also
served by the master's HTTP API: every key is documented there and in docs/http-api.md).

``state_to_dict`` is that document (``fairshare status --json`` prints it).

Invariants:
- Pure functions: no I/O. ``share_bar`` draws a share in [0, 1] (clamped) in exactly
  ``width`` characters.
- The table says which master leads and since when (HA masters elect one; a master with the
  embedded registry leads alone from its start), then, per framework, the dominant share, the
  weighted share (dominant share / weight: what DRF orders by, as the master computed it), the
  dominant resource and running vs wanted tasks; per agent its state (a DRAINING one with its
  drain's deadline, UTC) and attributes; then the role tree (each role indented by its depth,
  with its weight, share, weighted share, dominant resource, frameworks, running tasks and
  allocation, summed over its subtree). When agents have GPUs it says that only GPU-capable
  frameworks are offered them (the master's rule: a framework without the GPU_RESOURCES
  capability is never offered an agent with GPUs, so that GPU machines are kept for GPU work,
  as Mesos does).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fairshare.role_tree import ROLE_HEADER, hierarchy_note, role_rows
from fairshare.state_document import state_document
from fairshare.v1 import operator_pb2

__all__ = ["render_share_bars", "render_table", "share_bar", "state_to_dict"]


def state_to_dict(state: operator_pb2.GetStateResponse) -> dict[str, Any]:
    """The JSON document of ``fairshare status --json``: ``fairshare.state_document``."""
    return state_document(state)


def _text(resources: dict[str, float]) -> str:
    if not resources:
        return "-"
    return ";".join(f"{name}:{value:g}" for name, value in resources.items())


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [len(title) for title in header]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines


def _leader_line(leader: dict[str, Any] | None, now: float | None = None) -> list[str]:
    """``leader ADDRESS since TIME (for 3m12s), epoch N``; nothing for a master too old to say."""
    if not leader or not leader.get("address"):
        return []
    elected = float(leader["elected_at"])
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(elected))
    held = max(0.0, (time.time() if now is None else now) - elected)
    term = f"epoch {leader['epoch']}" if leader["epoch"] else "alone (embedded registry)"
    return [f"leader {leader['address']} since {since} (for {_span(held)}), {term}"]


def _span(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def render_table(document: dict[str, Any]) -> str:
    """A readable summary: the pool, then agents, then frameworks with shares and tasks."""
    lines = [
        f"master {document['master_id'][:12]}  policy {document['policy']}"
        f"  placement {document['placement']}  version {document['version']}",
        *_leader_line(document.get("leader")),
        f"pool   total {_text(document['total'])}  used {_text(document['used'])}"
        f"  offered {_text(document['offered'])}  free {_text(document['free'])}",
        "",
    ]
    agent_rows = [
        [
            agent["id"],
            agent["hostname"],
            _agent_state(agent),
            ";".join(f"{k}:{v}" for k, v in agent["attributes"].items()) or "-",
            _text(agent["resources"]["total"]),
            _text(agent["resources"]["used"]),
            _text(agent["resources"]["free"]),
        ]
        for agent in document["agents"]
    ]
    header = ["AGENT", "HOSTNAME", "STATE", "ATTRIBUTES", "TOTAL", "USED", "FREE"]
    lines += _table(header, agent_rows)
    if not agent_rows:
        lines.append("(no agents)")
    lines.append("")
    framework_rows = [
        [
            framework["id"],
            framework["name"],
            framework["role"],
            framework["state"],
            f"{framework['weight']:g}",
            f"{framework['dominant_share']:.3f}",
            f"{framework['weighted_share']:.3f}",
            framework["dominant_resource"] or "-",
            _running_wanted(framework),
            _text(framework["allocated"]),
            " ".join(f"{state}={count}" for state, count in framework["tasks"].items()) or "-",
        ]
        for framework in document["frameworks"]
    ]
    header = ["FRAMEWORK", "NAME", "ROLE", "STATE", "WEIGHT", "SHARE", "WEIGHTED", "DOMINANT",
              "RUNNING/WANTED", "ALLOCATED", "TASKS"]  # fmt: skip
    lines += _table(header, framework_rows)
    if not framework_rows:
        lines.append("(no frameworks)")
    roles = document.get("roles") or []
    if roles:
        lines.append("")
        lines += _table(ROLE_HEADER, role_rows(roles))
        lines.append(hierarchy_note(document.get("hierarchy") or ""))
    lines += _gpu_note(document)
    return "\n".join(lines)


def _agent_state(agent: dict[str, Any]) -> str:
    """The agent's state, with a drain's deadline (UTC) when it has one."""
    deadline = agent.get("drain_deadline")
    if deadline is None:
        return str(agent["state"])
    return f"{agent['state']} (kill at {time.strftime('%H:%M:%SZ', time.gmtime(deadline))})"


def _running_wanted(framework: dict[str, Any]) -> str:
    demand = framework["demand"]
    wanted = "-" if demand is None or demand["max_tasks"] is None else str(demand["max_tasks"])
    return f"{framework['tasks'].get('RUNNING', 0)}/{wanted}"


def _gpu_note(document: dict[str, Any]) -> list[str]:
    """The GPU rule, said when it matters: some agents have GPUs."""
    gpu_agents = [a for a in document["agents"] if a["resources"]["total"].get("gpus")]
    if not gpu_agents:
        return []
    capable = [f["name"] for f in document["frameworks"] if "GPU_RESOURCES" in f["capabilities"]]
    who = ", ".join(capable) if capable else "none of the frameworks above"
    return [
        "",
        f"note: {len(gpu_agents)} agent(s) have gpus; they are offered only to frameworks with"
        f" the GPU_RESOURCES capability ({who}); others never get them, whatever they want",
    ]


_EIGHTHS = " ▏▎▍▌▋▊▉"


def share_bar(share: float, width: int, ascii_only: bool = False) -> str:
    """``share`` (clamped to [0, 1]) as a bar of exactly ``width`` characters."""
    share = min(max(share, 0.0), 1.0) if share == share else 0.0  # NaN draws empty
    if ascii_only:
        full = round(share * width)
        return "#" * full + "." * (width - full)
    eighths = round(share * width * 8)
    full, part = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    return bar + "░" * (width - len(bar))


def render_share_bars(document: dict[str, Any], width: int = 40, ascii_only: bool = False) -> str:
    """One line per framework: name, a bar of its dominant share, the share and its resource."""
    frameworks = document["frameworks"]
    if not frameworks:
        return "DOMINANT SHARE\n(no frameworks)"
    names = [f"{framework['name']}" for framework in frameworks]
    column = max(len(name) for name in names)
    lines = ["DOMINANT SHARE"]
    for name, framework in zip(names, frameworks, strict=True):
        share = framework["dominant_share"]
        resource = framework["dominant_resource"] or "-"
        weight = f"  weight {framework['weight']:g}" if framework["weight"] != 1 else ""
        running = framework["tasks"].get("RUNNING", 0)
        bar = share_bar(share, width, ascii_only)
        lines.append(
            f"{name.ljust(column)}  {bar}  {share:5.3f} {resource}{weight}  running {running}"
        )
    return "\n".join(lines)
