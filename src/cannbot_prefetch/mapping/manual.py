"""Manual mode (seed 003 "手动指定"): `--target CLASS.ATTR` (repeatable) and `--window EXPR`.

`--target LlamaMLP.down_proj` names a linear-like attribute (or a fused expert Parameter) of a
class in the model source; `CLASS.sub.attr` walks submodules, inherited ones included
(`LongcatFlashFFN.router.classifier`, `Qwen3MoeSparseMoeBlock.experts.w13_weight`).
`--window` names the dependency:
  - a module call before the target (`post_attention_layernorm`, `self.o_proj`,
    `LlamaAttention.o_proj`): a light op's input (3b) or a MatMul's output (3a) starts the window;
    a module that runs after the target in the same layer (`LlamaMLP.down_proj` for the attention's
    `q_proj`) makes it a cross-layer site: the next layer's weight, after this layer's module;
  - otherwise a local value (`hidden_states`): the prefetch goes right before the call that
    runs the target, in the deepest method where that value is defined, depending on it.
Without `--window`, the window starts at the output of the MatMul the forward pass runs last
before the target (down_proj at gate_up_proj's output, gate_up_proj at the attention block's
output), else, for a layer's first MatMul, after the layer's last one (the next layer's qkv at
this layer's MLP output), the first such placement apply accepts; only when none is legal, the
target's own input (a window of no op, which the plan says: `held_calls`). In a stack built from
several layer classes the default placement runs in every class that runs the target, and is
never a next-layer one (`uncovered`); a target's call inside the stack comes before one outside.

A target that is not in the source, or malformed, is bad input (exit 2). A target that exists but
cannot be planned (never run by the forward pass, shape not evaluable, no insertion apply would
accept) raises `Unplaceable`, which the planner turns into a rejection with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError, SourceError
from ..contract.plan import Insert, Join
from ..pysource import call_name
from .flatten import flatten
from .place import Placement, join_candidates, nearest_legal, place_all, weight_expr
from .refs import bases_chain, find_child, find_linear, sub_linears
from .on_path import hoisted, off_path
from .repeats import exclusive_paths, repeated
from .source import Event, LinearAttr, ModelSource


class Unplaceable(Exception):
    """The target exists, but no site can be planned for it (the reason says why)."""

    def __init__(self, target: str, reason: str, code: str = "unmapped"):
        super().__init__(f"--target {target}: {reason}")
        self.target, self.reason, self.code = target, reason, code


@dataclass(frozen=True)
class ManualTarget:
    cls: str
    attr: str
    lin: LinearAttr
    t_idx: int
    events: tuple[Event, ...]      # the forward pass (of the root that runs the target)
    text: str = ""                 # as the user wrote it


def _lookup(ms: ModelSource, text: str) -> tuple[str, LinearAttr]:
    """(class named first, the linear) for CLASS.ATTR / CLASS.sub.attr; SourceError if absent."""
    if "." not in text:
        raise InputError(f"--target must be CLASS.ATTR (e.g. LlamaMLP.down_proj), not {text!r}")
    cls, attr = text.split(".", 1)
    where = ", ".join(sorted(ms.primary)) or ", ".join(ms.files)
    if cls not in ms.classes:
        nested = next(((f, v.nested_classes[cls]) for f, v in ms.files.items()
                       if cls in v.nested_classes), None)
        if nested is not None:     # true, and what to do: the mapper reads top-level classes
            f, (line, word) = nested
            raise SourceError(f"--target {text}: class {cls} is defined inside a module-level "
                              f"`{word}` block (line {line}) that the tool does not map (it maps "
                              f"top-level classes, and those directly in an `if`/`try` branch "
                              f"whose lines dedent evenly); define it at the top level of a copy "
                              f"of the file to plan it", path=f)
        raise SourceError(f"--target {text}: class {cls} is not defined in the model source",
                          path=where)
    parts = attr.split(".")
    owner = cls
    for k, p in enumerate(parts[:-1]):
        lin = find_linear(ms, owner, ".".join(parts[k:]))
        if lin is None:           # a library layer known by its weights: experts.w13_weight
            lin = next((x for x in sub_linears(ms, owner, p) if x.attr == ".".join(parts[k:])), None)
        if lin is not None:
            return cls, lin
        child, decl, _ = find_child(ms, owner, p.split("[", 1)[0])   # `mlps[1]`: the list's class
        if child is None:
            raise SourceError(f"--target {text}: {owner} has no submodule '{p}' (in its class or "
                              f"its base classes){_unread_class(ms, owner, p) or _shadowed(ms, owner)}",
                              path=ms.file_of(owner))
        # a module built as one of several classes (`self.mlp = MiniCPMMLP(...)` / `=
        # MiniCPMMoE(...)` in branches): the one that holds the rest of the path
        rest = ".".join(parts[k + 1:])
        owner = next((a for a in ms.alternatives.get((decl, p.split("[", 1)[0]), [])
                      if find_linear(ms, a, rest) is not None
                      or find_child(ms, a, parts[k + 1].split("[", 1)[0])[0] is not None
                      or any(x.attr == rest for x in sub_linears(ms, a, parts[k + 1]))), child)
    lin = find_linear(ms, owner, parts[-1])
    if lin is None:
        known = sorted({a for c in bases_chain(ms, owner) for (k, a) in ms.linears if k == c})
        info = ms.classes[owner][1]
        what = "is not a linear-like attribute" if parts[-1] in info.attrs else "does not exist"
        raise SourceError(f"--target {text}: attribute '{parts[-1]}' of {owner} {what} "
                          f"(linear-like attributes: {', '.join(known) or 'none'})",
                          path=ms.file_of(owner))
    return cls, lin


def _shadowed(ms: ModelSource, owner: str) -> str:
    """Why a base's submodule is missing when a file defines a class of the same name as the one
    it subclasses (vLLM's llama_eagle.py: `from .llama import LlamaDecoderLayer as
    BaseLlamaDecoderLayer` and `class LlamaDecoderLayer(BaseLlamaDecoderLayer)`): the source is
    read by class name, so only one of the two is seen; "" when no file does that."""
    for f, view in ms.files.items():
        for a in view.aliases.values():
            if a.original == owner and a.name != owner and owner in view.classes:
                return (f": {Path(f).name} defines its own {owner} and imports {a.source}'s as "
                        f"{a.name}; the tool reads classes by name and sees one {owner} only, "
                        f"so it cannot map this file (rename one of them in a copy to plan it)")
    return ""


def _unread_class(ms: ModelSource, owner: str, attr: str) -> str:
    """Why `self.<attr>` is no known submodule when `owner` (or a base) does build it: the class
    it is built as was not read (`self.mlp = Qwen3MLP(...)`, imported `from .qwen2` in a file whose
    sibling is not there); "" when no such assignment exists."""
    from .evaluate.syntax import assign_value, callee_name
    from .init_body import init_statements
    from .structure import module_calls

    for c in bases_chain(ms, owner):
        for st in init_statements(ms, c):
            got = assign_value(st)
            if got is None or got[0] != attr:
                continue
            for call, _ in module_calls(got[1]):
                name = callee_name(call)
                if name in ms.classes:
                    continue
                alias = ms.files[ms.file_of(c)].aliases.get(name)
                where = f" (imported from {alias.source} in {Path(ms.file_of(c)).name}: that " \
                    f"file was not found)" if alias is not None else ""
                return f": {c} builds it as {name}, a class no file read defines{where}"
    return ""


def parse_target(text: str, ms: ModelSource, roots: list[str],
                 events_of=None) -> ManualTarget:
    """The target and where the forward pass runs it (the first root class that does)."""
    cls, lin = _lookup(ms, text)
    if lin.dims is None:
        raise Unplaceable(text, f"weight shape unknown: {lin.error}", "shape_unknown")
    events_of = events_of or (lambda r: flatten(ms, r))
    fallback = None
    for root in roots:
        events = events_of(root)
        hits = [i for i, e in enumerate(events) if e.kind == "linear"
                and (e.owner, e.attr) == (lin.cls, lin.attr)]
        # CLASS.sub.attr: the calls made through CLASS itself (a subclass's own forward, in
        # whichever model class runs it) before any other call of the same weight
        own = [i for i in hits if any(h.cls == cls or (k + 1 < len(events[i].path) and
                                                       events[i].path[k + 1].cls == cls)
                                      for k, h in enumerate(events[i].path))]
        # CLASS.mlps[1].attr: only the calls through that element (`self.mlps[1](...)`)
        indexed = ["self." + p for p in text.split(".")[1:-1] if "[" in p]
        if indexed:
            own = [i for i in own if all(any(h.access == a for h in events[i].path)
                                         for a in indexed)]
            hits = [i for i in hits if i in own]
        # a call inside the layer stack first: that instance runs once per layer and token,
        # one outside it (Kosmos-2's image-to-text projection, `self.x_attn`) once per image
        own = _in_stack(ms, events, own) or own
        hits = _in_stack(ms, events, hits) or hits
        if own:
            return ManualTarget(lin.cls, lin.attr, lin, own[0], tuple(events), text)
        if hits and fallback is None:
            fallback = ManualTarget(lin.cls, lin.attr, lin, hits[0], tuple(events), text)
    if fallback is not None:
        return fallback
    raise Unplaceable(text, f"{lin.qualname} is never run by the forward pass of "
                            f"{' / '.join(roots[:3]) or 'any root class'} (no call path reaches it)")


def _in_stack(ms: ModelSource, events: list[Event], idx: list[int]) -> list[int]:
    """The calls among `idx` made inside a decoder-layer stack, in order."""
    from .place import layer_depth

    return [i for i in idx if layer_depth(ms, events[i].path) is not None]


def layer_classes(ms: ModelSource, events: list[Event], t_idx: int, of_target: bool = True
                  ) -> set[str]:
    """The classes of the stack's layers (the class whose forward the layer call runs) that run
    the target's linear (`of_target`), or every class of that stack. More than one: the stack
    is built from several layer classes (Mllama's self- and cross-attention layers, a hybrid's
    attention and linear-attention layers, Inkling2-Loop's four kinds picked from a dict)."""
    from .place import layer_depth

    t = events[t_idx]
    ld = layer_depth(ms, t.path)
    if ld is None or ld + 1 >= len(t.path):
        return set()
    stack = (t.path[ld].cls, t.path[ld].method)
    out = set()
    for e in events:
        if of_target and (e.kind != "linear" or (e.owner, e.attr) != (t.owner, t.attr)):
            continue
        d = layer_depth(ms, e.path)
        if d is not None and d + 1 < len(e.path) and (e.path[d].cls, e.path[d].method) == stack:
            out.add(e.path[d + 1].cls)
    return out


def uncovered(ms: ModelSource, events: list[Event], t_idx: int, pl: Placement) -> str | None:
    """Why an insertion would prefetch the target in only some layers of a stack built from
    several layer classes, None when it runs for every layer that runs the target. A line in one
    layer class runs only in the layers of that class; a next-layer line in one class runs only
    when a layer of that class precedes the target's layer, so the next layer's weight is
    prefetched only where the pattern of classes happens to put them in that order."""
    ins = (pl.insert.cls, pl.insert.method)
    if pl.scope == "next_layer":
        kinds = layer_classes(ms, events, t_idx, of_target=False)
        if len(kinds) > 1:
            return (f"the stack's layers are of {len(kinds)} classes ({', '.join(sorted(kinds))}): "
                    f"a next-layer prefetch in {ins[0]} runs only where a layer of that class "
                    f"comes before one that holds the target")
        return None
    kinds = layer_classes(ms, events, t_idx)
    if len(kinds) < 2:
        return None
    t = events[t_idx]
    from .place import layer_depth

    reached = set()
    for e in events:
        if e.kind == "linear" and (e.owner, e.attr) == (t.owner, t.attr) and \
                ins in {(h.cls, h.method) for h in e.path}:
            d = layer_depth(ms, e.path)
            if d is not None and d + 1 < len(e.path):
                reached.add(e.path[d + 1].cls)
    missed = sorted(kinds - reached)
    if not missed:
        return None
    return (f"{ins[0]}.{ins[1]} does not run in the layers of class {', '.join(missed)}, which "
            f"run the target too")


def _after_in_layer(events: list[Event], t_idx: int, calls: list[int]) -> list[int]:
    """Windows after the target (cross-layer), best first: those that meet the target in the
    deepest method (the same branch of the layer's forward), the last the layer runs first."""
    from .place import common_depth

    after = [i for i in calls if i > t_idx]
    return sorted(after, key=lambda i: (-common_depth(events[t_idx].path, events[i].path), -i))


def settle(pl: Placement, lin: LinearAttr, accept, ms: ModelSource | None = None,
           events: list[Event] | None = None) -> Placement | str:
    """The placement with the first join apply accepts (the end of the method holding the
    prefetch, else after the call that runs it in each caller outwards); apply's reason if none.
    Given the forward pass (`ms`, `events`), first moved before the `if` whose arms run the
    target, or refused, when its line would not run on every path that runs the target
    (on_path.py), and refused when it would run more than once per step (repeats.py)."""
    if events is not None and ms is not None:
        off = off_path(ms, events, pl, lin)
        if off is not None:
            pl = hoisted(ms, events, pl, lin) or pl
            if off_path(ms, events, pl, lin) is not None:
                return off
        again = repeated(ms, events, pl)
        if again is not None:
            return again
    first = None
    for j in join_candidates(pl):
        cand = replace(pl, join=j)
        problem = accept(cand, lin)
        if problem is None:
            return cand
        first = first or problem
    return first or "no join point"


def place_manual(ms: ModelSource, t: ManualTarget, window: str | None, accept) -> Placement:
    """Placement for a manual target: InputError when `--window` names nothing usable,
    Unplaceable when apply would refuse every insertion."""
    events = list(t.events)
    text = t.text or f"{t.cls}.{t.attr}"
    check = lambda p: settle(p, t.lin, accept, ms, events)  # noqa: E731
    if not window:
        # every layer that runs the target runs the prefetch (a stack of several layer classes)
        def every_layer(p):
            return uncovered(ms, events, t.t_idx, p) or settle(p, t.lin, accept, ms, events)
        pl = earliest_window(ms, events, t.t_idx, t.lin, every_layer)
        if pl is None:
            pl = nearest_legal(ms, events, t.t_idx, t.lin, accept=every_layer)
        if isinstance(pl, str):
            raise Unplaceable(text, f"no legal dependency: {pl}")
        return pl
    w = window.strip()
    name = w.split(".")[-1]
    scoped_cls = w.split(".")[0] if w.count(".") == 1 and not w.startswith("self.") else None
    if w.startswith("self.") or scoped_cls or "." not in w:
        calls = [i for i in range(len(events)) if i != t.t_idx and events[i].attr == name
                 and (scoped_cls is None or events[i].owner == scoped_cls
                      or events[i].child == scoped_cls)]
        before = [i for i in calls if i < t.t_idx][::-1]        # nearest first
        order = before if before else _after_in_layer(events, t.t_idx, calls)
        first = None
        for w_idx in order:
            start = "output" if events[w_idx].kind == "linear" else "input"
            cands = place_all(ms, events, t.t_idx, w_idx, start, t.lin,
                              text.split(".", 1)[0])
            if isinstance(cands, str):
                first = first or cands
                continue
            for pl in cands:
                got = check(pl)
                if not isinstance(got, str):
                    return got
                first = first or f"apply would refuse it: {got}"
        if order:
            raise Unplaceable(text, f"--window {window}: {first}")
    # a local value: deepest method on the target's path that has it before the target's call
    path = events[t.t_idx].path
    head = w.split(".")[0]
    refused = None
    for d in range(len(path) - 1, -1, -1):
        h = path[d]
        m = ms.method(h.cls, h.method)
        if m is None or ms.file_of(h.cls) not in ms.primary:
            continue
        defined = head in m.params or any(head in s.defs for s in m.stmts[:h.stmt])
        if not defined:
            continue
        wexpr = weight_expr(path, d, t.lin)
        if wexpr is None:
            continue
        pl = Placement(Insert(h.cls, h.method, h.call, "before"), w, wexpr,
                       Join(h.cls, h.method, "end"), ms.file_of(h.cls), "manual",
                       f"--window {w}: before {h.call} in {h.cls}.{h.method}",
                       callers=tuple(path[:d + 1]), anchor_line=h.line, stmt=h.stmt)
        got = check(pl)
        if not isinstance(got, str):
            return got
        refused = refused or got          # an outer level may hold it legally
        # right after the statement that computes it (the experts' place: `dsq` after the first
        # MLP, before the next norm, which would consume it before a prefetch at the target)
        at = max((j for j in range(h.stmt) if head in m.stmts[j].defs), default=None)
        anchor = next((call_name(c) for c in m.stmts[at].calls
                       if call_name(c).startswith("self.")), None) if at is not None else None
        if anchor is not None:
            got = check(Placement(Insert(h.cls, h.method, anchor, "after"), w, wexpr,
                                  Join(h.cls, h.method, "end"), ms.file_of(h.cls), "manual",
                                  f"--window {w}: right after {anchor}, which computes it, in "
                                  f"{h.cls}.{h.method}", callers=tuple(path[:d + 1]),
                                  anchor_line=m.stmts[at].start, stmt=at))
            if not isinstance(got, str):
                return got
    got = _value_after_target(ms, events, t, w, check)
    if got is not None and not isinstance(got, str):
        return got
    refused = refused or got
    if refused:
        raise Unplaceable(text, f"--window {window}: apply would refuse it: {refused}")
    raise InputError(f"--window {window}: neither a module called before {text} nor a "
                     f"value defined on its call path")


def _value_after_target(ms: ModelSource, events: list[Event], t: ManualTarget, w: str, check):
    """A local value the layer computes after the target (`gmm2_out` after the router and the
    GMMs): the window of the next layer's weight, as for a module named after the target
    (`_cross_layer`): right after the statement that computes it, inside the decoder layer,
    depending on it; apply's reason when it refuses, None when no method of the layer has it."""
    from .place import layer_depth

    path = events[t.t_idx].path
    ld = layer_depth(ms, path)
    if ld is None:
        return None
    head = w.split(".")[0]
    refused = None
    for d in range(len(path) - 1, ld, -1):
        h = path[d]
        m = ms.method(h.cls, h.method)
        if m is None or ms.file_of(h.cls) not in ms.primary:
            continue
        # the target's own statement too: `out, gmm2_out = self.moe(...)` runs GMM1 and assigns
        # GMM2's output after it
        later = [j for j in range(h.stmt, len(m.stmts)) if head in m.stmts[j].defs]
        wexpr = weight_expr(path, d, t.lin)
        if not later or wexpr is None:
            continue
        st = m.stmts[later[0]]
        anchor = next((call_name(c) for c in st.calls if call_name(c).startswith("self.")), None)
        if anchor is None:
            continue
        pl = Placement(Insert(h.cls, h.method, anchor, "after"), w,
                       "self.next_layer." + wexpr[len("self."):], Join(h.cls, h.method, "end"),
                       ms.file_of(h.cls), "manual",
                       f"--window {w}: computed after the target in {h.cls}.{h.method}: "
                       f"cross-layer, after {anchor} of this layer, prefetch the next layer's "
                       f"weight", "next_layer", callers=tuple(path[:d + 1]),
                       anchor_line=st.start, stmt=later[0])
        got = check(pl)
        if not isinstance(got, str):
            return got
        refused = refused or got
    return refused


def overlapped(ms: ModelSource, events: list[Event], pl: Placement, t_idx: int) -> list[Event]:
    """The MatMul-family calls (linears) the forward pass runs between the insertion point and
    the target, on the target's path: the prefetch overlaps them and shares their HBM traffic.
    Manual mode lists them as risks, since without a profile nothing says whether they leave
    bandwidth free."""
    from .dataflow import call_node

    ins = pl.insert
    m = ms.method(ins.cls, ins.method)
    if m is None or pl.scope != "same":
        return []
    at = next((k for k, s in enumerate(m.stmts) if call_node(s, ins.anchor_call) is not None), None)
    if at is None:
        return []
    first = at if ins.position == "before" else at + 1
    inside = [i for i in range(t_idx) if any(h.cls == ins.cls and h.method == ins.method
                                             and h.stmt >= first for h in events[i].path)]
    if not inside:
        return []
    t_path = events[t_idx].path
    return [e for e in events[min(inside):t_idx] if e.kind == "linear"
            and not _off_target_path(ms, e.path, t_path)]


def earliest_window(ms: ModelSource, events: list[Event], t_idx: int, lin: LinearAttr, check
                    ) -> Placement | None:
    """Manual mode's default window (no profile): start at the output of the MatMul that runs
    last before the target, so the window holds the light calls between them (seed 003 3a);
    for the layer's first MatMul, after the layer's last one (cross-layer: the next layer's
    weight). The same placement code as with a profile (`place_all`); the first candidate apply
    accepts, nearest MatMul first. MatMuls of another branch of the target's own module choice
    (the MoE block's experts when `self.mlp` is built as the MoE or as the dense MLP) never run
    with it in one layer and start no same-layer window; a cross-layer window may (the next
    layer may be of either kind). None when no candidate is legal."""
    t_path = events[t_idx].path
    before = [i for i in range(t_idx - 1, -1, -1) if events[i].kind == "linear"
              and (events[i].owner, events[i].attr) != (lin.cls, lin.attr)
              and not other_branch(events[i].path, t_path)]
    from .place import layer_depth

    ld = layer_depth(ms, events[t_idx].path)
    layer = events[t_idx].path[:ld + 1] if ld is not None else None
    after = sorted((i for i in range(t_idx + 1, len(events)) if events[i].kind == "linear"
                    and layer is not None and events[i].path[:ld + 1] == layer),
                   reverse=True)       # the layer's last MatMul first (its MLP output)
    for order in (before[:3], after[:3]):
        for w_idx in order:
            cands = place_all(ms, events, t_idx, w_idx, "output", lin)
            if isinstance(cands, str):
                continue
            for pl in cands:
                if not _runs_with_target(ms, pl, events[t_idx]):
                    continue
                got = check(pl)
                if not isinstance(got, str):
                    return got
    return None


def other_branch(a, b) -> bool:
    """Two call paths through the same call (`self.mlp(...)`, one hop equal) into different
    classes: the attribute is built as one or the other (`MoE(config) if sparse else
    MLP(config)`), so the calls never run in the same module."""
    for k in range(min(len(a), len(b)) - 1):
        if a[k] != b[k]:
            return False
        if a[k + 1].cls != b[k + 1].cls:
            return True
    return False


def _runs_with_target(ms: ModelSource, pl: Placement, t: Event) -> bool:
    """Whether the insertion runs whenever the target does: no line between them leaves the
    insertion's block (an `else:` branch, the end of an `if`), so a MatMul in another branch
    (GPT-BigCode's cross-attention c_attn) never starts a window. Cross-layer insertions: at
    the top level of their method."""
    ins = pl.insert
    m = ms.method(ins.cls, ins.method)
    if m is None or pl.stmt is None or pl.stmt >= len(m.stmts):
        return False
    lines = ms.files[ms.file_of(ins.cls)].lines
    at = m.stmts[pl.stmt]
    indent = len(at.indent)
    if pl.scope == "next_layer":
        return indent == min(len(st.indent) for st in m.stmts)
    hop = next((h for h in t.path if (h.cls, h.method) == (ins.cls, ins.method)), None)
    if hop is None:
        return False
    end = m.stmts[hop.stmt].start
    for line in lines[at.end:end]:       # lines after the insertion's statement, to the target's
        text = line.strip()
        if text and not text.startswith("#") and len(line) - len(line.lstrip()) < indent:
            return False
    return True


def held_calls(ms: ModelSource, events: list[Event], pl: Placement, t_idx: int) -> list[Event]:
    """The calls the forward pass runs between the insertion point and the target, in evaluation
    order: what the prefetch can hide behind. Empty: a window of no op (the prefetch and the
    MatMul start together). Cross-layer windows hold the rest of this layer and the next layer's
    calls before the target."""
    from .place import layer_depth
    from .dataflow import call_node

    ins = pl.insert
    m = ms.method(ins.cls, ins.method)
    if m is None:
        return []
    at = next((k for k, s in enumerate(m.stmts) if call_node(s, ins.anchor_call) is not None), None)
    if at is None:
        return []
    first = at if ins.position == "before" else at + 1
    inside = [i for i in range(len(events)) if any(h.cls == ins.cls and h.method == ins.method
                                                   and h.stmt >= first for h in events[i].path)]
    t_path = events[t_idx].path
    if pl.scope == "next_layer":
        tail = [i for i in inside if i > t_idx
                and not exclusive_paths(ms, tuple(pl.callers), events[i].path)]
        ld = layer_depth(ms, t_path)
        head = [i for i in range(t_idx) if ld is not None
                and events[i].path[:ld + 1] == t_path[:ld + 1]]
        return [events[i] for i in tail + head if _leaf(ms, events[i])
                and not (i < t_idx and _off_target_path(ms, events[i].path, t_path))]
    start = [i for i in inside if i < t_idx]
    return [events[i] for i in range(min(start), t_idx) if _leaf(ms, events[i])
            and not _off_target_path(ms, events[i].path, t_path)] if start else []


def _off_target_path(ms: ModelSource, path, t_path) -> bool:
    """A call the forward never runs together with the target: in another arm of an `if` the
    target's path takes (pysource/paths.py), or in another class of the module the target's
    call runs (`other_branch`). The window lists only the calls on the target's path."""
    return exclusive_paths(ms, path, t_path) or other_branch(path, t_path)


def _leaf(ms: ModelSource, e: Event) -> bool:
    """A call that runs ops itself, not a submodule of the source whose calls are listed."""
    return not (e.kind == "module" and e.child in ms.classes)
