"""Agent maintenance from the dashboard: ``POST /api/v1/maintenance`` (``master.web.routes``).

The body is a JSON object ``{"action": NAME, "agent_ids": [ID, ...]}``; ``AGENT_ACTIONS`` maps
each action's name to the runtime's operator call that does it (``deactivate``, ``reactivate``:
the gRPC ``DeactivateAgents`` and ``ReactivateAgents``; ``drain``, ``drain_now``: ``DrainAgent``
without a deadline, its tasks left to end, or with a deadline of 0, its tasks killed at once,
agent by agent), so a new action is one more entry. The
call is authorized where the gRPC one is, by the runtime's ``Authority`` (``maintain_agents``
for the request's principal, each refusal counted in ``Authority.denied``); the HTTP port's
``view_state`` gate does not apply to this path (the daemon lists it as ungated), so the
decision is exactly the gRPC call's.

Cross-site requests cannot change anything: the action is a POST (a GET is 405), its body must
be ``Content-Type: application/json`` (415 otherwise) and carry the header ``REQUEST_HEADER``
(403 without; neither can a plain cross-site form set, and the port answers no CORS preflight),
and a request whose ``Origin`` is not the port's own is 403.

Invariants: a refused request (bad body, missing header, a foreign origin, a refusal of the
runtime) changes no state, and its answer is ``{"error": ...}`` with the HTTP status of the
cause (``http_status``): 400 naming the field, 403, 404 for an unknown agent, 409, 503 while
the master does not lead; the runtime's calls change all the agents or none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from aiohttp import web
from fairshare.metrics_server import PRINCIPAL

from master.core import CoreError
from master.runtime.operator import OperatorCalls

__all__ = [
    "AGENT_ACTIONS",
    "MAINTENANCE_PATH",
    "MAX_AGENTS",
    "REQUEST_HEADER",
    "AgentAction",
    "http_status",
    "maintenance_answer",
]

MAINTENANCE_PATH: Final = "/api/v1/maintenance"
REQUEST_HEADER: Final = "X-Fairshare-Request"
"""The header a state-changing request must carry (any non-empty value; the page sends
``dashboard``)."""
MAX_AGENTS: Final = 1000
"""Agents one request may name."""

AgentAction = Callable[[OperatorCalls, Sequence[str], str | None], None]


def _drain(grace: float | None) -> AgentAction:
    """Drain each agent in turn (``OperatorCalls.drain_agent``: no offers from now on; its tasks
    run to their end, or are killed after ``grace`` seconds); the first refusal stops there."""

    def drain(operator: OperatorCalls, ids: Sequence[str], who: str | None) -> None:
        for agent_id in ids:
            operator.drain_agent(agent_id, grace, who)

    return drain


AGENT_ACTIONS: Final[Mapping[str, AgentAction]] = {
    "deactivate": lambda operator, ids, who: operator.deactivate_agents(ids, who),
    "reactivate": lambda operator, ids, who: operator.reactivate_agents(ids, who),
    "drain": _drain(None),
    "drain_now": _drain(0.0),
}
"""The maintenance actions by name: each the runtime's call for the agents and the principal."""

_STATUS: Final = {
    "INVALID_ARGUMENT": 400,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
}


def http_status(error: CoreError) -> int:
    """The HTTP status of a runtime's refusal (500 for a code without one)."""
    return _STATUS.get(error.code, 500)


class Refused(Exception):
    """A request refused before the runtime is asked: its HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


def _checked(request: web.Request, body: bytes) -> tuple[str, list[str]]:
    """The action and the agent ids of a request (``Refused`` saying what is wrong)."""
    if not request.headers.get(REQUEST_HEADER):
        raise Refused(403, f"header {REQUEST_HEADER} is missing (state changes need it)")
    if not _same_origin(request):
        raise Refused(403, f"origin {request.headers['Origin']!r} is not this port's")
    if request.content_type != "application/json":
        raise Refused(415, "the body must be application/json")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(document, dict):
        raise Refused(400, "the body must be a JSON object with action and agent_ids")
    action = document.get("action")
    if action not in AGENT_ACTIONS:
        known = ", ".join(AGENT_ACTIONS)
        raise Refused(400, f"action: {action!r} is not one of {known}")
    ids = document.get("agent_ids")
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > MAX_AGENTS
        or not all(isinstance(i, str) and i for i in ids)
    ):
        raise Refused(400, f"agent_ids: must be a list of 1 to {MAX_AGENTS} non-empty strings")
    unknown = set(document) - {"action", "agent_ids"}
    if unknown:
        raise Refused(400, f"{sorted(unknown)[0]}: not a field of a maintenance request")
    return str(action), [str(i) for i in ids]


async def maintenance_answer(request: web.Request, operator: OperatorCalls | None) -> web.Response:
    """Do the request's action on the leading runtime's ``operator`` (None: 503)."""
    headers = {"Cache-Control": "no-store"}
    try:
        action, ids = _checked(request, await request.read())
    except Refused as refused:
        return web.json_response({"error": str(refused)}, status=refused.status, headers=headers)
    if operator is None:
        return web.json_response({"error": "this master does not lead"}, status=503)
    try:
        AGENT_ACTIONS[action](operator, ids, request.get(PRINCIPAL))
    except CoreError as error:
        answer: dict[str, Any] = {"error": error.message}
        return web.json_response(answer, status=http_status(error), headers=headers)
    return web.json_response({"action": action, "agent_ids": ids}, headers=headers)
