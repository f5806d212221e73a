"""The master's dashboard and JSON API on its metrics port
(docs/architecture.md §1 ``master/web/``, §8).

``WebApi.add_routes`` adds, beside the kernel server's ``/metrics`` and ``/health``
(``fairshare.metrics_server.serve_http``):

- ``GET /``: the dashboard, one self-contained page (HTML with its CSS and script inlined from
  ``static/``; no CDN, no build step) that polls the JSON API;
- ``GET /api/v1/state``: the whole cluster (the status document, ``fairshare.state_document``,
  through the ``StateDocuments`` the daemon gives);
- ``GET /api/v1/frameworks``, ``/api/v1/agents``: those lists with the pool summary;
- ``GET /api/v1/tasks?offset=0&limit=100&framework_id=F&agent_id=A&state=RUNNING``: one page
  of tasks;
- ``GET /api/v1/roles``: the role tree and its totals (``documents.roles_document``);
- ``GET /api/v1/events?since=N``: recent noteworthy events (``events.RecentEvents``);
- ``GET /api/v1/history``: shares over the last hour (``history.ShareHistory``);
- ``GET /api/v1/completed``: the ended tasks and removed frameworks
  (``completed.CompletedHistory``; full view only, like the events);
- ``GET /api/v1/logs?task_id=T&framework_id=F&file=stdout&tail=200``: the end of a command
  task's log, read by the master from its agent on the caller's behalf (``read_logs``, the
  daemon's ``master.service.task_log_reader``) with the grant the runtime gives the caller's
  principal (``grant_logs``: ``GrantLogAccess``'s decision, so exactly what ``fairshare logs``
  may read);
- ``POST /api/v1/maintenance``: an agent maintenance action (``master.web.maintenance``).

Permissions: each request is checked once, by the runtime's ``Authority``
(``allow("view_state", principal)``: the same decision, and the same count of denials, as gRPC's
``GetState``). ``WebApi.add_routes`` also adds the port's gate, a middleware inside
``fairshare.metrics_server``'s authentication: when the master authenticates, every path but
``/health`` and the ``ungated`` ones (the Mesos scheduler API's, whose calls the runtime checks
itself: ``master.web.mesos_scheduler``; and ``RUNTIME_CHECKED``, the logs and maintenance,
which the runtime authorizes as their gRPC calls) is checked there (``/metrics`` and unknown
paths too), a refused principal gets 403
``{"error": "permission denied"}`` (before a follower's 503), and the routes use the rule it got;
``/metrics`` (``FULL_VIEW_PATHS``) needs the full level: a redacted viewer gets 403 there;
without authentication nothing is checked up front and an API route asks the authority when it
needs the rule (a refusal: 403 with the ACL's reason; the events and history are then empty; the
dashboard page needs no rule). ``authority()`` is the leading runtime's authority, or on a
follower one with the same ACL (the daemon wires it).

Invariants: every answer about the state (state, frameworks, agents, tasks, roles) is built
from exactly one ``ClusterSnapshot`` taken synchronously on
the runtime's loop (``snapshot()``: the same snapshot gRPC ``GetState`` and the metrics read, as
much of it as the request's rule lets its principal see: a principal with a redacted view gets
redacted documents (``views.redact``) and no events, history or completed lists, which name
frameworks and agents;
aiohttp's handlers run on that loop, so it is one step of it); the
snapshot is immutable, so turning it into JSON happens in a worker thread, off the loop (a big
cluster's document does not delay allocation runs); nothing here keeps a copy of the state; a bad
query parameter is 400 with ``{"error": ...}`` naming it; every other path is 404 (aiohttp's
router); answers are never cached by the browser; the logs and maintenance paths change or read
nothing the runtime did not allow their principal (``grant_logs``, the maintenance actions). A
master that does not lead (HA masters) answers the dashboard and every API path 503, saying
which master leads and where its dashboard is.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Awaitable, Callable, Collection
from importlib import resources
from typing import Any, Final

from aiohttp import web
from fairshare.metrics_server import PRINCIPAL
from fairshare.task_states import TaskState

from master.acl import Rule
from master.core import CoreError, PermissionDenied
from master.runtime.authority import Authority
from master.runtime.log_grants import LogGrant
from master.runtime.operator import OperatorCalls
from master.runtime.views import ClusterSnapshot, redact
from master.web.completed import CompletedHistory
from master.web.documents import MAX_PAGE, StateDocuments, page_of_tasks, roles_document
from master.web.events import RecentEvents
from master.web.history import ShareHistory
from master.web.maintenance import MAINTENANCE_PATH, http_status, maintenance_answer

__all__ = ["LOGS_PATH", "MAX_TAIL", "RUNTIME_CHECKED", "LogRead", "WebApi", "dashboard_page"]

LOGS_PATH: Final = "/api/v1/logs"
RUNTIME_CHECKED: Final = (LOGS_PATH, MAINTENANCE_PATH)
"""Paths the port's gate leaves to the runtime, which authorizes them as their gRPC calls."""
MAX_TAIL: Final = 10_000
LogRead = Callable[[LogGrant, str, str, bool, int], Awaitable[bytes]]
"""``(grant, task_id, framework_id, stderr, tail) -> bytes``: a task's log from its agent."""
SCRIPTS: Final = ("charts.js", "completed.js", "details.js", "dashboard.js")
"""The page's scripts, inlined in this order into one ``<script>`` (one scope; the last starts
the page's refresh loop)."""


