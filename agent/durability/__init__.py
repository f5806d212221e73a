"""What survives an agent restart: the checkpoint file and the recovery of its tasks.

- ``checkpoint``: ``CheckpointStore``, ``<work-dir>/agent.sqlite``: the state's rows, written
  change by change (``AgentState.take_changes``) and loaded as an ``AgentSnapshot``;
- ``recovery``: after a restart, each checkpointed task resumed, restarted, reattached or
  reported.

The runtime writes every change before it can be externalized (``agent.runtime.persistence``).
"""
