"""What a generated profile IS, by construction: per op its counter verdict, per linear its calls
per step, and where a prefetch placed in the source would overlap (the placed window).

Nothing here reads the written files or uses cannbot_prefetch: it answers from the ops the
profile was written from, so tests can hold the tool's decisions against it.

Placed window (the seed's rule, eager mode): a prefetch issued on a side stream that first waits
for the compute stream starts when everything launched before the insertion point is done, so it
overlaps exactly the kernels launched between the insertion point and the target. The insertion
point is a statement: `before` the first statement of `Class.forward` containing the anchor call
(every kernel that statement launches is inside the window, e.g. the whole one-line MLP), or
`after` it. Scope `next_layer` targets the next layer's instance of the linear.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops import SCRIPT, Op
from .source import Lines


@dataclass(frozen=True)
class Linear:
    """A prefetchable linear (MatMulV3 / GroupedMatmul role) of the generated model."""

    role: str                  # "LlamaAttention.q_proj", "Qwen3MoeExperts.gate_up_proj", ...
    type: str                  # MatMulV3 | GroupedMatmul
    weight_shape: tuple[int, ...]
    weight_bytes: int          # the whole weight as stored on this rank
    calls_per_step: int
    verdict: str               # counter verdict (the same for every instance: same shapes)
    mte2_ratio: float
    compute_ratio: float

    @property
    def memory_bound(self) -> bool:
        return self.verdict == "memory-bound"


def linears(ops: tuple[Op, ...]) -> dict[str, Linear]:
    out: dict[str, Linear] = {}
    for op in ops:
        if op.weight is None or op.pipes is None:
            continue
        prev = out.get(op.role)
        if prev is not None:
            assert prev.verdict == op.verdict, f"{op.role}: instances differ"
            out[op.role] = Linear(**{**prev.__dict__, "calls_per_step": prev.calls_per_step + 1})
            continue
        out[op.role] = Linear(op.role, op.type, op.weight.shape, op.weight.nbytes, 1, op.verdict,
                              op.pipes.mte2_ratio, op.pipes.compute_ratio)
    return out


@dataclass(frozen=True)
class Placement:
    """Where a plan site issues its prefetch (plan fields, as CONTRACTS.md names them)."""

    insert_cls: str
    anchor_call: str
    position: str              # before | after
    target: str                # "Class.attr"
    scope: str = "same"        # same | next_layer


class PlacementError(ValueError):
    pass


def _anchor_line(lines: Lines, cls: str, anchor: str) -> int:
    """First line of cls.forward that calls the anchor (`self.mlp`, `attention_interface`)."""
    calls = (anchor + "(",) if not anchor.endswith("(") else (anchor,)
    try:
        return lines.line((cls, calls, 1))
    except LookupError:
        try:
            return lines.line((cls, (anchor,), 1))
        except LookupError as exc:
            raise PlacementError(str(exc)) from None


def _line_in(op: Op, cls: str, lines: Lines) -> int | None:
    for fr in op.frames:
        if fr[0] == cls:
            return lines.line(fr)
    return None


def placed_windows(ops: tuple[Op, ...], lines: Lines, p: Placement) -> dict[int | None, list[Op]]:
    """Per instance of the insertion point (its layer; None outside the layers): the ops launched
    between the insertion point and the target it prefetches for. Raises PlacementError when the
    insertion point is not in the source, never runs, or comes after its target."""
    line = _anchor_line(lines, p.insert_cls, p.anchor_call)
    hits = [(idx, op, _line_in(op, p.insert_cls, lines)) for idx, op in enumerate(ops)]
    hits = [(idx, op, ln) for idx, op, ln in hits if ln is not None]
    if not hits:
        raise PlacementError(f"no kernel runs inside {p.insert_cls}.forward")
    # A per-layer class (attention, MLP, decoder layer, experts) has one instance per layer;
    # a model-level class (LlamaModel, ...ForCausalLM) one per step.
    per_layer = all(op.layer is not None for _, op, _ in hits)
    inside: dict[int | None, list[tuple[int, int]]] = {}      # instance -> [(op index, line)]
    for idx, op, ln in hits:
        inside.setdefault(op.layer if per_layer else None, []).append((idx, ln))
    targets = [(idx, op.layer) for idx, op in enumerate(ops) if op.role == p.target]
    if not targets:
        raise PlacementError(f"no kernel of {p.target} in the profile")
    out: dict[int | None, list[Op]] = {}
    for inst, members in inside.items():
        start = next((i for i, ln in members if (ln >= line if p.position == "before" else ln > line)),
                     members[-1][0] + 1)
        later = [(i, t_layer) for i, t_layer in targets if i >= start]
        if inst is None:
            want = later[0][1] if later else None
        else:
            want = inst + 1 if p.scope == "next_layer" else inst
        mine = [i for i, t_layer in targets if t_layer == want]
        if p.scope == "next_layer" and not mine:
            continue          # the last layer has no next layer: the prefetch does nothing there
        t_idx = next((i for i in mine if i >= start), None)
        if t_idx is None:
            raise PlacementError(f"{p.insert_cls}.forward {p.position} {p.anchor_call} does not run "
                                 f"before {p.target} (instance {inst})")
        out[inst] = list(ops[start:t_idx])
    return out


def smallest_window(ops: tuple[Op, ...], lines: Lines, t_idx: int) -> tuple[list[Op], bool]:
    """The smallest window any statement-level placement can give the target op at t_idx: the ops
    from the last statement start before it, in any class whose forward encloses the target (its
    own, the decoder layer's, the model's loop over layers, ...), up to the target. Every real
    placement's window contains it (a window ends at the target and starts at a statement
    boundary), so a memory-bound op in it means no safe window. Returns (ops, top_level): whether
    that statement sits directly in a method body, where an insertion is plain (not inside a loop
    or a `with`)."""
    target = ops[t_idx]
    enclosing = {fr[0] for fr in target.frames if fr[0] != SCRIPT}
    model_level = {fr[0] for op in ops if op.layer is None for fr in op.frames}

    def stmt(op: Op, cls: str) -> tuple[int | None, int] | None:
        """(instance or loop iteration, line) of the statement of cls that launches op."""
        for fr in op.frames:
            if fr[0] == cls:
                line = lines.line(fr)
                once = cls in model_level and lines.top_level(line)
                return (None if once else op.layer, line)
        return None

    for j in range(t_idx - 1, -1, -1):
        for cls in sorted(enclosing):
            here = stmt(ops[j], cls)
            if here is None or (cls not in model_level and ops[j].layer != target.layer):
                continue
            if j == 0 or stmt(ops[j - 1], cls) != here:
                return list(ops[j:t_idx]), lines.top_level(here[1])
    return list(ops[:t_idx]), False
