"""Where the prefetch goes: the target's call, the window's call, their lowest common caller.

Given the target's event and the window start op's event in the flattened forward pass:
  - the lowest common caller is the deepest method both call paths pass through with the same
    call chain above it (o_proj in the attention and gate_proj in the MLP meet in the decoder
    layer's forward);
  - 3b (light op, "input"): insert before the statement at that level that runs the window op,
    the dependency is that call's input;
  - 3a (large MatMul, "output"): insert after it, the dependency is the value it assigns;
  - the weight expression is the target's attribute chain seen from that method
    (`self.mlp.gate_proj.weight`; fused expert Parameters have no `.weight`).
When the window op sits deeper inside a call that also runs heavy MatMuls before it (the final
norm inside `self.model`, seen from the LM head), the nearest legal insertion comes later than
the window (shift "later"); when the only named value is earlier (down_proj: the MLP input `x`,
whose statement also runs gate/up), the prefetch starts earlier (shift "earlier"). apply's own
checks (`rewrite.engine.check_site`, legality's rule and more) have the last word: the callers
try each candidate placement, and each join point (`join_candidates`), until apply accepts one.

Insertions go only into the files the user named (`ModelSource.primary`); files loaded because
the model imports them are read, never edited. dataflow.py reads a statement's inputs and outputs;
after_step.py places after an if/else or a tuple unpack.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterator

from ..legality import Placement
from ..legality.kinds import not_a_tensor, tensor_field
from ..contract.plan import Insert, Join
from .after_step import after_chain, after_unpack
from .refs import module_paths
from .source import Event, LinearAttr, ModelSource
from .dataflow import call_node, carrier_first, input_of, outputs_of, stmt_at


def join_candidates(pl: Placement) -> Iterator[Join]:
    """Where the side stream may rejoin, innermost first: the end of the method holding the
    prefetch; else (its value is computed inside `return`) right after the call that runs that
    method in its caller, or that caller's end, outwards."""
    yield pl.join
    hops = pl.callers
    for i in range(len(hops) - 2, -1, -1):
        h = hops[i]
        yield Join(h.cls, h.method, f"after:{h.call}")
        yield Join(h.cls, h.method, "end")

def weight_expr(path, depth: int, lin: LinearAttr) -> str | None:
    """`self.a.b.attr(.weight)` for the target's hops from `depth` down (each hop's module path
    from its method's self, `self.mlps[0]` included); None when a hop is not a fixed path (a
    loop variable, a function)."""
    expr = "self"
    for i in range(depth, len(path)):
        acc = path[i].access
        if acc is None or not acc.startswith("self"):
            return None
        expr += acc[len("self"):]
    return expr if lin.is_param else expr + ".weight"


def common_depth(a, b) -> int:
    """Index of the lowest common caller's hop (same method, same call chain above it)."""
    d = -1
    for i in range(min(len(a), len(b))):
        if (a[i].cls, a[i].method) != (b[i].cls, b[i].method):
            break
        d = i
        if (a[i].stmt, a[i].call) != (b[i].stmt, b[i].call):
            break
    return d


def _is_param_use(ms: ModelSource, e: Event) -> bool:
    """A weight read in an expression (`self.gate_up_proj[idx]`), not a call to anchor on
    (a module call that runs registered weights, `self.experts(...)`, is one)."""
    lin = ms.linears.get((e.owner, e.attr))
    if e.kind != "linear" or lin is None or (not lin.is_param and e.leaf.call != e.leaf.access):
        return False
    h = e.leaf
    return call_node(stmt_at(ms, h.cls, h.method, h.stmt), h.call) is None


def _under(events: list[Event], prefix) -> list[int]:
    n = len(prefix)
    return [i for i, e in enumerate(events) if e.path[:n] == prefix]


def _tensors(ms: ModelSource, cls: str, method: str, idx: int, outs: list[str]) -> list[str]:
    """The names a statement assigns as dependencies: a model output object among them
    (`outputs = self.model(...)`, legality/kinds.py) is replaced by the field the method reads
    from it next (`outputs.last_hidden_state`), or dropped when it reads none."""
    m = ms.method(cls, method)
    owner = ms.method_owner(cls, method)
    if m is None or owner not in ms.classes:
        return outs
    file, info = ms.classes[owner]
    got: list[str] = []
    for n in outs:
        if not_a_tensor(ms.files[file], info, m, idx + 1, n) is None:
            got.append(n)
        else:
            alt = tensor_field(m, idx + 1, n)
            if alt is not None:
                got.append(alt)
    return got