async def _no_logs(*_: object) -> bytes:
    raise CoreError("this master cannot read agents' logs")


NO_STORE = {"Cache-Control": "no-store"}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
FULL_VIEW_PATHS: Final = frozenset({"/metrics"})
"""Paths only a principal with the full ``view_state`` reads (the metrics name every framework
and role: a redacted viewer gets 403, as Mesos and Nomad gate metrics behind an ACL)."""
VIEW_RULE: Final = web.RequestKey("fairshare.view_rule", Rule)
"""Key of the request's ``view_state`` rule, once the authority gave it."""


def dashboard_page() -> str:
    """The dashboard: ``static/index.html`` with ``dashboard.css`` and ``SCRIPTS`` inlined."""
    static = resources.files("master.web") / "static"
    page = (static / "index.html").read_text(encoding="utf-8")
    css = (static / "dashboard.css").read_text(encoding="utf-8")
    script = "\n".join((static / name).read_text(encoding="utf-8") for name in SCRIPTS)
    return page.replace("/*DASHBOARD_CSS*/", css).replace("/*DASHBOARD_JS*/", script)


class BadQuery(Exception):
    """A query parameter the API cannot use (400)."""


def _follower_answer(request: web.Request, following: dict[str, str | None]) -> web.Response:
    """503 from a master that does not lead: which master does, and its dashboard."""
    leader, dashboard = following.get("leader"), following.get("dashboard")
    text = f"this master is a follower of {leader}" if leader else "this master does not lead"
    if not leader:
        text += " and knows no leader now (an election is on)"
    if request.path == "/":
        link = (
            f' <a href="{html.escape(dashboard)}">{html.escape(dashboard)}</a>' if dashboard else ""
        )
        page = f"<!doctype html><title>fairshare: follower</title><p>{html.escape(text)}.{link}</p>"
        return web.Response(text=page, status=503, content_type="text/html", headers=NO_STORE)
    document = {"error": text, "leader": leader, "dashboard": dashboard}
    return web.json_response(document, status=503, headers=NO_STORE)


