"""torch.compile checks: the inserted prefetch survives graph capture in the plan's mode.

Run with the switch on, under the recording stub (or the real torch_npu), in the mode the helper
was written for (docs/rewrite.md "What each mode emits"):
- `compile eager` / `compile aot_eager`: `torch.compile(model, backend=..., fullgraph=True)` runs
  (fullgraph: a graph break is an error), its outputs are bit-identical to the eager run with the
  switch off, and the compiled run issues every planned prefetch (an op a compiler dropped as dead
  code would issue none). aot_eager is the native stand-in for torchair's backends, which take
  the same AOT graph (torchair's docs triage npugraph_ex problems with aot_eager first).
- `captured prefetch` (per site): in dynamo's graph and in AOT's forward graph, one prefetch node
  per step the weight's module runs in (verify/runs.py: one per module that holds the weight,
  unless a layer runs more than once a forward), each after its dependency and before the next
  op that reads its weight, with the dependency an ancestor of that op (verify/graph.py).
- `side stream joined` (call form side_stream): a join node follows every prefetch node, so the
  side stream is joined before the graph ends (aclgraph capture requires it).
- `compile inductor`: torch.compile's default backend, where a C++ compiler exists (skipped with
  the reason otherwise): it runs, issues every prefetch, its outputs match eager within float
  tolerance (Inductor fuses, so not bit for bit), and, in the side_stream form, no join runs
  before the target's first read of the prefetched weight in the code Inductor generated.
  Inductor schedules side-effect ops only among themselves: it hoists the join right after its
  prefetch (the prefetch then blocks the compute stream), so that form fails here with the
  reason; the direct form has no join.
- `recompiles`: the eager-backend model called at decode batches b, 8b and 256b (inputs tiled
  along dim 0) compiles nothing at 256b and prefetches at every batch. A decode guard that read
  the batch (a total token count does) would recompile or stop prefetching there; when the
  model recompiles, the same run with the switch off says whether the prefetch is the cause.
A model that does not compile with fullgraph=True even with the switch off is reported as
skipped, with the compiler's message. A model object may name what to compile instead of itself
(`compile_target()`, below): the built-in factory's decode step does, so that its KV cache is
copied outside the graph.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..plan import Plan
from .checks import Check, Expected, call_with, failing_site, outputs_equal
from .graph import is_join, is_prefetch, op_name, order_problem

BACKENDS = ("eager", "aot_eager")
DECODE_BATCHES = (1, 8, 256)        # multiples of the factory's batch


@dataclass
class Captured:
    """What one compile produced: the graph and, per weight node, the tensor it stands for."""

    graph: Any
    tensor_of: dict = field(default_factory=dict)


@dataclass
class Recorder:
    compiles: int = 0
    dynamo: list[Captured] = field(default_factory=list)
    aot: list[Captured] = field(default_factory=list)


def _placeholder_tensors(gm) -> list:
    """Dynamo's graph inputs in order, each the real tensor it was traced from (None if not)."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        arg = n.meta.get("grapharg")
        try:
            out.append(arg.example if arg is not None else None)
        except Exception:  # an erased or non-tensor input
            out.append(None)
    return out


def _backend(kind: str, rec: Recorder) -> Callable:
    """A backend that behaves as `eager` / `aot_eager` and keeps what it compiled."""

    def compile_fn(gm, example_inputs):
        rec.compiles += 1
        tensors = _placeholder_tensors(gm)
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        rec.dynamo.append(Captured(gm, dict(zip(phs, tensors))))
        if kind == "eager":
            return gm.forward
        from functorch.compile import min_cut_rematerialization_partition
        from torch._dynamo.backends.common import aot_autograd
        from torch._dynamo.backends.debugging import boxed_nop

        def fw(g, inputs):
            aphs = [n for n in g.graph.nodes if n.op == "placeholder"]
            mapping = dict(zip(aphs, tensors)) if len(aphs) == len(tensors) else {}
            rec.aot.append(Captured(g, mapping))
            return boxed_nop(g, inputs)

        return aot_autograd(fw_compiler=fw, partition_fn=min_cut_rematerialization_partition,
                            keep_inference_input_mutations=True)(gm, example_inputs)

    return compile_fn


@dataclass
class Target:
    """What the checks compile, its inputs at decode batch xk, and how its output compares with
    the eager run's."""

    module: Any
    inputs: Callable[[int], Any]
    result: Callable[[Any], Any]


def target_of(model, inputs) -> Target:
    """`model` itself, its inputs tiled along dim 0; or, when the model object has
    `compile_target()` returning (module, make_inputs), that module called with
    `make_inputs(inputs, k)` (a wrapper whose forward cannot be traced, such as one that
    deep-copies a KV cache, compiles the model it wraps), its output's `logits` compared."""
    hook = getattr(model, "compile_target", None)
    if callable(hook):
        module, make = hook()
        return Target(module, lambda k: make(inputs, k), lambda out: getattr(out, "logits", out))
    return Target(model, lambda k: tile(inputs, k), lambda out: out)


