"""Discrete-event simulator over ``master.core`` (no network, no threads, no wall clock).

Modules: ``scenario`` (scenario files, checked), ``servers`` (the Google mix of DRFH Table I),
``engine`` (the simulator), ``dynamic`` (the dynamic model of Bonald & Roberts), ``command``
(``fairshare simulate``). Randomness only from a ``random.Random`` seeded by the scenario.
"""
