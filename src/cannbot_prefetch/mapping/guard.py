"""The tensor and dim the runtime decode guard reads (issue 10 item 7, plan side; CONTRACTS.md
"Defaults"): the plan names a tensor valid at the insertion point and the dim holding its tokens
per sequence, and the call prefetches only while `tensor.shape[dim] <= max_len`.

A value's layout is traced back through the source, never guessed from its name:
- the model's token input (`input_ids` [B, S], `inputs_embeds` [B, S, H] of the outermost
  forward; no other input such as `use_cache` or `attention_mask`) is batch-first, the sequence
  at dim 1; in a serving engine's model (vLLM, SGLang: its layers build the linears) it is flat
  [num_tokens], every sequence's tokens in one dim, so there is no per-sequence dim;
- a parameter of an inner forward takes the layout of the argument its caller passes (the call
  path the mapping found), so `Qwen3MoeExperts.forward(hidden_states)` called with
  `hidden_states.view(-1, hidden_dim)` is known to be flattened;
- a submodule call `self.X(x, ...)` (linear, norm, activation, block) keeps x's leading dims,
  unless X's forward returns a tuple (a rotary embedding's `cos, sin`: no one layout);
  element-wise arithmetic keeps its operands'; `.contiguous()`, `.to()`, a last-dim
  `.chunk()`/`.split()` keep the receiver's;
- `.view(...)` / `.reshape(...)` not led by -1 or a product keep [B, S, ...] (dim 1); `.transpose(1, 2)` swaps
  dims 1 and 2 ([B, S, heads, hd] -> [B, heads, S, hd]: dim 2);
- a flattened value (`.view(-1, ...)`, `.view(b * s, ...)`, `.reshape(-1, ...)`, `.flatten()`,
  indexing by token)
  has no per-sequence dim; a free function's result (`attention_interface(...)`) is unknown.
Dims are counted from the front, so [B, S, H] and [B, S, heads, hd] both read dim 1 and heads
or batch are never taken for tokens. The dependency is tried first, then the method's
parameters; without a known layout there is no guard, and the plan says why.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from ..legality.kinds import value_problem
from ..pysource import Method, code_of, dotted
from .source import Hop, ModelSource

FLAT = -1                    # a layout with no per-sequence dim
_KEEP = {"contiguous", "to", "float", "half", "bfloat16", "type_as", "clone", "detach"}
_DEPTH = 24                  # values followed through assignments and callers
# the model forward's token inputs (transformers' batch-first convention: [B, S] / [B, S, H]);
# any other input (use_cache, attention_mask, position_ids) is not taken for the hidden stream
_MODEL_INPUTS = {"input_ids", "inputs_embeds", "decoder_input_ids", "decoder_inputs_embeds"}


class _Trace:
    def __init__(self, ms: ModelSource, path: Sequence[Hop]):
        self.ms, self.path, self.steps = ms, list(path), 0

    # -- a name in a method, before statement k
    def name(self, name: str, depth: int, k: int) -> tuple[int | None, str]:
        self.steps += 1
        if self.steps > _DEPTH:
            return None, f"'{name}': followed too far"
        hop = self.path[depth]
        m = self.ms.method(hop.cls, hop.method)
        if m is None:
            return None, f"{hop.cls}.{hop.method} is not in the source"
        for j in range(min(k, len(m.stmts)) - 1, -1, -1):
            s = m.stmts[j]
            if name not in s.defs:
                continue
            value = _value_for(s, name)
            if value is None:
                return None, f"'{name}' is assigned by `{_short(s.node)}`"
            # `h, _ = self.attn(x)`: h is the first element of what the call returns
            return self.expr(value, depth, j, unpacked=_unpacks(s))
        if name in m.params:
            return self.param(m, name, depth)
        return None, f"'{name}' is not assigned before the insertion point"

    def param(self, m: Method, name: str, depth: int) -> tuple[int | None, str]:
        hop = self.path[depth]
        if _annotated_tuple(m, name):   # `position_embeddings: tuple[Tensor, Tensor]` (hy_v4)
            return None, f"parameter '{name}' is annotated as a tuple, not one tensor"
        if hop.stmt < 0:
            return None, f"parameter '{name}': {hop.cls}.{hop.method} is not reached by the forward pass"
        if depth == 0:
            if name not in _MODEL_INPUTS:
                return None, f"'{name}' is an input of {hop.cls}.{hop.method} but not a token input"
            if self.ms.serving.flat_tokens(self.ms.linears):
                return FLAT, (f"'{name}' of {hop.cls}.{hop.method}: a serving engine's model "
                              "takes every sequence's tokens flat [num_tokens], no per-sequence dim")
            return 1, (f"'{name}', an input of {hop.cls}.{hop.method}, the model's forward: "
                       "[batch, seq, ...]")
        caller = self.path[depth - 1]
        cm = self.ms.method(caller.cls, caller.method)
        call = _call_in(cm, caller) if cm else None
        if call is None:
            return None, f"parameter '{name}': its caller's call `{caller.call}` was not found"
        arg = _arg_for(call, m, name)
        if arg is None:
            return None, f"parameter '{name}': `{caller.call}` passes no value for it"
        dim, why = self.expr(arg, depth - 1, caller.stmt)
        return dim, f"parameter '{name}' <- {caller.cls}.{caller.method}: {why}"

    def returns_other(self, call: cst.Call, depth: int) -> str | None:
        """Why a submodule call's result is not one tensor (its forward returns a tuple or is
        annotated so: legality/kinds.py), else None."""
        hop = self.path[depth]
        owner = self.ms.method_owner(hop.cls, hop.method)
        if owner not in self.ms.classes:
            return None
        file, info = self.ms.classes[owner]
        return value_problem(self.ms.files[file], info, call)

    # -- an expression in a method, before statement k
    def expr(self, e: cst.BaseExpression, depth: int, k: int,
             unpacked: bool = False) -> tuple[int | None, str]:
        text = _short(e)
        if isinstance(e, cst.Name):
            return self.name(e.value, depth, k)
        if isinstance(e, cst.BinaryOperation):
            dim, why = self.expr(e.left, depth, k)
            return (dim, why) if dim is not None else self.expr(e.right, depth, k)
        if isinstance(e, cst.Subscript):
            return FLAT, f"`{text}` indexes tokens out of the batch"
        if isinstance(e, cst.Call):
            func = e.func
            callee = dotted(func) or ""
            args = [a for a in e.args if a.keyword is None and a.star == ""]
            if callee.startswith("self.") and callee.count(".") == 1:
                other = None if unpacked else self.returns_other(e, depth)
                if other:          # dbrx's rotary_emb: (cos, sin), whatever the caller annotates
                    return None, f"`{text}` is {other}, not one tensor"
                first = args[0].value if args else next(
                    (a.value for a in e.args if a.keyword is not None
                     and a.keyword.value in ("hidden_states", "x", "input")), None)
                if first is None:
                    return None, f"`{text}` is called without an input tensor"
                dim, why = self.expr(first, depth, k)
                return dim, f"{callee}(…) keeps the leading dims of {why}"
            if isinstance(func, cst.Attribute):
                meth, recv = func.attr.value, func.value
                if meth in _KEEP or (meth in ("chunk", "split") and _last_dim(e)):
                    return self.expr(recv, depth, k)
                if meth == "flatten" or (meth in ("view", "reshape") and _leads_minus_one(e)):
                    return FLAT, f"`{text}` flattens the tokens"
                if meth in ("view", "reshape"):
                    return 1, f"`{text}`: [batch, seq, ...]"
                if meth == "transpose" and _ints(args) in ((1, 2), (2, 1)):
                    dim, why = self.expr(recv, depth, k)
                    if dim in (1, 2):
                        return 3 - dim, f"`{text}` of {why}"
                    return dim, why
        return None, f"`{text}`: layout unknown"


def _annotated_tuple(m: Method, name: str) -> bool:
    """The parameter's annotation says tuple (`tuple[torch.Tensor, torch.Tensor]`, `Tuple[...]`,
    optionally `| None`): its value has no shape to read."""
    fn = m.node
    for p in (*fn.params.params, *fn.params.kwonly_params):
        if p.name.value == name and p.annotation is not None:
            text = code_of(p.annotation.annotation).replace("typing.", "").replace(" ", "")
            return text.lower().startswith(("tuple[", "optional[tuple["))
    return False


def _short(node: cst.CSTNode) -> str:
    """A node's code on one line, cut to 60 characters (for the plan's `decode_guard` text)."""
    return " ".join(code_of(node).split())[:60]


def _value_for(s, name: str) -> cst.BaseExpression | None:
    """The expression a simple statement assigns to `name` (the first element of a tuple target
    takes a call's first output: `x, _ = self.attn(x)`)."""
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or not node.body:
        return None
    small = node.body[0]
    if isinstance(small, cst.Assign):
        t = small.targets[0].target
        if isinstance(t, cst.Name):
            return small.value if t.value == name else None
        if isinstance(t, (cst.Tuple, cst.List)):
            names = [el.value.value if isinstance(el.value, cst.Name) else None for el in t.elements]
            if name not in names:
                return None
            v = small.value
            split = isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) \
                and v.func.attr.value in ("chunk", "split") and _last_dim(v)
            if split or (names[0] == name and isinstance(v, cst.Call)
                         and (dotted(v.func) or "").startswith("self.")):
                return v
        return None
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return small.value
    if isinstance(small, cst.AugAssign):
        return small.target
    return None


