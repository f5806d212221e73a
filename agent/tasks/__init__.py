"""How the agent runs tasks: executors, their isolation, sandboxes and the task log service.

- ``executors``: one executor per task kind (placeholders, command tasks under a supervisor)
  behind ``TaskExecutors``;
- ``isolation``: how command tasks are confined (cgroups, rlimits or nothing);
- ``sandbox``: where command tasks' files are, their collection;
- ``logs_service``: ``TaskLogServicer``, the output of command tasks over gRPC.

This package's ``__init__`` imports nothing: the task supervisor, a small Python process that
loads only the standard library, loads ``agent.tasks.executors.supervisor`` through it.
"""
