"""How the agent runs tasks: one executor per task kind, behind one small interface.

- ``base``: ``TaskEvent`` (what an executor reports) and ``Executor`` (what the runtime calls:
  launch, kill, kill_all, running, wait_idle, aclose);
- ``placeholder``: placeholder tasks as asyncio timers;
- ``command``: command tasks as real processes, each under its own ``supervisor`` process;
- ``router``: ``TaskExecutors``, the one executor the runtime holds, which hands each task to the
  executor of its kind and reattaches recovered command tasks.

This package's ``__init__`` imports nothing: ``supervisor`` is run as its own small Python
process and must load only the standard library (and ``agent.tasks.isolation.cgroups``).
"""