def _editable(ms: ModelSource, cls: str) -> bool:
    return cls in ms.classes and ms.file_of(cls) in ms.primary


def place(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
          lin: LinearAttr) -> Placement | str:
    """The preferred placement for a window starting at the input (3b) / output (3a) of
    events[w_idx] (`place_all` gives the alternatives too)."""
    got = place_all(ms, events, t_idx, w_idx, start, lin)
    return got if isinstance(got, str) else got[0]


def place_all(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
              lin: LinearAttr, prefer_cls: str = "") -> list[Placement] | str:
    """Placements for a window starting at the input (3b) / output (3a) of events[w_idx], best
    first (a statement assigning several names offers each as the dependency)."""
    t, w = events[t_idx], events[w_idx]
    if _is_param_use(ms, w) or _is_param_use(ms, t) and len(t.path) == 1:
        return "fused expert Parameters are used, not called: there is no call to anchor on"
    if w_idx >= t_idx:
        return _cross_layer(ms, events, t_idx, w_idx, start, lin, prefer_cls)
    d = common_depth(t.path, w.path)
    if d < 0:
        return "the window op and the target share no calling method"
    th, wh = t.path[d], w.path[d]
    if not _editable(ms, th.cls):
        return (f"the window op and the target meet in {th.cls}.{th.method}, which is not in the "
                f"model source named by --model-src (imported code is not edited)")
    m = ms.method(th.cls, th.method)
    params = list(m.params) if m else []
    wexpr = weight_expr(t.path, d, lin)
    if wexpr is None:
        return (f"the target is reached from {th.cls}.{th.method} through "
                f"'{t.path[d].call}', which is not a fixed module path")
    join = Join(th.cls, th.method, "end")
    file = ms.file_of(th.cls)
    callers = tuple(t.path[:d + 1])
    w_deeper = len(w.path) > d + 1
    if th.stmt == wh.stmt:
        # one statement runs both (the nested MLP line): before it, on its input
        dep = input_of(ms, th.cls, th.method, th.stmt, th.call, params)
        if dep is None:
            return f"no local value feeds {th.call} in {th.cls}.{th.method}"
        inside = [i for i in _under(events, t.path[:d]) if len(events[i].path) > d
                  and (events[i].path[d].cls, events[i].path[d].method,
                       events[i].path[d].stmt) == (th.cls, th.method, th.stmt)]
        # the call goes before the whole statement: every call of it that runs before the
        # target is in the window (issue 30: `down_proj(act_fn(gate_proj(x)) * up_proj(x))`
        # also overlaps gate_proj and up_proj, whatever op the profile shows first); a 3a start
        # (a MatMul's output) in this statement always lies after the insertion
        heavy_before = start == "output" or any(events[i].kind == "linear" for i in inside
                                                 if i < t_idx)
        return [Placement(Insert(th.cls, th.method, th.call, "before"), dep, wexpr, join, file,
                          "earlier" if heavy_before else "exact",
                          f"{th.call} and the window op share one statement: the prefetch goes "
                          f"before it, on its input '{dep}'", callers=callers,
                          anchor_line=th.line, stmt=th.stmt)]
    if wh.stmt > th.stmt:
        return "the window op runs after the target's statement"
    wstmt = stmt_at(ms, wh.cls, wh.method, wh.stmt)
    inner = _under(events, w.path[:d + 1])
    if start == "input":
        # a call that runs modules or MatMuls before the window op is too early a start
        heavy_before = w_deeper and any(events[i].kind in ("linear", "module")
                                        for i in inner if i < w_idx)
        if not heavy_before:
            dep = input_of(ms, wh.cls, wh.method, wh.stmt, wh.call, params)
            if dep is not None:
                return [Placement(Insert(th.cls, th.method, wh.call, "before"), dep, wexpr, join,
                                  file, "exact", callers=callers, anchor_line=wh.line, stmt=wh.stmt)]
        outs = _tensors(ms, wh.cls, wh.method, wh.stmt, outputs_of(wstmt, w.attr))
        if not outs:
            return f"{wh.call} in {th.cls}.{th.method} assigns no tensor to depend on"
        return [Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                          "later", f"the window op runs inside {wh.call} after heavy MatMuls; "
                                   f"the nearest legal start is its output '{out}'",
                          callers=callers, anchor_line=wh.line, stmt=wh.stmt) for out in outs]
    # ops that run inside the same call after the MatMul are window time the insertion loses
    lost = w_deeper and any(events[i].kind in ("linear", "norm", "act", "module")
                            for i in inner if i > w_idx)
    outs = carrier_first(ms, w.path, d, _tensors(ms, wh.cls, wh.method, wh.stmt,
                                                 outputs_of(wstmt, w.attr)))
    if not outs:
        return f"{wh.call} in {th.cls}.{th.method} assigns no tensor to depend on"
    note = (f"{wh.call} runs more ops after the window's MatMul; the nearest legal start is its "
            f"output '{{}}'" if lost else "")
    got = [Placement(Insert(th.cls, th.method, wh.call, "after"), out, wexpr, join, file,
                     "later" if lost else "exact", note.format(out), callers=callers,
                     anchor_line=wh.line, stmt=wh.stmt) for out in outs]
    return (after_chain(ms, wh, outs, wexpr, join, file, "later" if lost else "exact", callers)
            + got + after_unpack(ms, wh, outs, w.attr, wexpr, join, file, lost, callers))


