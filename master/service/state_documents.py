"""The HTTP API's status documents, built as ``fairshare status --json`` builds them: the
snapshot to ``GetStateResponse`` (``master.service.state``, what ``GetState`` answers), then the
kernel's document of it (``fairshare.state_document``). The daemon gives ``WIRE_DOCUMENTS`` to
the web layer, which never touches the wire API itself.

Invariants: one definition of every key (the kernel's); the HTTP API serves the message whole
(``GetState`` trims it to its 16 MiB limit, JSON over HTTP has none); pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

from fairshare.role_tree import roles_to_dicts
from fairshare.state_document import (
    agent_document,
    framework_document,
    offer_document,
    summary_document,
    task_document,
)

from master.runtime.views import ClusterSnapshot, TaskView
from master.service.state import state_to_pb, task_to_pb

__all__ = ["WIRE_DOCUMENTS", "WireDocuments"]

ALL_LISTS: Final = ("agents", "frameworks", "offers", "tasks", "roles")


class WireDocuments:
    """``master.web.documents.StateDocuments`` over the wire API's messages."""

    def state(
        self, snapshot: ClusterSnapshot, lists: Collection[str] | None = None
    ) -> dict[str, Any]:
        """The summary and the ``lists`` named, all of them for None (see
        ``master.web.documents.StateDocuments.state``)."""
        lists = ALL_LISTS if lists is None else lists
        message = state_to_pb(snapshot, fit=False)
        document = summary_document(message)
        if "agents" in lists:
            document["agents"] = [agent_document(agent) for agent in message.agents]
        if "frameworks" in lists:
            document["frameworks"] = [framework_document(f) for f in message.frameworks]
        if "offers" in lists:
            document["offers"] = [offer_document(offer) for offer in message.offers]
        if "tasks" in lists:
            document["tasks"] = [task_document(task) for task in message.tasks]
        if "roles" in lists:
            document["hierarchy"] = message.hierarchy
            document["roles"] = roles_to_dicts(message.roles)
        return document

    def tasks(self, views: Sequence[TaskView]) -> list[dict[str, Any]]:
        """The documents of these tasks."""
        return [task_document(task_to_pb(view)) for view in views]


WIRE_DOCUMENTS: Final = WireDocuments()
