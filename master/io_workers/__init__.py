"""I/O worker processes: ``fairshare master --io-workers N`` (docs/architecture.md §13).

The master's core is one process, and its ceiling is one core's worth of grpc.aio and asyncio
per message. With ``--io-workers N`` (N >= 1) the core serves no public socket: N worker
processes it starts (``python -m master.io_workers``) listen on the master's one public port
(``SO_REUSEPORT``: the core holds the port bound without listening, so ``--port 0`` and the
agents' one ``--master`` address keep working; the kernel spreads the connections over the
workers). Each worker serves, with the master's TLS, authentication (``RpcGuard``) and server
limits:

- the Agent API, by the master's own ``AgentServicer`` over ``RemoteAgents`` (``AgentCalls``'
  shape): the agents' messages are decoded and checked (``master.service.convert``) in the
  worker and travel to the core batched on the worker's one link (``protocol``), where
  ``CoreLink`` applies each batch in order to the real ``AgentCalls`` and sends back, batched,
  the sessions' outcomes and what their channels give;
- every other call (Scheduler, Operator, health), forwarded to the core unchanged
  (``Forwarder``: raw bytes, the authenticated principal in trusted metadata).

The link and the forwarded calls run over the core's gRPC server on a Unix socket in the work
dir (or a temporary directory when that path is too long for a socket), mode 0600 in a directory
of mode 0700: only the master's own user reaches it, so the core trusts the principal a worker
names (``RpcGuard(forwarded_principal=...)``). ``IoWorkers`` starts the workers, restarts one
that dies, and stops them on shutdown; a worker dies with the core (``PR_SET_PDEATHSIG``) and
exits when its link ends.

Promises kept: one agent's messages are applied in the order it sent them (one stream, one
worker, one ordered link); ``registered`` leaves only after the core's register committed;
queues are bounded on both ends of a link (``QUEUE_LIMIT``, ``MAX_OUTGOING``) and full ones stop
the reading (gRPC flow control carries the backpressure to the agents' streams); a worker killed
-9 costs its clients a reconnection: the core ends that worker's sessions as broken streams
(their undelivered commands go back to the agents' outboxes), the agents reregister through
another worker, and the core starts a new worker. With ``--io-workers 0`` none of this is used.
"""

from master.io_workers.core_link import CoreLink
from master.io_workers.protocol import FORWARDED_PRINCIPAL, LINK_OPTIONS
from master.io_workers.supervisor import IoWorkers

__all__ = ["FORWARDED_PRINCIPAL", "LINK_OPTIONS", "CoreLink", "IoWorkers"]
