"""The JSON documents of the master's HTTP API (``/api/v1/...``): the status document, built
once, from the ``GetStateResponse`` the master's ``GetState`` would answer.

The document itself is the kernel's (``fairshare.state_document``: the same one ``fairshare
status --json`` prints, key for key). The web layer never touches the wire API: the daemon gives
it a ``StateDocuments`` (``master.service.state_documents``) that turns the snapshot the request
may see into that message and the message into the document. What is here is only what the
HTTP API adds around it: one page of tasks, and the role tree's totals. ``docs/http-api.md``
documents every key.

Invariants: pure functions of the snapshot and the documents given (no I/O, no clock); lists
keep the snapshot's order (sorted by id; roles in the tree's pre-order); a page never holds more
than ``MAX_PAGE`` tasks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final, Protocol

from fairshare.resources import ResourceVector
from fairshare.roles import parent

from master.runtime.views import ClusterSnapshot, TaskView

__all__ = ["ALL_LISTS", "MAX_PAGE", "StateDocuments", "page_of_tasks", "roles_document"]

MAX_PAGE: Final = 1000
"""The most tasks one ``/api/v1/tasks`` page holds."""

ALL_LISTS: Final = ("agents", "frameworks", "offers", "tasks", "roles")
"""The lists of the whole status document (``/api/v1/state``)."""


class StateDocuments(Protocol):
    """The status document of a snapshot (``fairshare.state_document``), built from the
    ``GetStateResponse`` of that snapshot."""

    def state(
        self, snapshot: ClusterSnapshot, lists: Collection[str] | None = None
    ) -> dict[str, Any]:
        """The summary (master, leader, pool, counts) and the ``lists`` named (of
        ``ALL_LISTS``; None: all of them), with the hierarchy when roles are asked for."""
        ...

    def tasks(self, views: Sequence[TaskView]) -> list[dict[str, Any]]:
        """The documents of these tasks."""
        ...


def roles_document(snapshot: ClusterSnapshot, documents: StateDocuments) -> dict[str, Any]:
    """``/api/v1/roles``: the hierarchy, the role tree and its totals (over top-level roles)."""
    top = [view for view in snapshot.roles if parent(view.path) is None]
    allocated = sum((view.allocated for view in top), ResourceVector())
    state = documents.state(snapshot, ("roles",))
    return {
        "hierarchy": state["hierarchy"],
        "total": state["total"],
        "roles": state["roles"],
        "totals": {
            "roles": len(snapshot.roles),
            "frameworks": sum(view.subtree_frameworks for view in top),
            "running_tasks": sum(view.running_tasks for view in top),
            "allocated": allocated.to_dict(),
        },
    }


def page_of_tasks(
    tasks: Sequence[TaskView],
    documents: StateDocuments,
    offset: int,
    limit: int,
    framework_id: str | None = None,
    state: str | None = None,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """Tasks ``offset .. offset+limit`` of those matching the filters, and how many match."""
    matching = [
        view
        for view in tasks
        if (framework_id is None or view.framework_id == framework_id)
        and (state is None or view.status.state.value == state)
        and (agent_id is None or view.agent_id == agent_id)
    ]
    return {
        "offset": offset,
        "limit": limit,
        "total": len(matching),
        "tasks": documents.tasks(matching[offset : offset + limit]),
    }
