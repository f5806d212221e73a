"""Offline analysis: the allocation calculator, the papers' fluid models and the simulator.

It stands beside the daemons and drives the master's own allocation core (``master.core``) as a
library, with no network, threads or wall clock: ``calculator`` (``fairshare allocate``),
``fluid`` (the papers' divisible-task allocations and the exact linear programs under them) and
``sim`` (the discrete-event and dynamic simulators, ``fairshare simulate``).

Invariants (import contracts in pyproject.toml): analysis imports the kernel ``fairshare`` and
``master.core`` only, never the master's shell, the agent or the SDK; the daemons and the SDK
never import analysis. Its policy, placement and hierarchy names and its weight rule are the
core's tables and checks (``FAIRNESS_POLICIES``, ``PLACEMENT_POLICIES``, ``HIERARCHIES``,
``check_weight``), plus fluid mode's one policy of its own, ``ceei``.
"""
