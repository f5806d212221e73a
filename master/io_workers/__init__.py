"""I/O worker processes: ``fairshare master --io-workers N`` (docs/architecture.md §13).

The master's core is one process, and its ceiling is one core's worth of grpc.aio and asyncio
per message. With ``--io-workers N`` (N >= 1; ``auto``, the default, is one fewer than the
usable cores from 4 on, else 0) the core serves no public socket: N worker
processes it starts (``python -m master.io_workers``) listen on the master's one public port
(``SO_REUSEPORT``: the core holds the port bound without listening, so ``--port 0`` and the
agents' one ``--master`` address keep working; the kernel spreads the connections over the
workers). Each worker serves, with the master's TLS, authentication (``RpcGuard``) and server
limits:

- the Agent and Scheduler APIs, by the master's own ``AgentServicer`` and ``SchedulerServicer``
  over ``RemoteAgents`` and ``RemoteFrameworks`` (``AgentCalls``' and ``FrameworkCalls``'
  shapes): the clients' messages are decoded and checked (``master.service.convert``) in the
  worker and travel to the core batched on the worker's one link (``WorkerLink``,
  ``protocol``), where ``CoreLink`` applies each batch in order to the real ``AgentCalls`` and
  ``FrameworkCalls`` and sends back, batched, the calls' and sessions' outcomes and what their
  channels give;
- every other call (Operator, health), forwarded to the core unchanged (``Forwarder``: raw
  bytes, the authenticated principal in trusted metadata).

The link is a stream connection to the core's link socket (length-prefixed frames, not gRPC);
the forwarded calls go to the core's gRPC server on a second Unix socket beside it. Both are in
the work dir (or a temporary directory when that path is too long for a socket), mode 0600 in a
directory of mode 0700: only the master's own user reaches them, so the core trusts the
principal a worker names (``RpcGuard(forwarded_principal=...)``). ``IoWorkers`` starts the
workers, restarts one that dies, and stops them on shutdown; a worker dies with the core
(``PR_SET_PDEATHSIG``) and exits when its link ends.

Promises kept: one agent's messages are applied in the order it sent them (one stream, one
worker, one ordered link), and so are one framework connection's calls; ``registered`` leaves
only after the core's register committed, and a framework call is answered once applied;
queues are bounded on both ends of a link (``QUEUE_LIMIT``, ``MAX_OUTGOING``) and full ones
stop the reading (the socket's buffers carry the backpressure to the clients' streams); a worker
killed -9 costs its clients a reconnection: the core ends that worker's sessions as broken
streams (their undelivered commands go back to the agents' outboxes) and its subscriptions as
broken framework streams, the agents reregister and the frameworks resubscribe through another
worker, and the core starts a new worker. With ``--io-workers 0`` none of this is used.
"""

from master.io_workers.core_link import CoreLink
from master.io_workers.protocol import FORWARDED_PRINCIPAL, LINK_OPTIONS
from master.io_workers.supervisor import IoWorkers

__all__ = ["FORWARDED_PRINCIPAL", "LINK_OPTIONS", "CoreLink", "IoWorkers"]
