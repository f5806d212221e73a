"""The Mesos v1 scheduler HTTP API on the master's HTTP port, a thin adapter over the runtime's
``FrameworkCalls`` (the same entry points as the gRPC ``SchedulerServicer``): a framework written
for Mesos (pymesos, the Mesos scheduler libraries speaking JSON) subscribes here and is an
ordinary fairshare framework: the same core, DRF and role tree, filters, registry, failover
timeout, ACLs and owners. docs/from-mesos.md is the user's guide; the JSON mapping is in
``mesos_calls``, ``mesos_tasks`` and ``mesos_events``.

Routes (``add_routes``): ``POST /api/v1/scheduler`` (and ``/master/api/v1/scheduler``): a
SUBSCRIBE call is answered 200 with a chunked RecordIO stream of events and a
``Mesos-Stream-Id`` header; every other call must carry that header and is answered 202 with an
empty body. ``GET /version`` (Mesos's version document; pymesos reads it first) and ``GET
/master/redirect`` (307 to the leader) need no credentials, as in Mesos. A follower answers 307
to the leader's HTTP port (``Location: //HOST:PORT/api/v1/scheduler``), or 503 while no master
leads.

Answers: 400 naming the field for a call that is not one (``BadCall``; nothing changed), 401 or
403 from the port's authentication (HTTP basic auth: principal and secret, as Mesos and pymesos
send them), a refused runtime call by its code (``STATUS``), 413 for a body over
``MAX_BODY``, 415 for a body that is not JSON (protobuf is not spoken). Call responses close the
connection: a client's idle keep-alive connection is never closed under it between two calls.

Mesos semantics kept on top of the runtime's calls: an ACCEPT validates its tasks one by one
(``master.web.mesos_subscription``); a KILL of an unknown task is answered by
reconciling it; an ACKNOWLEDGE of an update the master no longer knows is accepted (the agent
ignores it); offer filters are cleared when a framework subscribes unsuppressed (Mesos clears
them when it disconnects: the same as the framework sees it, since nothing is offered to a
disconnected framework).

Invariants: a call is parsed whole before anything is done (a 400 changed nothing); one stream
per framework (a new SUBSCRIBE fails the old one over, as the runtime does); the stream ends when
the runtime closes its channel, the client goes away or this master stops leading (checked before
every event, as the gRPC leader gate does); the runtime hears of every stream's end
(``unsubscribe``); a stream does not hold one of the port's request slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

from aiohttp import web
from fairshare.metrics_server import PRINCIPAL, SLOT

from master.core import CoreError, NotFound
from master.model import OffersEvent, RescindEvent
from master.runtime.frameworks import FrameworkCalls
from master.web import mesos_calls as calls
from master.web.mesos_events import MESOS_VERSION, event_json, record, subscribed_json
from master.web.mesos_json import BadCall, loads
from master.web.mesos_subscription import Subscription

__all__ = ["OPEN_PATHS", "SCHEDULER_PATHS", "MesosSchedulerApi"]

SCHEDULER_PATHS: Final = ("/api/v1/scheduler", "/master/api/v1/scheduler")
OPEN_PATHS: Final = ("/version", "/master/redirect")
"""Paths Mesos serves without authentication."""
MAX_BODY: Final = 4 * 1024 * 1024
"""Bytes of a call at most (gRPC's default message size)."""
MAX_STREAMS: Final = 10_000
POLL: Final = 1.0
"""Seconds between two checks that an idle stream's client is still there."""
STATUS: Final = {
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "FAILED_PRECONDITION": 403,  # Mesos: "Framework is not subscribed"
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
}
JSON = "application/json"


def _text(status: int, message: str, **headers: str) -> web.Response:
    response = web.Response(status=status, text=message + "\n", headers=headers)
    response.force_close()
    return response


def _refused(error: CoreError) -> web.Response:
    return _text(STATUS.get(error.code, 500), error.message)


class MesosSchedulerApi:
    """The API over ``frameworks()`` (the leading runtime's, None while this master may not act
    as leader) and ``follower()`` (None while leading, else the leader's addresses)."""

    def __init__(
        self,
        frameworks: Callable[[], FrameworkCalls | None],
        follower: Callable[[], dict[str, str | None] | None] = lambda: None,
        version: str = "",
    ) -> None:
        self.frameworks = frameworks
        self.follower = follower
        self.version = version
        self.streams: dict[str, Subscription] = {}

    def add_routes(self, app: web.Application) -> None:
        """Add the scheduler endpoint, ``/version`` and ``/master/redirect``."""
        for path in SCHEDULER_PATHS:
            app.router.add_route("*", path, self.scheduler)
        app.router.add_get("/version", self.version_document)
        app.router.add_get("/master/redirect", self.redirect)

    # -- /version and the leader -----------------------------------------------------------------

    async def version_document(self, request: web.Request) -> web.Response:
        """``GET /version``: Mesos's document, the API level this master speaks."""
        document = {"version": MESOS_VERSION, "fairshare_version": self.version}
        return web.json_response(document, headers={"Cache-Control": "no-store"})

    def _leader_http(self) -> str | None:
        following = self.follower() or {}
        dashboard = following.get("dashboard")
        return urlsplit(dashboard).netloc or None if dashboard else None

    async def redirect(self, request: web.Request) -> web.Response:
        """``GET /master/redirect``: 307 to the leading master (this one while it leads)."""
        if self.follower() is None:
            return _text(307, "", Location=f"//{request.host}")
        leader = self._leader_http()
        if leader is None:
            return _text(503, "No leader elected")
        return _text(307, "", Location=f"//{leader}")

    def _not_leading(self, request: web.Request) -> web.Response | None:
        """307 to the leader, or 503, when this master does not lead; None when it does."""
        if self.follower() is None:
            return None if self.frameworks() is not None else _text(503, "Not leading now")
        leader = self._leader_http()
        if leader is None:
            return _text(503, "No leader elected")
        return _text(307, "", Location=f"//{leader}{request.path}")

    # -- calls ---------------------------------------------------------------------------------

    async def scheduler(self, request: web.Request) -> web.StreamResponse:
        """``/api/v1/scheduler``: one call."""
        if request.method != "POST":
            return _text(405, f"Expecting 'POST', received '{request.method}'", Allow="POST")
        away = self._not_leading(request)
        if away is not None:
            return away
        content_type = request.headers.get("Content-Type")
        if content_type is None:
            return _text(400, "Expecting 'Content-Type' to be present")
        if request.content_type != JSON:
            return _text(415, f"Expecting 'Content-Type' of {JSON} (protobuf is not supported)")
        body = await _body(request)
        if isinstance(body, web.Response):
            return body
        try:
            call = calls.parse_call(loads(body))
        except BadCall as error:
            return _text(400, f"Failed to validate scheduler::Call: {error}")
        frameworks = self.frameworks()
        if frameworks is None:
            return _text(503, "Not leading now")
        principal = request.get(PRINCIPAL)
        if isinstance(call.body, calls.Subscribe):
            return await self._subscribe(request, frameworks, call.body, principal)
        try:
            return self._call(request, frameworks, call, principal)
        except CoreError as error:
            return _refused(error)

    def _call(
        self, request: web.Request, frameworks: FrameworkCalls, call: calls.Call, who: str | None
    ) -> web.Response:
        stream_id = request.headers.get("Mesos-Stream-Id")
        if stream_id is None:
            return _text(400, "All non-subscribe calls should include the 'Mesos-Stream-Id' header")
        stream = self.streams.get(call.framework_id)
        if stream is None or stream.frameworks is not frameworks or stream.stream_id != stream_id:
            return _text(
                403, f"Framework {call.framework_id!r} has no subscription with this stream id"
            )
        fid, body = call.framework_id, call.body
        if isinstance(body, calls.Accept):
            stream.accept(body, who)
        elif isinstance(body, calls.Decline):
            frameworks.decline(fid, body.offer_ids, body.refuse_seconds, who)
            for offer_id in body.offer_ids:
                stream.offers.pop(offer_id, None)
        elif isinstance(body, (calls.Revive, calls.Suppress)):
            for index, role in enumerate(body.roles):
                if role != stream.role:
                    where = f"{call.type.lower()}.roles[{index}]"
                    return _text(400, f"{where}: {role!r} is not the framework's role")
            act = frameworks.revive if isinstance(body, calls.Revive) else frameworks.suppress
            act(fid, "", who)
        elif isinstance(body, calls.Kill):
            try:
                frameworks.kill(fid, body.task_id, body.agent_id, who)
            except NotFound:  # as Mesos: the task is unknown, so its state is reconciled
                frameworks.reconcile(fid, [(body.task_id, body.agent_id)], who)
        elif isinstance(body, calls.Acknowledge):
            ack = (body.agent_id, body.task_id, body.uuid)
            with contextlib.suppress(NotFound):  # an update the master no longer knows: as Mesos
                frameworks.acknowledge_many(fid, [ack], who)
        elif isinstance(body, calls.Reconcile):
            frameworks.reconcile(fid, list(body.tasks), who)
        elif isinstance(body, calls.Teardown):
            frameworks.teardown(fid, who)
        return _text(202, "")

    # -- the event stream --------------------------------------------------------------------------

    async def _subscribe(
        self,
        request: web.Request,
        frameworks: FrameworkCalls,
        body: calls.Subscribe,
        who: str | None,
    ) -> web.StreamResponse:
        if "Mesos-Stream-Id" in request.headers:
            return _text(400, "Subscribe calls should not include the 'Mesos-Stream-Id' header")
        accept = request.headers.get("Accept", "*/*")
        if not any(kind in accept for kind in (JSON, "*/*", "application/*")):
            return _text(406, f"Expecting 'Accept' to allow '{JSON}'")
        if len(self.streams) >= MAX_STREAMS:
            return _text(503, f"{MAX_STREAMS} frameworks are subscribed on this API, the most")
        response = web.StreamResponse(status=200)
        try:
            result = frameworks.subscribe(body.spec, None, body.suppressed, who)
        except NotFound as error:  # as Mesos tells a removed framework: an ERROR, then the end
            document = {"type": "ERROR", "error": {"message": error.message}}
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(record(document))
            await response.write_eof()
            return response
        except CoreError as error:
            return _refused(error)
        fid = result.framework_id
        if not body.suppressed:
            frameworks.revive(fid, "", who)  # Mesos clears a framework's filters (never refused)
        capabilities = body.capabilities
        stream = Subscription(fid, str(uuid.uuid4()), body.spec.role, "MULTI_ROLE" in capabilities,
                         "PARTITION_AWARE" in capabilities, frameworks, result.channel)  # fmt: skip
        self.streams[fid] = stream
        try:
            headers = {"Mesos-Stream-Id": stream.stream_id, "Cache-Control": "no-store"}
            response.headers.update({"Content-Type": JSON, **headers})
            response.enable_chunked_encoding()
            await response.prepare(request)
            release = request.get(SLOT)
            if release is not None:
                release()
            host, port = request.url.host or "", request.url.port or 0
            first = subscribed_json(fid, result.heartbeat_interval, result.master_id, host, port)
            await response.write(record(first))
            await self._pump(request, response, stream)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client went away: the stream ends
        finally:
            if self.streams.get(fid) is stream:
                del self.streams[fid]
            frameworks.unsubscribe(fid, stream.channel)
        return response

    async def _pump(
        self, request: web.Request, response: web.StreamResponse, stream: Subscription
    ) -> None:
        """Write the stream's events until it ends, the client leaves or the lead is lost."""
        getter: asyncio.Future[Any] | None = None
        try:
            while True:
                if getter is None:
                    getter = asyncio.ensure_future(stream.channel.get())
                done, _ = await asyncio.wait((getter,), timeout=POLL)
                if not done:
                    transport = request.transport
                    if transport is None or transport.is_closing():
                        return
                    continue
                event, getter = getter.result(), None
                if self.frameworks() is not stream.frameworks:
                    return  # not the leader any more: nothing more leaves this master
                document = event_json(event, stream.role, stream.multi_role)
                if document is None:
                    return
                if isinstance(event, OffersEvent):
                    stream.offers.update((offer.offer_id, offer) for offer in event.offers)
                elif isinstance(event, RescindEvent):
                    stream.offers.pop(event.offer_id, None)
                await response.write(record(document))
        finally:
            if getter is not None:
                getter.cancel()


async def _body(request: web.Request) -> bytes | web.Response:
    """The request's body, at most ``MAX_BODY`` bytes (413 beyond)."""
    if (request.content_length or 0) > MAX_BODY:
        return _text(413, f"The body is over {MAX_BODY} bytes")
    chunks, size = [], 0
    while chunk := await request.content.read(65536):
        size += len(chunk)
        if size > MAX_BODY:
            return _text(413, f"The body is over {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
