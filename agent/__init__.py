"""The fairshare agent daemon, in the master's shape.

- ``core``: the pure state machine (``AgentState``) and its plain values (wire-free);
- ``runtime``: the asyncio shell: sessions with the master, commands, updates (``AgentRuntime``);
- ``durability``: the checkpoint and the recovery of its tasks after a restart;
- ``tasks``: executors, isolation, sandboxes and the task log service;
- ``wire``: conversions between the core's values and the wire API;
- ``settings``, ``config``: the settings table, and the settings resolved with their security;
- ``host_resources``: this host's resources (the default ``--resources``);
- ``metrics``, ``daemon``: Prometheus metrics, the entry point.

This ``__init__`` imports nothing: the task supervisor loads a module under it.
"""
