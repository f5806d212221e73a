"""The master's HTTP port (``--metrics-port``): Prometheus metrics, ``/health``, the dashboard
and JSON API (``master.web``) and Mesos's v1 scheduler API (``master.web.mesos_scheduler``),
over the leadership of the moment.

Invariants:
- the port serves the gRPC port's TLS and principals (``HttpSecurity``); ``/health`` and Mesos's
  ``/version`` and ``/master/redirect`` are open; the ``--advertise`` host is a name it answers;
- while this master leads, metrics, health, the authority and the Mesos API read the leading
  runtime; while it follows, metrics carry no runtime sample, health names the leader, the
  authority is a standby one with the same ACL (a refused principal gets its 403 before the
  follower's 503) and the Mesos API has no framework calls (307 to the leader);
- a port that cannot be bound is logged and ``start_http`` returns None: the master exits 1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Callable
from typing import Any

from fairshare.cli import version as fairshare_version
from fairshare.health import SERVING, HealthServicer
from fairshare.logs import log_event
from fairshare.metrics_server import HttpSecurity

from master.config import MasterConfig
from master.ha.leadership import Leadership
from master.metrics import (
    MasterCollector,
    MasterSample,
    MetricsServer,
    build_registry,
    on_loop,
    sampler,
    serve_http,
)
from master.runtime.authority import Authority
from master.runtime.counters import RuntimeCounters
from master.runtime.frameworks import FrameworkCalls
from master.security import MasterSecurity
from master.service.rpc_metrics import RpcMetricsInterceptor
from master.web.mesos_scheduler import OPEN_PATHS, MesosSchedulerApi
from master.web.routes import WebApi

__all__ = ["http_authority", "mesos_api", "start_http"]

log = logging.getLogger("fairshare.master")


def _http_security(security: MasterSecurity, advertise: str | None) -> HttpSecurity:
    """The HTTP port: the same TLS and principals; ``view_state`` is checked by the web layer's
    gate (``master.web.routes``), through ``http_authority``; Mesos's ``/version`` and
    ``/master/redirect`` are open, as in Mesos; the ``--advertise`` host is a name it answers."""
    return HttpSecurity(
        security.server,
        security.authenticator,
        open_paths=frozenset({"/health", *OPEN_PATHS}),
        host_names=frozenset({advertise.rpartition(":")[0]} if advertise else ()),
    )


def mesos_api(leadership: Leadership) -> MesosSchedulerApi:
    """The Mesos v1 scheduler API over the leading runtime's framework calls (None while this
    master may not act as leader: a follower, or a leader past its lease)."""

    def frameworks() -> FrameworkCalls | None:
        term = leadership.term
        return term.runtime.frameworks if term is not None and leadership.valid() else None

    return MesosSchedulerApi(frameworks, leadership.follower_view, fairshare_version())


def http_authority(leadership: Leadership) -> Callable[[], Authority]:
    """The authority the HTTP port asks: the leading runtime's (its denials counted with the
    gRPC ones), or while following one with the same ACL (a refused principal gets its 403
    before the follower's 503)."""
    config = leadership.config
    standby = Authority(config.acl, config.authenticated, config.limits)

    def authority() -> Authority:
        term = leadership.term
        return term.runtime.state.authority if term is not None else standby

    return authority


async def start_http(
    config: MasterConfig,
    security: MasterSecurity,
    leadership: Leadership,
    rpc: RpcMetricsInterceptor,
    health: HealthServicer,
    web: WebApi,
    mesos: MesosSchedulerApi,
    io_queues: Callable[[], dict[str, tuple[int, int]]] = dict,
) -> MetricsServer | None:
    """Serve /metrics, /health, the dashboard and /api/v1 on ``--metrics-port``; None (after
    logging why) if it cannot bind. ``io_queues``: the I/O workers' link depths, if any."""

    def sample() -> MasterSample:
        term = leadership.term
        queues = io_queues()
        if term is None:
            counts = dict(rpc.counts)
            return MasterSample(None, RuntimeCounters(), counts, {}, leadership.sample(), queues)
        taken = sampler(term.runtime.state, term.runtime.operator, rpc.counts)()
        return dataclasses.replace(taken, leadership=leadership.sample(), io_queues=queues)

    take = on_loop(asyncio.get_running_loop(), sample)

    def healthy() -> dict[str, Any]:
        term = leadership.term
        state = term.runtime.state if term is not None else None
        return {
            "status": "SERVING" if health.status("") == SERVING else "NOT_SERVING",
            "daemon": "master",
            "role": "leader" if term is not None else "follower",
            "leader": term.info.address if term is not None else leadership.leader_address,
            "master_id": state.master_id if state is not None else "",
            "recovering": state.recovering if state is not None else False,
            "draining": state.draining if state is not None else False,
        }

    def add_routes(app: Any) -> None:
        web.add_routes(app)
        mesos.add_routes(app)

    try:
        return await serve_http(
            build_registry(MasterCollector(take), process=True),
            config.host,
            config.metrics_port,
            healthy,
            add_routes,
            security=_http_security(security, config.advertise),
        )
    except (OSError, ssl.SSLError) as error:
        log_event(
            log,
            "metrics.listen.failed",
            logging.ERROR,
            host=config.host,
            port=config.metrics_port,
            error=error,
        )
        return None