def tile(inputs, k: int):
    """The inputs with every tensor repeated k times along dim 0 (the batch, for decode)."""
    import torch

    def one(x):
        if isinstance(x, torch.Tensor) and x.dim() >= 1:
            return x.repeat(k, *([1] * (x.dim() - 1)))
        return x

    if isinstance(inputs, dict):
        return {key: one(v) for key, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(one(v) for v in inputs)
    return one(inputs)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


@contextlib.contextmanager
def _fresh():
    """A clean dynamo state with its defaults for shapes (static first, then automatic dynamic)."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=True, assume_static_by_default=True):
        try:
            yield counters
        finally:
            torch._dynamo.reset()


def _compiles_off(target: Target, set_switch: Callable[[bool], None], backend: str,
                  batches=(1,)) -> tuple[str | None, int]:
    """(error or None, number of compiles) for the same calls with the switch off."""
    import torch

    rec = Recorder()
    set_switch(False)
    try:
        with _fresh():
            compiled = torch.compile(target.module, backend=_backend(backend, rec), fullgraph=True)
            for k in batches:
                call_with(compiled, target.inputs(k))
        return None, rec.compiles
    except Exception as exc:  # noqa: BLE001 - the model's own compile problem, reported
        return _first_line(exc), rec.compiles
    finally:
        set_switch(True)


def _site_nodes(captured: Captured, plan: Plan, exp: Expected) -> tuple[dict, dict, dict, int]:
    """Per site: prefetch node count, order problems and op names in one captured graph; plus
    the count of prefetch nodes whose weight no site plans."""
    nodes = list(captured.graph.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    by_id = {s.id: s for s in plan.sites}
    count = {s.id: 0 for s in plan.sites}
    problems: dict[str, list[str]] = {s.id: [] for s in plan.sites}
    ops: dict[str, set[str]] = {s.id: set() for s in plan.sites}
    unplanned = 0
    for n in nodes:
        if not is_prefetch(n):
            continue
        t = captured.tensor_of.get(n.args[0])
        hit = exp.by_tensor.get(id(t)) if t is not None else None
        if hit is None:
            unplanned += 1
            continue
        sid, owner = hit
        count[sid] += 1
        ops[sid].add(op_name(n))
        bad = order_problem(n, nodes, index, owner, by_id[sid].target.scope == "next_layer")
        if bad:
            problems[sid].append(bad)
    return count, problems, ops, unplanned


def _joined(captured: Captured) -> tuple[bool, str]:
    nodes = list(captured.graph.graph.nodes)
    pre = [i for i, n in enumerate(nodes) if is_prefetch(n)]
    joins = [i for i, n in enumerate(nodes) if is_join(n)]
    if not pre:
        return False, "no prefetch node"
    late = [i for i in pre if not any(j > i for j in joins)]
    if late:
        return False, f"{len(late)} of {len(pre)} prefetch node(s) have no join after them"
    return True, f"{len(pre)} prefetch node(s), {len(joins)} join node(s), each prefetch joined"


def capture_checks(model, inputs, plan: Plan, off, exp: Expected, counted: Callable,
                   set_switch: Callable[[bool], None], form: str) -> list[Check]:
    """The checks above. `counted(fn)` runs a compiled call and returns (result, prefetches
    issued); `set_switch(on)` flips the model; `form` is the helper's call form (direct |
    side_stream). Expects the switch on and grad off; leaves it on."""
    import torch

    checks: list[Check] = []
    want = sum(exp.wanted(s.id) for s in plan.sites)   # one per step (runs.py)
    captured: dict[str, Captured | None] = {}
    target = target_of(model, inputs)
    for backend in BACKENDS:
        rec = Recorder()
        try:
            with _fresh() as counters:
                compiled = torch.compile(target.module, backend=_backend(backend, rec),
                                         fullgraph=True)
                out, fired = counted(lambda: target.result(call_with(compiled, target.inputs(1))))
                breaks = sum(counters["graph_break"].values())
                graphs = rec.aot if backend == "aot_eager" else rec.dynamo
                captured[backend] = graphs[-1] if graphs else None
                same, detail = outputs_equal(off, out)
                checks.append(_compile_check(
                    backend, same and breaks == 0 and fired == want,
                    f"fullgraph=True, {breaks} graph break(s); outputs vs eager with the switch "
                    f"off: {detail}; the compiled run issued {fired}/{want} prefetch(es)"))
                if backend == "eager":
                    checks.append(_recompiles(target, compiled, rec, counted, want, set_switch))
        except Exception as exc:  # noqa: BLE001 - compile failures are the finding
            if captured.get(backend) is not None:  # compiled; a larger decode batch failed
                checks.append(Check("recompiles", False, f"not checked: the inputs tiled along "
                                                         f"dim 0 did not run ({_first_line(exc)})",
                                    skipped=True))
                continue
            captured[backend] = None
            err_off, _ = _compiles_off(target, set_switch, backend)
            if err_off is not None:
                checks.append(_compile_check(backend, False, f"not checked: the model does not "
                                                             f"compile with fullgraph=True even "
                                                             f"with the switch off ({err_off})",
                                             skipped=True))
            else:
                sid = failing_site(exc, plan)
                at = f" at site {sid}" if sid else ""
                checks.append(_compile_check(backend, False, f"compiles with the switch off, "
                                                             f"fails with it on{at}: "
                                                             f"{_first_line(exc)}"))
    checks += _site_checks(captured, plan, exp)
    checks.append(inductor_check(target, plan, off, want, counted, form, set_switch))
    if form == "side_stream":
        done = [(b, c) for b, c in captured.items() if c is not None]
        if done:
            results = [(b, *_joined(c)) for b, c in done]
            checks.append(Check("side stream joined", all(ok for _, ok, _ in results),
                                "; ".join(f"{b}: {d}" for b, _, d in results)))
    return checks


_PREFETCH_CALL = re.compile(r"torch\.ops\.(?:cannbot_prefetch\.prefetch|npu\.npu_prefetch)"
                            r"\.default\((\w+)")
_JOIN_CALL = "torch.ops.cannbot_prefetch.join.default("
CXX = ("g++", "c++", "clang++")


def _cxx() -> str | None:
    import os
    import shutil

    return next((p for p in (shutil.which(c) for c in (os.environ.get("CXX") or "",) + CXX if c)
                 if p), None)


def hoisted_joins(code: str) -> list[str]:
    """Per prefetch call in Inductor's generated code whose next join comes before the first
    line that reads the prefetched weight: what the problem is (empty: none)."""
    lines = code.splitlines()
    out = []
    for i, text in enumerate(lines):
        m = _PREFETCH_CALL.search(text)
        if m is None:
            continue
        w = re.compile(rf"\b{re.escape(m.group(1))}\b")
        read = next((j for j in range(i + 1, len(lines)) if w.search(lines[j])
                     and not lines[j].lstrip().startswith("#")
                     and not _PREFETCH_CALL.search(lines[j])), None)
        join = next((j for j in range(i + 1, len(lines)) if _JOIN_CALL in lines[j]), None)
        if join is not None and (read is None or join < read):
            out.append(f"the join of the prefetch of {m.group(1)} (generated line {i + 1}) runs at "
                       f"line {join + 1}, before the weight's first read"
                       + (f" (line {read + 1})" if read is not None else ""))
    return out


def inductor_check(target: Target, plan: Plan, off, want: int, counted: Callable,
                   form: str, set_switch: Callable[[bool], None]) -> Check:
    """`compile inductor` (module docstring). Eager mode only: ge_graph and npugraph_ex compile
    with torchair's backends, for which aot_eager above stands in."""
    import torch

    if plan.mode != "eager":
        return Check("compile inductor", False, f"not checked: mode {plan.mode} compiles with "
                                                f"torchair (aot_eager above stands in for it), "
                                                f"not Inductor", skipped=True)
    cxx = _cxx()
    if cxx is None:
        return Check("compile inductor", False, "not checked: no C++ compiler (g++, c++ or "
                                                "clang++ on PATH, or $CXX): Inductor's CPU "
                                                "backend needs one", skipped=True)
    from torch._inductor.utils import run_and_get_code

    try:
        with _fresh():
            compiled = torch.compile(target.module, backend="inductor", fullgraph=True)
            (out, codes), fired = counted(lambda: run_and_get_code(
                lambda: target.result(call_with(compiled, target.inputs(1)))))
    except Exception as exc:  # noqa: BLE001 - a compile failure is the finding
        err_off = _inductor_off(target, set_switch)
        if err_off is not None:
            return Check("compile inductor", False, f"not checked: the model does not compile "
                                                    f"with Inductor even with the switch off "
                                                    f"({err_off})", skipped=True)
        sid = failing_site(exc, plan)
        return Check("compile inductor", False, f"compiles with the switch off, fails with it on"
                     + (f" at site {sid}" if sid else "") + f": {_first_line(exc)}")
    close, detail = _close(off, out)
    problems = [p for code in codes for p in hoisted_joins(code)] if form == "side_stream" else []
    ok = close and fired == want and not problems
    text = (f"fullgraph=True ({cxx}); outputs vs eager with the switch off: {detail}; the "
            f"compiled run issued {fired}/{want} prefetch(es)")
    if problems:
        text += ("; call form side_stream: " + "; ".join(problems[:2]) + ": Inductor hoists "
                 "the join right after the prefetch, which then blocks the compute stream. This "
                 "form is refused under Inductor: use `call: direct` (the eager default) or "
                 "another backend")
    return Check("compile inductor", ok, text)