def _unpacks(s) -> bool:
    """The statement assigns to a tuple of names (`x, _ = ...`)."""
    node = s.node
    small = node.body[0] if isinstance(node, cst.SimpleStatementLine) and node.body else None
    return isinstance(small, cst.Assign) and isinstance(small.targets[0].target, (cst.Tuple, cst.List))


def _call_in(m: Method, hop: Hop) -> cst.Call | None:
    if not 0 <= hop.stmt < len(m.stmts):
        return None
    return next((c for c in m.stmts[hop.stmt].calls if (dotted(c.func) or "") == hop.call), None)


def _arg_for(call: cst.Call, m: Method, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    params = [p for p in m.params if p != "self"]
    pos = [a for a in call.args if a.keyword is None and a.star == ""]
    i = params.index(name) if name in params else -1
    return pos[i].value if 0 <= i < len(pos) else None


def _ints(args) -> tuple[int, ...]:
    out = []
    for a in args:
        v = a.value
        neg = isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus)
        inner = v.expression if neg else v
        if not isinstance(inner, cst.Integer):
            return ()
        out.append(-int(inner.value) if neg else int(inner.value))
    return tuple(out)


def _leads_minus_one(call: cst.Call) -> bool:
    """`.view(-1, ...)`, or a first size that is a product (`.view(batch_size * seq_length,
    emb_dim)`, zaya / ergo): batch and sequence merged into one dim."""
    args = list(call.args)
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)):
        els = args[0].value.elements
        return bool(els) and (_ints([els[0]]) == (-1,) or _is_product(els[0].value))
    return bool(args) and args[0].keyword is None and (
        _ints(args[:1]) == (-1,) or _is_product(args[0].value))


