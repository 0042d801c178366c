"""Where a site goes, and whether its dependency is legal there (static, no torch).

The rule (seed 003 "图模式下的依赖节点", CONTRACTS "Defaults"): the dependency must be defined
before the insertion point in the method that receives the call, and its value must flow into the
call that runs the target, directly or through the statements in between, *after* the insertion
point. A dependency that only reaches the target through a value computed before the prefetch
(the seed's wrong example: `x` feeds `self.attention(x)` whose output feeds the MLP) is refused:
in GE graph mode the Cmo node would hang off a stale node.

One package, imported plainly by both stages that need the rule: mapping/ (the planner proposes
only placements this accepts) and rewrite/ (the rewriter places exactly what this accepts).
`Placement` is the proposal both speak (what a plan Site carries: insert, dependency, weight
expression, join); `dependency_problem(module_code, placement, target)` says whether it is legal;
`locate(view, placement, target)` resolves it to a `Location` (lines in one file) or a `Problem`.

Modules: placement (Placement, Location, Problem), lookup (classes, attributes, anchors in a
file, the if/elif/else a call after a branch belongs after), reach (which calls run the target),
tuples (which elements of a returned tuple a callee computes from another), locate (the rule).
"""

from .locate import dependency_problem, locate, unpacked_from
from .placement import MISSING, UNSAFE, Location, Placement, Problem, TargetRef

__all__ = ["MISSING", "UNSAFE", "Location", "Placement", "Problem", "TargetRef",
           "dependency_problem", "locate", "unpacked_from"]
