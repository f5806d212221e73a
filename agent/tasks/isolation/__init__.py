"""How command tasks are confined: cgroups (``cgroups``), rlimits, or nothing (``modes``).

This package's ``__init__`` imports nothing: ``cgroups`` is also loaded by the task supervisor,
a small Python process that must load only the standard library.
"""