def layer_depth(ms: ModelSource, path) -> int | None:
    """Index of the hop that runs one decoder layer: the outermost call of a module-list
    element through a variable (`for layer in self.layers: layer(...)`, `self.layers[i](...)`)."""
    for i, h in enumerate(path):
        if h.via_list:
            return i
    return None


def _cross_layer(ms: ModelSource, events: list[Event], t_idx: int, w_idx: int, start: str,
                 lin: LinearAttr, prefer_cls: str = "") -> list[Placement] | str:
    """The window op runs late in the layer and the target early: the window is the previous
    layer's op, so the prefetch of the next layer's weight goes right after it, in a module of
    the layer that holds both (the layer, or its MoE block for the next layer's router), as
    `self.next_layer.<...>`: apply links each such module to its twin in the next layer where
    the layer stack is built, and the prefetch is skipped on the last layer.

    The levels tried: where the two call paths part (the window's statement after the
    target's), then every caller above down to the layer, after the statement that runs both
    (one fused call that runs w13 then w2); the class the user named (`prefer_cls`) first."""
    t, w = events[t_idx], events[w_idx]
    ld = layer_depth(ms, t.path)
    if ld is None or w.path[:ld + 1] != t.path[:ld + 1]:
        return "the window op runs after the target and not in the same decoder layer"
    d = common_depth(t.path, w.path)
    if d <= ld:
        return "the window op and the target do not meet inside the decoder layer"
    levels = [k for k in range(d, ld, -1) if w.path[k].stmt >= t.path[k].stmt]
    if not levels or (levels == [d] and w.path[d].stmt == t.path[d].stmt and
                      len(w.path) == d + 1):
        return "the window op does not run after the target in the method where they meet"
    levels.sort(key=lambda k: t.path[k].cls != prefer_cls)
    out: list[Placement] = []
    why = "the window op's statement assigns no value to depend on"
    for k in levels:
        th, wh = t.path[k], w.path[k]
        if not _editable(ms, wh.cls):
            why = f"{wh.cls}.{wh.method} is not in the model source named by --model-src"
            continue
        inner = _under(events, w.path[:k + 1])
        w_deeper = len(w.path) > k + 1
        wstmt = stmt_at(ms, wh.cls, wh.method, wh.stmt)
        heavy_after = w_deeper and any(events[i].kind == "linear" for i in inner if i > w_idx)
        outs = carrier_first(ms, w.path, k, _tensors(ms, wh.cls, wh.method, wh.stmt,
                                                     outputs_of(wstmt, w.attr)))
        if not outs or (start == "input" and heavy_after):
            continue
        wexpr = weight_expr(t.path, k, lin)
        if wexpr is None:
            why = f"the target is not reached from {th.cls}.{th.method} through module attributes"
            continue
        wexpr = "self.next_layer." + wexpr[len("self."):]
        join = Join(wh.cls, wh.method, "end")
        callers = tuple(w.path[:k + 1])
        shift = "later" if heavy_after or wh.stmt == th.stmt else "exact"
        note = f"cross-layer: after {wh.call} of this layer, prefetch the next layer's weight"
        chain = after_chain(ms, wh, outs, wexpr, join, ms.file_of(wh.cls), shift, callers)
        out += [replace(pl, scope="next_layer", note=note) for pl in chain] + [
            Placement(Insert(wh.cls, wh.method, wh.call, "after"), o, wexpr, join,
                      ms.file_of(wh.cls), shift, note, "next_layer", callers=callers,
                      anchor_line=wh.line, stmt=wh.stmt) for o in outs]
    return out or why


