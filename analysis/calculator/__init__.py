"""``fairshare allocate``: the allocation of a case file, by the master's core or the papers.

``case`` reads and checks a case file (``case_roles`` its role tree), ``allocation`` allocates
it (whole tasks by ``master.core``, divisible ones by ``analysis.fluid``), ``command`` is the
subcommand (flags, exit codes).
"""

from analysis.calculator.allocation import allocate
from analysis.calculator.case import MODES, POLICIES, Case, CaseError, load_case_text, parse_case

__all__ = ["MODES", "POLICIES", "Case", "CaseError", "allocate", "load_case_text", "parse_case"]
