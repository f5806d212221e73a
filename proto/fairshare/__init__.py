"""fairshare: the shared kernel every process stands on (docs/architecture.md §1).

The wire API (``fairshare.v1``: the .proto files and their generated code) and the vocabulary
the master, the agent and the SDK share: ``resources`` (``ResourceVector``), ``task_states``
(names, terminal states and the one rule of how a state changes), ``command`` (what a command
task runs and the shape rules every process applies to it), ``wire`` (the conversions of
those to and from messages), ``settings`` (flags > environment > TOML > defaults, durations),
``logs`` (one log line per event), ``health``, ``metrics_server``, ``sqlite_transaction`` and
``cli`` (the ``fairshare`` command's table of subcommands).

Rules (import contracts in CI): the kernel imports none of ``master``, ``agent`` or
``framework_sdk`` (``cli`` names their modules as strings and imports only the one a command
needs); ``resources`` and ``task_states`` are pure (standard library only), so the allocation
core may use them without loading gRPC.
"""
