"""What the legality rule speaks: the `Placement` a planner proposes (and a plan Site records),
the `Location` a legal one resolves to (lines of one file), or the `Problem` that stops it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..contract.plan import Insert, Join, Site
from ..pysource import ClassInfo, Method, Stmt

# kinds: "missing" = the plan names something that is not in the file (bad input, exit 2);
#        "unsafe"  = it is there but there is no safe insertion (the site is refused, others go on)
MISSING, UNSAFE = "missing", "unsafe"


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str


@dataclass(frozen=True)
class Placement:
    """Where a prefetch goes, as the planner proposes it and a plan Site records it."""

    insert: Insert
    dependency: str
    weight_expr: str
    join: Join
    file: str = ""            # file holding insert.cls
    shift: str = "exact"      # exact | earlier | later | fallback (vs the measured window)
    note: str = ""
    scope: str = "same"       # same | next_layer (the weight belongs to the next decoder layer)
    stmt: int | None = None   # mapping: index of the anchor statement in insert.method, which
                              # tells the profiled ops after the insertion (placed window)
    # mapping's own: the call path down to the insertion hop (where a join may go) and the line
    # of the statement it means to anchor on (apply must resolve the anchor to that one)
    callers: tuple = ()
    anchor_line: int = 0
    alt_weight_exprs: tuple[str, ...] = ()   # next_layer: the weight's other paths (plan Target)

    @classmethod
    def of_site(cls, site: Site) -> "Placement":
        return cls(site.insert, site.dependency, site.target.weight_expr, site.join,
                   site.target.file, scope=site.target.scope,
                   alt_weight_exprs=site.target.alt_weight_exprs)


class TargetRef(Protocol):
    """The weight's owner: a plan Target or the mapping's LinearAttr (class + attribute)."""

    cls: str
    attr: str


@dataclass(frozen=True)
class Location:
    """A legal placement resolved to lines of one file (what the rewriter inserts at)."""

    cls: ClassInfo
    method: Method
    stmt: Stmt                 # the statement the call goes before / after
    line: int                  # insert the new line before this 1-based line number
    indent: str
    guard: str | None          # a path that may be None / absent (conditional module, next layer)
    note: str = ""