def _inductor_off(target: Target, set_switch: Callable[[bool], None]) -> str | None:
    """The error of the same Inductor compile with the switch off (None: it compiles)."""
    import torch

    set_switch(False)
    try:
        with _fresh():
            call_with(torch.compile(target.module, backend="inductor", fullgraph=True),
                      target.inputs(1))
        return None
    except Exception as exc:  # noqa: BLE001 - the model's own compile problem, reported
        return _first_line(exc)
    finally:
        set_switch(True)


def _close(a, b) -> tuple[bool, str]:
    """Outputs equal within float tolerance (Inductor fuses and reorders reductions)."""
    import torch

    def flat(x):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, dict) or hasattr(x, "items"):
            for v in x.values():
                yield from flat(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from flat(v)

    fa, fb = list(flat(a)), list(flat(b))
    if len(fa) != len(fb) or not fa:
        return False, "the outputs have different structure"
    for x, y in zip(fa, fb):
        if x.shape != y.shape or not torch.allclose(x.float(), y.float(), rtol=1e-3, atol=1e-4):
            return False, "outputs differ beyond rtol 1e-3 / atol 1e-4"
    return True, f"{len(fa)} tensor(s) within rtol 1e-3 / atol 1e-4"


def _compile_check(backend: str, ok: bool, detail: str, skipped: bool = False) -> Check:
    if backend == "eager":
        return Check("compile eager", ok, detail, skipped=skipped)
    return Check("compile aot_eager", ok, detail, skipped=skipped)


def _site_checks(captured: dict[str, Captured | None], plan: Plan, exp: Expected) -> list[Check]:
    per_site: dict[str, list[str]] = {s.id: [] for s in plan.sites}
    bad: dict[str, bool] = {s.id: False for s in plan.sites}
    skipped = {s.id: True for s in plan.sites}
    extra: list[str] = []
    for backend in BACKENDS:
        cap = captured.get(backend)
        if cap is None:
            continue
        if not cap.tensor_of:
            for s in plan.sites:
                per_site[s.id].append(f"{backend}: graph inputs not mapped to tensors")
            continue
        count, problems, ops, unplanned = _site_nodes(cap, plan, exp)
        if unplanned:
            extra.append(f"{backend}: {unplanned} prefetch node(s) with a weight no site plans")
        for s in plan.sites:
            skipped[s.id] = False
            want = exp.wanted(s.id)
            ok = want > 0 and count[s.id] == want and not problems[s.id]
            bad[s.id] |= not ok
            text = f"{backend}: {count[s.id]}/{want} node(s)"
            if ops[s.id]:
                text += f" of {', '.join(sorted(ops[s.id]))}"
            text += "; " + "; ".join(problems[s.id][:2]) if problems[s.id] else \
                (", after the dependency, before the target" if ok else "")
            if count[s.id] == 0 and s.guard is not None:
                text += (f" (the decode guard {s.guard.expr}.shape[{s.guard.dim}] <= "
                         f"{s.guard.max_len} was false for the factory's inputs?)")
            per_site[s.id].append(text)
    out = [Check("captured prefetch", not bad[s.id] and not skipped[s.id],
                 "; ".join(per_site[s.id]) or "not checked: nothing compiled", s.id,
                 skipped=skipped[s.id]) for s in plan.sites]
    if extra:
        out.append(Check("captured prefetch", False, "; ".join(extra)))
    return out


def _recompiles(target: Target, compiled, rec: Recorder, counted: Callable, want: int,
                set_switch: Callable[[bool], None]) -> Check:
    """Called after the first compiled call at batch x1: calls x8 and x256."""
    counts = [rec.compiles]
    fired = [counted(lambda: call_with(compiled, target.inputs(1)))[1]]
    for k in DECODE_BATCHES[1:]:
        fired.append(counted(lambda: call_with(compiled, target.inputs(k)))[1])
        counts.append(rec.compiles)
    sizes = ", ".join(f"x{k}" for k in DECODE_BATCHES)
    detail = (f"decode batches {sizes} of the factory's: compiled graphs after each "
              f"{counts}, prefetches per forward {fired} (want {want})")
    late = counts[-1] != counts[-2]
    ok = not late and all(f == want for f in fired)
    if late:
        err, n_off = _compiles_off(target, set_switch, "eager", DECODE_BATCHES)
        if err is None and n_off >= counts[-1]:
            return Check("recompiles", False, detail + f"; the switch-off model compiles {n_off} "
                                                       f"time(s) too: not checked", skipped=True)
        detail += f"; with the switch off: {n_off} compile(s)"
    return Check("recompiles", ok, detail)