def _int_param(request: web.Request, name: str, default: int, most: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadQuery(f"{name}: {text!r} is not an integer") from None
    if not 0 <= value <= most:
        raise BadQuery(f"{name}: {value} is not in [0, {most}]")
    return value


def _json(document: dict[str, Any]) -> web.Response:
    return web.json_response(document, headers=NO_STORE)


async def _json_off_loop(build: Callable[[], dict[str, Any]]) -> web.Response:
    """Build a document from an immutable snapshot and encode it in a worker thread."""
    body = await asyncio.to_thread(lambda: json.dumps(build()).encode("utf-8"))
    return web.Response(body=body, content_type="application/json", headers=NO_STORE)


def _open_authority() -> Callable[[], Authority]:
    """An authority of its own allowing everything (``OPEN``, no authentication)."""
    authority = Authority()
    return lambda: authority


class WebApi:
    """The dashboard and the ``/api/v1`` handlers over the leading runtime's ``snapshot()``,
    checked by ``authority()`` (None: an open one, ``OPEN`` ACL without authentication)."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        events: RecentEvents,
        history: ShareHistory,
        authority: Callable[[], Authority] | None = None,
        follower: Callable[[], dict[str, str | None] | None] = lambda: None,
        ungated: Collection[str] = (),
        *,
        completed: CompletedHistory | None = None,
        operator: Callable[[], OperatorCalls | None] = lambda: None,
        read_logs: LogRead = _no_logs,
        documents: StateDocuments | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._documents = documents
        self.ungated = frozenset((*ungated, *RUNTIME_CHECKED))
        self.completed = completed or CompletedHistory()
        self.operator = operator
        self.read_logs = read_logs
        self.authority: Callable[[], Authority] = authority or _open_authority()
        self.events = events
        self.history = history
        self.follower = follower
        self._page = dashboard_page().encode("utf-8")

    @property
    def documents(self) -> StateDocuments:
        """The status documents the daemon gave (``master.service.state_documents``)."""
        if self._documents is None:
            raise RuntimeError("WebApi needs documents= to serve the state API")
        return self._documents

    def rule(self, request: web.Request) -> Rule:
        """The request's ``view_state`` rule: the gate's, else the authority's now (once per
        request; ``PermissionDenied``, counted by the authority, when it refuses)."""
        rule = request.get(VIEW_RULE)
        if rule is None:
            rule = self.authority().allow("view_state", request.get(PRINCIPAL))
            request[VIEW_RULE] = rule
        return rule

    def view(self, request: web.Request) -> ClusterSnapshot:
        """What the request's principal may see (``PermissionDenied`` when nothing)."""
        rule = self.rule(request)
        snapshot = self.snapshot()
        return redact(snapshot, request.get(PRINCIPAL)) if rule.level == "redacted" else snapshot

    def full(self, request: web.Request) -> bool:
        """True when the request's principal sees the whole state."""
        try:
            return self.rule(request).level == "full"
        except PermissionDenied:
            return False

    def add_routes(self, app: web.Application) -> None:
        """Add the port's gate (module docstring), the dashboard and the API to ``app``."""
        app.middlewares.append(self._gate)
        routes = {
            "/": self.dashboard,
            "/api/v1/state": self.state,
            "/api/v1/frameworks": self.frameworks,
            "/api/v1/agents": self.agents,
            "/api/v1/tasks": self.tasks,
            "/api/v1/roles": self.roles,
            "/api/v1/events": self.recent_events,
            "/api/v1/history": self.share_history,
            "/api/v1/completed": self.completed_history,
            LOGS_PATH: self.task_log,
        }
        for path, handler in routes.items():
            app.router.add_get(path, self._bad_query_is_400(handler))
        app.router.add_post(MAINTENANCE_PATH, self._bad_query_is_400(self.maintenance))

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """When the master authenticates: one check of every path but ``/health``."""
        if (
            request.path != "/health"
            and request.path not in self.ungated
            and (self.authority().authenticated)
        ):
            try:
                rule = self.rule(request)
            except PermissionDenied:
                return web.json_response({"error": "permission denied"}, status=403)
            if request.path in FULL_VIEW_PATHS and rule.level != "full":
                error = f"permission denied: {request.path} needs the full view_state"
                return web.json_response({"error": error}, status=403)
        return await handler(request)

    def _bad_query_is_400(self, handler: Handler) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            following = self.follower()
            if following is not None:
                return _follower_answer(request, following)
            try:
                return await handler(request)
            except BadQuery as error:
                return web.json_response({"error": str(error)}, status=400, headers=NO_STORE)
            except PermissionDenied as error:  # the view was refused (without authentication)
                return web.json_response({"error": error.message}, status=403, headers=NO_STORE)
            except CoreError as error:  # a runtime's refusal (logs)
                status = http_status(error)
                return web.json_response({"error": error.message}, status=status, headers=NO_STORE)

        return wrapped

    async def dashboard(self, request: web.Request) -> web.Response:
        """``/``: the dashboard page."""
        return web.Response(
            body=self._page, content_type="text/html", charset="utf-8", headers=NO_STORE
        )

    async def state(self, request: web.Request) -> web.Response:
        """``/api/v1/state``: the whole cluster."""
        snapshot = self.view(request)
        return await _json_off_loop(lambda: self.documents.state(snapshot))

    async def frameworks(self, request: web.Request) -> web.Response:
        """``/api/v1/frameworks``: the pool summary and every framework."""
        snapshot = self.view(request)

        return await _json_off_loop(lambda: self.documents.state(snapshot, ("frameworks",)))

    async def agents(self, request: web.Request) -> web.Response:
        """``/api/v1/agents``: the pool summary and every agent."""
        snapshot = self.view(request)

        return await _json_off_loop(lambda: self.documents.state(snapshot, ("agents",)))

    async def roles(self, request: web.Request) -> web.Response:
        """``/api/v1/roles``: the role tree (a redacted view shows it whole: role paths and
        figures name no framework)."""
        snapshot = self.view(request)
        return await _json_off_loop(lambda: roles_document(snapshot, self.documents))

    async def tasks(self, request: web.Request) -> web.Response:
        """``/api/v1/tasks``: one page of tasks, optionally of one framework or state."""
        offset = _int_param(request, "offset", 0, 2**31)
        limit = _int_param(request, "limit", 100, MAX_PAGE)
        state = request.query.get("state")
        if state is not None:
            state = state.upper()
            if state not in TaskState.__members__:
                raise BadQuery(f"state: {state!r} is not a task state")
        framework_id = request.query.get("framework_id") or None
        agent_id = request.query.get("agent_id") or None
        tasks = self.view(request).tasks
        return await _json_off_loop(
            lambda: page_of_tasks(
                tasks, self.documents, offset, limit, framework_id, state, agent_id
            )
        )

    async def recent_events(self, request: web.Request) -> web.Response:
        """``/api/v1/events?since=N``: the recent noteworthy events after sequence ``N``."""
        since = _int_param(request, "since", 0, 2**62)
        return _json({"events": self.events.since(since) if self.full(request) else []})

    async def share_history(self, request: web.Request) -> web.Response:
        """``/api/v1/history``: shares and utilization over the last hour."""
        if not self.full(request):
            return _json({"interval": self.history.interval, "window": 0, "points": []})
        return _json(self.history.document())

    async def completed_history(self, request: web.Request) -> web.Response:
        """``/api/v1/completed``: ended tasks and removed frameworks, newest first."""
        if not self.full(request):
            return _json({"tasks": [], "frameworks": []})
        return _json(self.completed.document())

    async def task_log(self, request: web.Request) -> web.Response:
        """``/api/v1/logs``: the end of a task's stdout or stderr, as ``fairshare logs``
        would print it for the request's principal."""
        task_id = request.query.get("task_id", "")
        if not task_id:
            raise BadQuery("task_id: must be given")
        framework_id = request.query.get("framework_id", "")
        file = request.query.get("file", "stdout")
        if file not in ("stdout", "stderr"):
            raise BadQuery(f"file: {file!r} is not stdout or stderr")
        tail = _int_param(request, "tail", 200, MAX_TAIL)
        operator = self.operator()
        if operator is None:
            return web.json_response({"error": "this master does not lead"}, status=503)
        granted = operator.grant_logs(task_id, framework_id, request.get(PRINCIPAL))
        data = await self.read_logs(granted, task_id, framework_id, file == "stderr", tail)
        return web.Response(body=data, content_type="text/plain", charset="utf-8", headers=NO_STORE)

    async def maintenance(self, request: web.Request) -> web.Response:
        """``POST /api/v1/maintenance``: an agent action (``master.web.maintenance``)."""
        return await maintenance_answer(request, self.operator())
