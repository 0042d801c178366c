"""`Mapper`: windows' candidates -> places in the model source, each checked with apply's
own per-site checks (`checker`); the order of the ways it tries is in the package docstring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import reasons
from ..legality import Placement
from ..legality.reach import guard_path, target_refs
from ..roofline.shapes import dtype_bytes
from ..policy import Policy
from ..windows import Candidate, PredOp, Rejection, default_rules
from .place import layer_depth, nearest_legal, place_all, with_other_paths
from .built import never_built, unguarded
from .guard import guard_for
from .precedes import precedes
from .repeats import runs_note
from .shape import dims_match, role_of
from .flatten import flatten, roots
from .source import Event, LinearAttr, ModelSource
from .stack import model_places


@dataclass(frozen=True)
class Mapped:
    target: LinearAttr
    placement: Placement
    method: str                 # stack | shape | manual
    role: str
    window_call: str = ""       # the source call the window op was matched to
    notes: tuple[str, ...] = ()
    in_layers: bool = False     # the target's call runs once per decoder layer (the layers loop)
    precedes: int | None = -1   # Candidate.lead index of the op the inserted call precedes
    precedes_by: str = ""       # stack | calls: how that op was found (precedes.py)
    guard: tuple[str, int] | None = None   # (tensor, dim) the runtime decode guard reads
    guard_why: str = ""
    signature: dict | None = None   # manual target, no window: the profile signature of its shape


@dataclass(frozen=True)
class TargetName:
    cls: str
    attr: str


def target_ref(pl: Placement, lin: LinearAttr) -> TargetName:
    """The weight's class and attribute as the plan names them: its own when it is defined in
    the file apply edits, else seen from the class that receives the call
    (`FFN.experts.w2_weight`: FusedMoEGMM lives in another file)."""
    from pathlib import Path
    if not pl.file or Path(lin.file).resolve() == Path(pl.file).resolve():
        return TargetName(lin.cls, lin.attr)
    attr = pl.weight_expr[len("self."):]
    attr = attr[len("next_layer."):] if attr.startswith("next_layer.") else attr
    return TargetName(pl.insert.cls, attr[: -len(".weight")] if attr.endswith(".weight") else attr)


def checker(ms: ModelSource, mode: str = "eager") -> Callable[[Placement, LinearAttr], str | None]:
    """apply's own per-site checks (`rewrite.engine.check_site`), asked before a site is
    planned: a placement they refuse is never planned (one truth for analyze and apply); then
    whether the config builds every module on the weight's path, or the rewrite's presence
    check covers the one it may not (`built.unguarded`)."""
    from ..legality import Problem
    from ..pysource import parse_view
    from ..rewrite.engine import check_site
    from ..rewrite.markers import has_markers, strip_markers

    views = {}

    def view_of(file: str):
        if file not in views:
            v = ms.files[file]
            views[file] = parse_view(strip_markers(v.code)) if has_markers(v.code) else v
        return views[file]

    def accept(pl: Placement, lin: LinearAttr) -> str | None:
        view = view_of(pl.file)
        res = check_site(view, pl, target_ref(pl, lin), mode=mode)
        if isinstance(res, Problem):
            return res.message
        why = never_built(ms, pl.insert.cls)
        if why:
            return why
        if pl.weight_expr.startswith("self."):
            paths = (pl.weight_expr, *pl.alt_weight_exprs)
            guards = (res.guard,) if len(paths) == 1 else \
                tuple(guard_path(target_refs(p)[1]) for p in paths)   # as concerns.site_lines
            why = unguarded(ms, pl.insert.cls, paths, guards, lin.cls)
            if why:
                return why
        if pl.anchor_line and view is ms.files[pl.file] and \
                not res.stmt.start <= pl.anchor_line <= res.stmt.end:   # (or the if/else holding it)
            return (f"{pl.insert.anchor_call} is called more than once in {pl.insert.cls}."
                    f"{pl.insert.method}: apply anchors on its first call (line {res.stmt.start}), "
                    f"not the one at line {pl.anchor_line}")
        return None
    return accept


class Mapper:
    """Holds the flattened forward pass of the model's root class."""

    def __init__(self, ms: ModelSource, src_map=(), root: str | None = None, mode: str = "eager",
                 *, policy: Policy):
        self.ms = ms
        self.calls_back = int(policy["windows"]["source_calls_back"])
        self.window_rules = default_rules(policy)   # norm kernels, when calls stand for ops
        self.src_map = tuple(src_map)
        self._events: dict[str, list[Event]] = {}
        rs = [root] if root else roots(ms, self._events)
        if not rs:
            from ..errors import SourceError
            raise SourceError("no model class with a forward() in the model source",
                              path=", ".join(ms.files))
        self.root = rs[0]
        self.roots = rs
        self.events = self.events_of(self.root)
        self.accept = checker(ms, mode)

    def events_of(self, root: str) -> list[Event]:
        if root not in self._events:
            self._events[root] = flatten(self.ms, root)
        return self._events[root]

    # -- the target ---------------------------------------------------------------------------
    def find_target(self, cand: Candidate) -> tuple[int, str] | str:
        t = cand.target
        n, k = int(t.n or 0), int(t.k or 0)
        if not n or not k:
            return f"the roofline gives no weight shape for {t.label}"
        family = t.family or ""
        pool = [i for i, e in enumerate(self.events) if e.kind == "linear"
                and (lin := self.ms.linears.get((e.owner, e.attr))) is not None
                and dims_match(lin, n, k, family)]
        method = "shape"
        places = model_places(cand.stack, self.ms, self.src_map) if cand.stack else []
        if places:
            p = places[0]
            at = [i for i in pool if self.events[i].leaf.cls == p.cls
                  and self.events[i].leaf.method == p.method
                  and (p.stmt is None or self.events[i].leaf.stmt == p.stmt)]
            if at:
                pool, method = at, "stack"
        firsts, seen = [], set()
        for i in pool:
            key = (self.events[i].owner, self.events[i].attr)
            if key not in seen:
                seen.add(key)
                firsts.append(i)
        if not firsts:
            return (f"no linear-like attribute in the model source has weight [{n}, {k}] "
                    f"(checked {len(self.ms.linears)} attribute(s))")
        rank = cand.site_rank if method == "stack" else cand.cluster
        if rank >= len(firsts):
            names = ", ".join(f"{self.events[i].owner}.{self.events[i].attr}" for i in firsts)
            return (f"call site {rank + 1} of {t.label} has no attribute left to match "
                    f"(shape matches {names})")
        return firsts[rank], method

    # -- the window ---------------------------------------------------------------------------
    def find_window(self, cand: Candidate, t_idx: int) -> int | None:
        return self.find_op(cand.window.start_op, cand.window_stack, t_idx)

    def find_op(self, op: PredOp, stack, t_idx: int) -> int | None:
        """The event before the target that runs a profiled op (its stack first, else kind)."""
        want = _kind_of(op)
        places = model_places(stack, self.ms, self.src_map) if stack else []
        pool = list(range(t_idx - 1, -1, -1))
        for p in places:
            # the stack names the statement (innermost model frame that the forward pass
            # reaches): the nearest event there, of the right kind if any
            at = [i for i in pool if (lf := self.events[i].leaf).cls == p.cls
                  and lf.method == p.method and (p.stmt is None or lf.stmt == p.stmt)]
            if not at:
                at = [i for i in pool if any(h.cls == p.cls and h.method == p.method
                                             and (p.stmt is None or h.stmt == p.stmt)
                                             for h in self.events[i].path)]
            if at:
                return next((i for i in at if _fits(self.ms, self.events[i], op, want)), at[0])
            prev = self._previous_layer(t_idx, [p], op, want)
            if prev is not None:
                return prev
        for i in pool[:self.calls_back]:    # no stack: the nearest event of the right kind
            e = self.events[i]
            if _fits(self.ms, e, op, want):
                return i
        return self._previous_layer(t_idx, places, op, want)

    def _previous_layer(self, t_idx: int, places, op: PredOp, want: str) -> int | None:
        """The window op in the previous layer: this layer's ops after the target, from the
        layer's end backwards (one layer stands for all in the flattened forward)."""
        from .place import layer_depth
        t = self.events[t_idx]
        ld = layer_depth(self.ms, t.path)
        if ld is None:
            return None
        prefix = t.path[:ld + 1]
        later = [i for i in range(len(self.events) - 1, t_idx, -1)
                 if self.events[i].path[:ld + 1] == prefix]
        if places:
            p = places[0]
            later = [i for i in later if any(h.cls == p.cls and h.method == p.method
                                             and (p.stmt is None or h.stmt == p.stmt)
                                             for h in self.events[i].path)]
        return next((i for i in later if _fits(self.ms, self.events[i], op, want)), None)

    def settle(self, pl: Placement, lin: LinearAttr) -> Placement | str:
        from .manual import settle
        return settle(pl, lin, self.accept, self.ms, self.events)

    def _placed_at(self, t_idx: int, w_idx: int | None, start: str, lin) -> Placement | str:
        if w_idx is None:
            return "the window op was not found in the model source"
        got = place_all(self.ms, self.events, t_idx, w_idx, start, lin)
        if isinstance(got, str):
            return got
        pl: Placement | str = "no placement"
        for cand_pl in got:
            pl = self.settle(cand_pl, lin)
            if isinstance(pl, Placement):
                return pl
        return f"apply would refuse it: {pl}"

    def _window_placement(self, cand: Candidate, t_idx: int, lin):
        """(window event, placement). A 3a window (a heavy op's output starts it) starts where its
        first op's input is ready: that op's call is tried first (the heavy op may run no call of
        its own: the previous layer's residual `+` before input_layernorm), when it is a plain
        statement of its method (not in a loop body, where the call would run once per
        iteration) other than the target's own; else the heavy op's output."""
        w = cand.window
        if w.start == "output" and w.ops:
            first = w.ops[-1]
            stack = tuple(x for x in first.stack.split(";") if x) if first.stack else ()
            f_idx = self.find_op(first, stack, t_idx)
            pl = self._placed_at(t_idx, f_idx, "input", lin)
            if isinstance(pl, Placement) and self._plain(pl) and not self._same_stmt(pl, t_idx):
                return f_idx, pl
        w_idx = self.find_window(cand, t_idx)
        return w_idx, self._placed_at(t_idx, w_idx, w.start, lin)

    def _same_stmt(self, pl: Placement, t_idx: int) -> bool:
        """The insertion lands on the statement that runs the target (the one-line MLP): the
        first op's input is not a start there, the statement's own input is."""
        return any(h.cls == pl.insert.cls and h.method == pl.insert.method and h.stmt == pl.stmt
                   for h in self.events[t_idx].path)

    def _plain(self, pl: Placement) -> bool:
        """The anchor statement sits directly in its method's body (not in a loop or `with`)."""
        m = self.ms.method(pl.insert.cls, pl.insert.method)
        return (m is not None and pl.stmt is not None and 0 <= pl.stmt < len(m.stmts)
                and m.stmts[pl.stmt].indent == m.body_indent)

    def map(self, cand: Candidate) -> Mapped | Rejection:
        found = self.find_target(cand)
        if isinstance(found, str):
            return _unmapped(cand, found)
        t_idx, method = found
        e = self.events[t_idx]
        lin = self.ms.linears[(e.owner, e.attr)]
        role = role_of(e.attr, lin, cand.target.family, _dtype_bytes(cand.target.dtypes))
        notes: list[str] = []
        w_idx, pl = self._window_placement(cand, t_idx, lin)
        if isinstance(pl, str):
            notes.append(f"window placement not used: {pl}")
            pl = nearest_legal(self.ms, self.events, t_idx, lin,
                               accept=lambda p: self.settle(p, lin))
            if isinstance(pl, str):
                return _unmapped(cand, f"no legal insertion for {lin.qualname}: {pl}",
                                 site=lin.qualname)
        if pl.note:
            notes.append(pl.note)
        again = runs_note(self.events, t_idx, self.ms)
        if again:
            notes.append(again)
        wcall = self.events[w_idx].leaf.call if w_idx is not None else ""
        k, how = precedes(self.ms, self.events, self.src_map, cand, t_idx, pl,
                           self.window_rules)
        g, gwhy = guard_for(self.ms, pl, self.events)
        pl = with_other_paths(self.ms, pl, lin)
        return Mapped(lin, pl, method, role, wcall, tuple(notes),
                      layer_depth(self.ms, e.path) is not None, k, how, g, gwhy)


