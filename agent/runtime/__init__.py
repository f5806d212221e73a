"""The agent's asyncio shell: sessions with the master over gRPC around the pure ``AgentState``.

``AgentRuntime`` (``agent_runtime``) assembles the parts: ``Persistence`` (``persistence``: the
checkpoint writes and the recovery at start), ``TaskReports`` (``reports``), ``Commands``
(``commands``: the master's messages applied), ``Outbox`` (``outbox``: status updates and
heartbeats), ``Registrar`` (``registration``) and ``Sessions`` (``session``). Beside them: the
``Connect`` stream of one session (``stream``), the delay before the next session
(``reconnect``), the runtime's settings and the master's (``config``) and its event-loop
primitives (``loop``).
"""

from agent.core.records import AgentMetrics
from agent.runtime.agent_runtime import AgentRuntime
from agent.runtime.config import RuntimeConfig
from agent.runtime.loop import AgentFatalError

__all__ = ["AgentFatalError", "AgentMetrics", "AgentRuntime", "RuntimeConfig"]
