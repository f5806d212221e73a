"""The agent's pure core: its state machine (``AgentState``) and the plain values it exchanges.

Pure means: the standard library and the kernel's pure vocabulary only (``fairshare.resources``,
``fairshare.task_states``, ``fairshare.command``); no grpc, asyncio, protobuf or wire API, no
clock and no global randomness (times, uuids and jitter are passed in). An import-linter
contract in pyproject.toml enforces it; ``agent.wire`` converts to and from the wire.

- ``records``: the values (``AgentSpec``, ``TaskSpec``, ``StatusUpdate``, ``TaskView``,
  ``TaskReason``, ...);
- ``state``: ``AgentState``, with its answers in ``decisions`` and its checkpoint seam in
  ``snapshot``; its parts: ``tracked_task`` (a task's record and the launch check),
  ``update_queues`` (the per-task FIFOs of unacknowledged updates and their retry times) and
  ``changed_rows`` (what changed since the checkpoint last took its changes);
"""

from agent.core.decisions import (
    KillDecision,
    LaunchResult,
    Outgoing,
    RegisterCall,
    ReregisterCall,
)
from agent.core.records import (
    AgentMetrics,
    AgentSpec,
    CommandTask,
    CommandUsage,
    LaunchSpec,
    PlaceholderSpec,
    StatusUpdate,
    TaskKey,
    TaskProblem,
    TaskReason,
    TaskSpec,
    TaskView,
)
from agent.core.snapshot import AgentSnapshot, CheckpointChanges, TaskChange
from agent.core.state import AgentState

__all__ = [
    "AgentMetrics",
    "AgentSnapshot",
    "AgentSpec",
    "AgentState",
    "CheckpointChanges",
    "CommandTask",
    "CommandUsage",
    "KillDecision",
    "LaunchResult",
    "LaunchSpec",
    "Outgoing",
    "PlaceholderSpec",
    "RegisterCall",
    "ReregisterCall",
    "StatusUpdate",
    "TaskChange",
    "TaskKey",
    "TaskProblem",
    "TaskReason",
    "TaskSpec",
    "TaskView",
]
