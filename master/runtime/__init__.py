"""The async shell around the allocation core (docs/architecture.md §1, §3, §10).

``MasterRuntime`` (``master_runtime``) assembles one ``RuntimeState`` (``state``) with the parts
composed around it: ``Dispatcher`` (``dispatch``), ``AgentCalls`` (``agents``; a returning
agent's tasks in ``agent_rejoin``), ``AgentLoss`` (``agent_loss``), ``FrameworkCalls``
(``frameworks``), ``OperatorCalls`` (``operator``) and ``Recovery`` (``recovery``). Beside them:
the task book (``taskbook``), the links and channels of the streams (``sessions``), the agents'
deadlines and heartbeat interval (``liveness``), the counters (``counters``) and the snapshot
for GetState and metrics (``views`` builds it from the values of ``cluster_snapshot``).
"""

from master.runtime.frameworks import UNLIMITED_TASKS, SubscribeResult
from master.runtime.master_runtime import MasterRuntime
from master.runtime.state import RuntimeConfig, RuntimeState, Unavailable

__all__ = [
    "UNLIMITED_TASKS",
    "MasterRuntime",
    "RuntimeConfig",
    "RuntimeState",
    "SubscribeResult",
    "Unavailable",
]
