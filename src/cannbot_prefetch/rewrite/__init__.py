"""Stage 7a: plan x model source -> rewritten source (switch-guarded npu_prefetch calls).

- `check.dependency_problem(module_code, site)`: static legality of a site (the planner uses it).
- `engine.rewrite_source(code, sites, ...)`: pure, code in, code out (+ what was applied/refused).
- `files.apply_plan(...)`: file IO around it: hashes, backups, atomic writes, revert.
"""

from .check import dependency_problem

__all__ = ["dependency_problem"]
