"""Stage 4: windows' candidates -> places in the model source (class, attribute, insertion).

Best available first, and the site records which was used:
  1. stack  - the kernel's call stack names the file(line) of the call (stack.py);
  2. shape  - the kernel's weight shape matches an evaluated linear-like attribute, ties broken
              by the order the layer runs them (shape.py);
  3. manual - `--target CLASS.ATTR` / `--window EXPR` (manual.py).
The insertion (lowest common caller, dependency, weight expression) comes from place.py and is
checked with apply's own per-site checks (`rewrite.engine.check_site`: legality's rule, the
join, the layer link, hand-written prefetches): a placement apply would refuse is never planned;
when none passes, the candidate is rejected with apply's reason.
"""

from .mapper import Mapped, Mapper, TargetName, checker, target_ref

__all__ = ["Mapped", "Mapper", "TargetName", "checker", "target_ref"]