def with_other_paths(ms: ModelSource, pl: Placement, lin: LinearAttr) -> Placement:
    """`pl` naming every path its class reaches the weight by (`alt_weight_exprs`): a layer
    class built in two places of one decoder layer (deepseek_v3's dense MLP is `mlp` in the
    first `first_k_dense_replace` layers, `mlp.shared_experts` in the MoE ones). The call path
    the flattener followed is one of them, so a model whose layers all take the other branch
    would never prefetch. Next-layer weights: any path of the next layer; same-layer ones: the
    paths through the same first module (`self.mlp...`), so the insertion stays before the call
    that runs them. Indexed paths (`mlps[0]`) have none."""
    prefix = "self.next_layer." if pl.scope == "next_layer" else "self."
    suffix = "." + lin.attr + ("" if lin.is_param else ".weight")
    own = pl.weight_expr[len(prefix):]
    if pl.alt_weight_exprs or not pl.weight_expr.startswith(prefix) or "[" in own or \
            not own.endswith(suffix) or not own[: -len(suffix)]:
        return pl
    own = own[: -len(suffix)]
    paths = [p for p in module_paths(ms, pl.insert.cls, lin.cls) if p != own and (
        pl.scope == "next_layer" or p.split(".")[0] == own.split(".")[0])]
    return replace(pl, alt_weight_exprs=tuple(prefix + p + suffix for p in paths))


def nearest_legal(ms: ModelSource, events: list[Event], t_idx: int, lin: LinearAttr,
                  accept=None) -> Placement | str:
    """The latest insertion before the target: from its own method outwards, before the call
    that runs it, on that call's input; the first one `accept(placement)` takes (it returns the
    placement to use, or apply's reason to refuse it)."""
    t = events[t_idx]
    last = "no level of the call path names a local value that feeds the target"
    if not any(_editable(ms, h.cls) for h in t.path):
        # vLLM's minicpm3: its decoder layer's forward and its MLP are minicpm.py's, read as
        # context; apply edits only the files the user named
        files = sorted({Path(ms.file_of(h.cls)).name for h in t.path if h.cls in ms.classes})
        return (f"every level of the call path is in {', '.join(files) or 'another file'}, "
                f"read as context and not edited: give --model-src a folder that holds it")
    for d in range(len(t.path) - 1, -1, -1):
        h = t.path[d]
        if d == len(t.path) - 1 and _is_param_use(ms, t):
            continue      # a Parameter use is not a call: anchor on the module call above it
        if not _editable(ms, h.cls):
            continue
        m = ms.method(h.cls, h.method)
        params = list(m.params) if m else []
        wexpr = weight_expr(t.path, d, lin)
        if wexpr is None:
            continue
        dep = input_of(ms, h.cls, h.method, h.stmt, h.call, params)
        if dep is None:
            continue
        pl = Placement(Insert(h.cls, h.method, h.call, "before"), dep, wexpr,
                       Join(h.cls, h.method, "end"), ms.file_of(h.cls), "fallback",
                       f"nearest legal dependency: the input '{dep}' of {h.call} in "
                       f"{h.cls}.{h.method}", callers=tuple(t.path[:d + 1]),
                       anchor_line=h.line, stmt=h.stmt)
        got = accept(pl) if accept else pl
        if isinstance(got, Placement):
            return got
        last = got
    # levels the user did not name (gemma4_dspark's decoder layer: gemma4_mtp.py's forward) may
    # hold the insertion point: the same advice as for a path wholly in context files
    context = sorted({Path(ms.file_of(h.cls)).name for h in t.path
                      if h.cls in ms.classes and not _editable(ms, h.cls)})
    if context:
        last += (f"; the levels in {', '.join(context)} are read as context and not edited: "
                 f"give --model-src a folder that holds it")
    return last
