"""Manual mode (seed 003 "手动指定"): `--target CLASS.ATTR` (repeatable) and `--window EXPR`.

`--target LlamaMLP.down_proj` names a linear-like attribute (or a fused expert Parameter) of a
class in the model source. `--window` names the dependency:
  - a module call before the target (`post_attention_layernorm`, `self.o_proj`,
    `LlamaAttention.o_proj`): a light op's input (3b) or a MatMul's output (3a) starts the window;
  - otherwise a local value (`hidden_states`): the prefetch goes right before the call that
    runs the target, in the deepest method where that value is defined, depending on it.
Without `--window`, the nearest dependency the rewriter accepts as legal is used (for a down
projection, the MLP's input).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, SourceError
from ..plan import Insert, Join
from .place import Placement, nearest_legal, place, weight_expr
from .source import Event, LinearAttr, ModelSource


@dataclass(frozen=True)
class ManualTarget:
    cls: str
    attr: str
    lin: LinearAttr
    t_idx: int


def parse_target(text: str, ms: ModelSource, events: list[Event]) -> ManualTarget:
    if "." not in text:
        raise InputError(f"--target must be CLASS.ATTR (e.g. LlamaMLP.down_proj), not {text!r}")
    cls, attr = text.split(".", 1)
    where = ", ".join(ms.files)
    if cls not in ms.classes:
        raise SourceError(f"--target {text}: class {cls} is not defined in the model source",
                          path=where)
    # CLASS.sub.attr: walk submodules
    parts = attr.split(".")
    owner = cls
    for p in parts[:-1]:
        child = ms.children.get((owner, p))
        if child is None:
            raise SourceError(f"--target {text}: {owner} has no submodule '{p}'", path=where)
        owner = child
    leaf = parts[-1]
    lin = ms.linears.get((owner, leaf))
    if lin is None:
        info = ms.classes[owner][1]
        what = "is not a linear-like attribute" if leaf in info.attrs else "does not exist"
        raise SourceError(f"--target {text}: attribute '{leaf}' of {owner} {what} "
                          f"(linear-like attributes: "
                          f"{', '.join(a for (c, a) in ms.linears if c == owner) or 'none'})",
                          path=ms.file_of(owner))
    if lin.dims is None:
        raise InputError(f"--target {text}: weight shape unknown: {lin.error}",
                         path=ms.config_path or None)
    idx = next((i for i, e in enumerate(events) if e.kind == "linear" and e.owner == owner
                and e.attr == leaf), None)
    if idx is None:
        raise SourceError(f"--target {text}: {owner}.{leaf} is never run by the forward pass of "
                          f"the model's root class", path=ms.file_of(owner))
    return ManualTarget(owner, leaf, lin, idx)


def place_manual(ms: ModelSource, events: list[Event], t: ManualTarget, window: str | None,
                 accept) -> Placement:
    """Placement for a manual target; InputError when `--window` cannot be used."""
    if not window:
        pl = nearest_legal(ms, events, t.t_idx, t.lin, accept=lambda p: accept(p, t.lin))
        if isinstance(pl, str):
            raise SourceError(f"--target {t.cls}.{t.attr}: no legal dependency: {pl}",
                              path=t.lin.file)
        return pl
    w = window.strip()
    name = w.split(".")[-1]
    scoped_cls = w.split(".")[0] if w.count(".") == 1 and not w.startswith("self.") else None
    calls = [i for i in range(t.t_idx - 1, -1, -1)
             if events[i].attr == name and (scoped_cls is None or events[i].owner == scoped_cls)]
    if calls and (w.startswith("self.") or scoped_cls or "." not in w):
        w_idx = calls[0]
        start = "output" if events[w_idx].kind == "linear" else "input"
        pl = place(ms, events, t.t_idx, w_idx, start, t.lin)
        if isinstance(pl, str):
            raise InputError(f"--window {window}: {pl}")
        problem = accept(pl, t.lin)
        if problem:
            raise InputError(f"--window {window}: the rewriter refuses it: {problem}")
        return pl
    # a local value: deepest method on the target's path that has it before the target's call
    path = events[t.t_idx].path
    for d in range(len(path) - 1, -1, -1):
        h = path[d]
        m = ms.method(h.cls, h.method)
        if m is None:
            continue
        head = w.split(".")[0]
        defined = head in m.params or any(head in s.defs for s in m.stmts[:h.stmt])
        if not defined:
            continue
        wexpr = weight_expr(path, d, t.lin)
        if wexpr is None:
            continue
        pl = Placement(Insert(h.cls, h.method, h.call, "before"), w, wexpr,
                       Join(h.cls, h.method, "end"), ms.file_of(h.cls), "manual",
                       f"--window {w}: before {h.call} in {h.cls}.{h.method}", stmt=h.stmt)
        problem = accept(pl, t.lin)
        if problem:
            raise InputError(f"--window {window}: the rewriter refuses it: {problem}")
        return pl
    raise InputError(f"--window {window}: neither a module called before {t.cls}.{t.attr} nor a "
                     f"value defined on its call path")


def overlapped(ms: ModelSource, events: list[Event], pl: Placement, t_idx: int) -> list[Event]:
    """The MatMul-family calls (linears) the forward pass runs between the insertion point and
    the target: the prefetch overlaps them and shares their HBM traffic. Manual mode lists them
    as risks, since without a profile nothing says whether they leave bandwidth free."""
    from .place import _call_node

    ins = pl.insert
    m = ms.method(ins.cls, ins.method)
    if m is None or pl.scope != "same":
        return []
    at = next((k for k, s in enumerate(m.stmts) if _call_node(s, ins.anchor_call) is not None), None)
    if at is None:
        return []
    first = at if ins.position == "before" else at + 1
    inside = [i for i in range(t_idx) if any(h.cls == ins.cls and h.method == ins.method
                                             and h.stmt >= first for h in events[i].path)]
    if not inside:
        return []
    return [e for e in events[min(inside):t_idx] if e.kind == "linear"]