def _dtype_bytes(dtypes: str) -> float:
    """Bytes per element of the kernel's first input (roofline.shapes: one dtype table)."""
    return float(dtype_bytes((dtypes or "").split(";")[0]) or 2.0)


def _kind_of(op: PredOp) -> str:
    t = (op.type or "").lower()
    if "matmul" in t or "gemm" in t:
        return "linear"
    if "norm" in t:
        return "norm"
    if any(x in t for x in ("silu", "gelu", "swish", "swiglu", "relu", "sigmoid")):
        return "act"
    if "rotary" in t or "rope" in t:
        return "rope"
    if "attention" in t:
        return "attention"
    return "any"


def _fits(ms: ModelSource, e: Event, op: PredOp, want: str) -> bool:
    if want == "linear":
        if e.kind != "linear":
            return False
        from ..roofline.shapes import parse_shapes
        dims = parse_shapes(op.shapes)
        lin = ms.linears.get((e.owner, e.attr))
        if dims and len(dims) > 1 and dims[1] and lin and lin.dims:
            w = tuple(dims[1])
            return tuple(lin.dims[-2:]) in (w[-2:], w[-2:][::-1])
        return True
    if want in ("norm", "act"):
        return e.kind == want
    name = e.attr.split(".")[-1].lower()
    if want == "rope":
        return "rotary" in name or "rope" in name
    if want == "attention":
        return "attention" in name or name.endswith("attn")
    return e.kind in ("norm", "act", "module") and not e.child


def _unmapped(cand: Candidate, why: str, site: str = "") -> Rejection:
    return Rejection(cand.target.label, reasons.UNMAPPED, why, cand.target, cand.cluster,
                     cand.clusters, cand.instances, cand.per_step, cand.mean_us, cand.preds,
                     cand.stack, site, cand.site_rank)
