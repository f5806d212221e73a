"""The papers' fluid (divisible-task) allocations, for ``fairshare allocate --mode fluid`` and
the dynamic simulator.

``solver`` (``solve_fluid``: DRF, DRFH, asset fairness, PF and CEEI), ``tree`` (Static H-DRF and
the naive hierarchy over a role tree), ``quota`` (guarantees and limits in the tree's filling),
``linear_program`` (the exact simplex under DRFH). Pure: no I/O, randomness or clock.
"""