def _is_product(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)


def _last_dim(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "dim" and _ints([a]) == (-1,)
               for a in call.args)


def _path_to(events, cls: str, method: str) -> list[Hop]:
    """The calling hops down to the insertion method (the first call path that runs it)."""
    for e in events:
        for d, h in enumerate(e.path):
            if h.cls == cls and h.method == method:
                return list(e.path[:d + 1])
    return []


def guard_for(ms: ModelSource, pl, events=()) -> tuple[tuple[str, int] | None, str]:
    """((expr, dim), why) of the decode guard for a placement, or (None, why not). `events`:
    the forward pass's calls (flatten.py), whose paths lead parameters to their callers."""
    m = ms.method(pl.insert.cls, pl.insert.method)
    if m is None or pl.stmt is None:
        return None, "the insertion method is not in the source"
    path = _path_to(events, pl.insert.cls, pl.insert.method)
    if not path:          # no call path (the method is not reached by the forward pass)
        path = [Hop(pl.insert.cls, pl.insert.method, -1, "", 0)]
    upto = pl.stmt if pl.insert.position == "before" else pl.stmt + 1
    names = [pl.dependency] if "." not in pl.dependency else []
    names += [p for p in m.params if p != "self" and p not in names]
    tried = []
    for name in names:
        dim, why = _Trace(ms, path).name(name, len(path) - 1, upto)
        if dim is not None and dim >= 0:
            before = f" (the dependency {tried[0]})" if tried else ""
            return (name, dim), f"{name}.shape[{dim}] is the tokens per sequence{before}: {why}"
        tried.append(why)
    return None, ("no tensor at the insertion point shows its tokens per sequence ("
                  + "; ".join(tried[:3]) + "): no runtime decode guard, so it also prefetches "
                  "in prefill")
