"""The checks themselves (torch is imported by the caller; nothing here imports torch_npu).

- outputs_equal: switch off vs on, bit for bit (a prefetch is a cache hint: nothing may change).
- check_calls: each planned site fired, with the planned weight tensor (by identity), a
  dependency tensor (never None), the planned size, no offset argument, in one order in every
  layer (the plan's site order is a ranking, not an execution order).
- graph_order: one layer captured with make_fx (every prefetch is a registered op with a side
  effect, verify/graph.py names them); each prefetch node must follow its dependency, precede the
  first node that reads its weight (the target's matmul), and its dependency must be an ancestor
  of that matmul. The torch.compile checks are in capture.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..plan import Plan, Site, grammar
from ..contract.plan import decode_guard_text
from .graph import is_prefetch, order_problem
from .runs import Run, Runs, judge, steps


def call_with(fn, inputs):
    """Call `fn` the way the model's example inputs are given: keywords, positionals or one."""
    if isinstance(inputs, dict):
        return fn(**inputs)
    if isinstance(inputs, (tuple, list)):
        return fn(*inputs)
    return fn(inputs)


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""
    site: str | None = None
    skipped: bool = False     # could not be checked here (said why in detail); not a failure

    def to_json(self) -> dict:
        return {"name": self.name, "site": self.site, "passed": self.passed,
                "skipped": self.skipped, "detail": self.detail}


def failing_site(exc: BaseException, plan: Plan) -> str | None:
    """The plan's site whose inserted line raised `exc`: the innermost frame of its traceback on
    a line the tool wrote for one of the plan's sites (`# cannbot-prefetch: <site id>`)."""
    import linecache
    import traceback

    from ..rewrite.markers import MARKER

    ids = {s.id for s in plan.sites}
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        line = linecache.getline(fr.filename, fr.lineno or 0).rstrip()
        if MARKER in line and line.rsplit(MARKER, 1)[1] in ids:
            return line.rsplit(MARKER, 1)[1]
    return None


def failed_run(exc: BaseException, plan: Plan) -> Check:
    """The switch-on run raised: a failed check naming the site whose line raised (not an
    internal error of the tool; the other checks need that run and are not made)."""
    sid = failing_site(exc, plan)
    first = (str(exc).splitlines() or [""])[0][:300]
    where = f"site {sid}'s prefetch raised" if sid else "the model raised (on no prefetch line)"
    return Check("switch on: runs", False, f"{where}: {type(exc).__name__}: {first}", sid)


@dataclass
class Expected:
    """Planned weight tensors: id(tensor) -> (site id, owner module name); `per_site`: how many
    modules hold each site's weight; `holders`: id(tensor) -> the modules holding it (whose
    runs `runs.counting` records into `runs` during the switch-on forward)."""

    by_tensor: dict[int, tuple[str, str]] = field(default_factory=dict)
    tensors: dict[int, Any] = field(default_factory=dict)
    per_site: dict[str, int] = field(default_factory=dict)
    holders: dict[int, list] = field(default_factory=dict)
    runs: Runs | None = None

    def all_holders(self) -> list:
        return [h for hs in self.holders.values() for h in hs]

    def runs_of(self, tid: int) -> list[Run]:
        return self.runs.of_all(self.holders.get(tid, ())) if self.runs is not None else []

    def want_of(self, tid: int) -> int:
        """Prefetches of one weight a forward must issue: one per step its modules ran in
        (runs.py), one when they never ran or runs were not counted."""
        return len(steps(self.runs_of(tid))) or 1

    def wanted(self, sid: str) -> int:
        """Prefetches of site `sid` one forward must issue (`want_of` over its weights)."""
        return sum(self.want_of(t) for t, (s, _) in self.by_tensor.items() if s == sid)


def _layer_index(name: str) -> int:
    m = re.search(r"(?:^|\.)layers\.(\d+)(?:\.|$)", name)
    return int(m.group(1)) if m else -1


def _path_of(module, weight_expr: str) -> list | None:
    """The objects `self.a.b.weight` names on `module`, one per step, by getattr one attribute
    at a time (never eval: a plan is data; `[i]` indexes a module list, as longcat_flash's
    `self.self_attn[0]`, by `grammar.access_steps`); None when a step is absent or None, or the
    path is not a plain `self.<attr>...` path (no dunders)."""
    steps = grammar.access_steps(weight_expr)
    if not steps or len(steps) < 2 or steps[0] != "self" or any(
            isinstance(p, str) and p.startswith("__") for p in steps[1:]):
        return None
    objs, obj = [module], module
    for step in steps[1:]:
        try:
            obj = obj[step] if isinstance(step, int) else getattr(obj, step, None)
        except Exception:  # a failing property, an index out of range: the weight is not there
            return None
        if obj is None:
            return None
        objs.append(obj)
    return objs


def weight_of(module, weight_expr: str):
    """The tensor `self.a.b.weight` names on `module` (`_path_of`); None if it is not there."""
    path = _path_of(module, weight_expr)
    return path[-1] if path else None


def _holder(path: list):
    """The module that holds the weight at the end of `path`: the last module before it (the
    linear of `.weight`, the experts of `.w13_weight`)."""
    import torch

    return next(o for o in reversed(path[:-1]) if isinstance(o, torch.nn.Module))


def runs_insert(module, insert) -> bool:
    """Whether `module` runs the method the site was written into: its class, or the base class
    its method comes from when it has none of its own (vLLM's MiniCPM3DecoderLayer runs
    minicpm.py's MiniCPMDecoderLayer.forward, where the site is)."""
    owner = next((c for c in type(module).__mro__ if insert.method in vars(c)), type(module))
    return owner.__name__ == insert.cls


def site_weight(module, target):
    """The weight a site prefetches on `module`: the first of its paths the module holds
    (`weight_expr`, then `alt_weight_exprs`, as the rewritten code tries them); None if none."""
    found = site_weight_holder(module, target)
    return found[0] if found else None


def site_weight_holder(module, target):
    """(weight, the module holding it) for `site_weight`; None if the module holds none."""
    for expr in (target.weight_expr, *target.alt_weight_exprs):
        path = _path_of(module, expr)
        if path:
            return path[-1], _holder(path)
    return None


def expected_weights(model, plan: Plan) -> Expected:
    exp = Expected()
    for site in plan.sites:
        exp.per_site[site.id] = 0
        for name, mod in model.named_modules():
            if not runs_insert(mod, site.insert):
                continue
            found = site_weight_holder(mod, site.target)
            if found is None:  # absent / None module (conditional, last layer): not expected
                continue
            weight, holder = found
            exp.by_tensor[id(weight)] = (site.id, name)
            exp.tensors[id(weight)] = weight
            held = exp.holders.setdefault(id(weight), [])
            if all(h is not holder for h in held):
                held.append(holder)
            exp.per_site[site.id] += 1
    return exp


def outputs_equal(a, b) -> tuple[bool, str]:
    import torch

    def flat(x, path="out"):
        if isinstance(x, torch.Tensor):
            yield path, x
        elif isinstance(x, dict) or hasattr(x, "items"):
            for k, v in x.items():
                yield from flat(v, f"{path}.{k}")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                yield from flat(v, f"{path}[{i}]")

    fa, fb = list(flat(a)), list(flat(b))
    if [p for p, _ in fa] != [p for p, _ in fb]:
        return False, "the outputs have different structure"
    if not fa:
        return False, "the model returned no tensors"
    for (p, x), (_, y) in zip(fa, fb):
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
            diff = (x.float() - y.float()).abs().max().item() if x.shape == y.shape else "shape"
            return False, f"{p} differs (max abs diff {diff})"
    return True, f"{len(fa)} tensor(s) bit-identical"


def check_calls(plan: Plan, exp: Expected, calls) -> list[Check]:
    """`fires` per site: every weight prefetched once per step its module runs in (runs.py;
    once per module when runs were not counted), each before that step's first run, with the
    planned size, a dependency and no offset; then `layer order` and `unplanned calls`."""
    out: list[Check] = []
    fired: dict[str, int] = {s.id: 0 for s in plan.sites}
    fired_at: dict[int, list[int]] = {}
    unknown = 0
    seq: list[tuple[int, str]] = []
    bad: dict[str, list[str]] = {s.id: [] for s in plan.sites}
    sites = {s.id: s for s in plan.sites}
    for k, c in enumerate(calls):
        hit = exp.by_tensor.get(id(c.weight))
        if hit is None:
            unknown += 1
            continue
        sid, owner = hit
        fired[sid] += 1
        fired_at.setdefault(id(c.weight), []).append(k)
        seq.append((_layer_index(owner), sid))
        s: Site = sites[sid]
        if c.dependency is None:
            bad[sid].append("dependency is None")
        if c.max_size != s.max_size:
            bad[sid].append(f"size {c.max_size} != planned {s.max_size}")
        if c.offset is not None or c.nargs != 3:
            bad[sid].append(f"offset argument passed ({c.offset!r})")
    steps_wrong: dict[str, list[str]] = {s.id: [] for s in plan.sites}
    ran: dict[str, tuple[int, int]] = {s.id: (0, 0) for s in plan.sites}   # (runs, steps)
    for tid, (sid, owner) in exp.by_tensor.items():
        runs = exp.runs_of(tid)
        want, problem = judge(runs, fired_at.get(tid, []))
        if runs:
            r, n = ran[sid]
            ran[sid] = (r + len(runs), n + want)
        if problem and fired_at.get(tid):
            steps_wrong[sid].append(f"{owner}: {problem}")
    for s in plan.sites:
        want = exp.wanted(s.id)
        ok = want > 0 and fired[s.id] == want and not bad[s.id] and not steps_wrong[s.id]
        detail = f"fired {fired[s.id]}/{want} with the planned weight, size {s.max_size}"
        runs, n_steps = ran[s.id]
        if runs and runs != exp.per_site[s.id]:
            detail += (f"; its {exp.per_site[s.id]} module(s) ran {runs} time(s) in {n_steps} "
                       f"step(s), one prefetch per step")
        if exp.per_site[s.id] == 0:
            detail = f"no module of {s.insert.cls} holds {s.target.weight_expr}"
        if bad[s.id]:
            detail += "; " + "; ".join(sorted(set(bad[s.id])))
        if steps_wrong[s.id]:
            detail += "; " + "; ".join(steps_wrong[s.id][:2])
        if want and not fired[s.id] and (s.guard is not None or s.max_tokens is not None):
            detail += (f" (the site only fires while {decode_guard_text(s)}: give the factory "
                       f"decode-shaped inputs)")
        out.append(Check("fires", ok, detail, s.id))
    # one order in every layer. The plan's site order is a ranking by expected gain, not an
    # execution order (CONTRACTS "Plan" gives none; seed: a prefetch after its dependency, before
    # its target, which `graph order` checks): sites must only fire in the same relative order
    # in each layer where they both fire, so no layer skips ahead or reorders its calls.
    by_layer: dict[int, list[str]] = {}
    for layer, sid in seq:
        ids = by_layer.setdefault(layer, [])
        if sid not in ids:
            ids.append(sid)
    first: dict[tuple[str, str], int] = {}
    clash: set[int] = set()
    for layer, ids in sorted(by_layer.items()):
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if (b, a) in first:
                    clash.update((layer, first[(b, a)]))
                first.setdefault((a, b), layer)
    out.append(Check("layer order", not clash,
                     "sites fired in one order in every layer" if not clash else
                     f"sites fired in different orders in layer(s) {sorted(clash)}"))
    if unknown:
        out.append(Check("unplanned calls", False, f"{unknown} npu_prefetch call(s) with a weight "
                                                   f"no site plans (a wrong weight expression?)"))
    return out


# ---------------------------------------------------------------- graph order

def pick_layer(model, plan: Plan):
    """(name, module): the outermost module whose class receives a prefetch (a decoder layer)."""
    classes = {s.insert.cls for s in plan.sites}
    mods = list(model.named_modules())
    best = None
    for name, mod in mods:
        if re.search(r"(?:^|\.)layers\.\d+$", name):
            inside = {type(m).__name__ for n, m in mods if n == name or n.startswith(name + ".")}
            score = len(classes & inside)
            if score and (best is None or score > best[0]):
                best = (score, name, mod)
    if best is not None:
        return best[1], best[2]
    found = [(n.count("."), k, n, m) for k, (n, m) in enumerate(model.named_modules())
             if type(m).__name__ in classes]
    if not found:
        return None, None
    _, _, name, mod = min(found)
    return name, mod


def layers_to_capture(model, plan: Plan):
    """(name, module) to capture for the graph-order check, best first: `pick_layer`'s, then
    the outermost module of each class that receives a prefetch, within it first. A layer the
    model runs through another method (vLLM's alice_ai: `layer.forward_attn_res(...)`, never
    `layer(...)`) is never called, so no input is captured for it; a module inside it that is
    called (its MLP block) is captured instead, and the sites outside that module are said
    unchecked."""
    first = pick_layer(model, plan)
    if first[1] is None:
        return []
    out = [first]
    classes = {s.insert.cls for s in plan.sites}
    found = sorted(((not (n == first[0] or n.startswith(first[0] + ".")), n.count("."), k, n, m)
                    for k, (n, m) in enumerate(model.named_modules())
                    if type(m).__name__ in classes and m is not first[1]))
    seen = {type(first[1]).__name__}
    for *_, n, m in found:
        if type(m).__name__ not in seen:
            seen.add(type(m).__name__)
            out.append((n, m))
    return out


def capture_inputs(layer, run):
    """Run the model once and keep the (args, kwargs) of the layer's first call, copied as they
    were before the call: a KV cache among them is grown by the call itself, and replaying the
    layer on the grown cache would not be the call that was captured."""
    import copy

    seen = {}

    def hook(mod, args, kwargs):
        if "call" in seen:
            return
        try:
            seen["call"] = copy.deepcopy((args, dict(kwargs)))
        except Exception:  # noqa: BLE001 - an argument that cannot be copied: keep references
            seen["call"] = (args, dict(kwargs))

    h = layer.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        run()
    finally:
        h.remove()
    return seen.get("call")


def graph_order(model, layer_name: str, layer, call, plan: Plan, rec) -> list[Check]:
    """Capture one layer (`call` = its (args, kwargs)) with make_fx, every parameter of the model
    a graph input, and check each prefetch node."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils.stateless import _reparametrize_module

    params = dict(model.named_parameters(remove_duplicate=False))
    params.update(dict(model.named_buffers(remove_duplicate=False)))
    names = list(params)
    args, kwargs = call

    def f(p, a, k):
        with _reparametrize_module(model, p, strict=False):
            return layer(*a, **k)

    try:
        gm = make_fx(f, tracing_mode="real")(params, args, kwargs)
    except Exception as exc:  # a layer make_fx cannot trace: say so, do not guess
        first = str(exc).splitlines()[0] if str(exc) else ""
        return [Check("graph order", False, f"not checked: make_fx could not capture {layer_name} "
                                            f"({type(exc).__name__}: {first[:160]})", skipped=True)]
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    placeholders = [n for n in nodes if n.op == "placeholder"]
    param_of = {placeholders[i]: names[i] for i in range(min(len(names), len(placeholders)))}
    exp_by_name: dict[str, str] = {}
    for s in plan.sites:
        for name, mod in model.named_modules():
            if not runs_insert(mod, s.insert):
                continue
            w = site_weight(mod, s.target)
            if w is None:
                continue
            for pname, p in model.named_parameters(remove_duplicate=False):
                if p is w:
                    exp_by_name[pname] = s.id
    checks: list[Check] = []
    sites_by_id = {s.id: s for s in plan.sites}
    count: dict[str, int] = {}
    problems: dict[str, list[str]] = {}
    for n in nodes:
        if not is_prefetch(n):
            continue
        w = n.args[0]
        pname = param_of.get(w)
        sid = exp_by_name.get(pname or "", None)
        if sid is None:
            checks.append(Check("graph order", False, f"prefetch of {pname or w} is not planned"))
            continue
        count[sid] = count.get(sid, 0) + 1
        bad = order_problem(n, nodes, index, pname,
                            sites_by_id[sid].target.scope == "next_layer")
        if bad:
            problems.setdefault(sid, []).append(bad)
    for s in plan.sites:
        if s.id not in count:
            # a layer whose module of the insert class holds no target weight (ernie45_vl_moe's
            # first layer: a dense MLP, no MoE gate) expects no prefetch there (expected_weights)
            inside = any((n == layer_name or n.startswith(layer_name + "."))
                         and site_weight(m, s.target) is not None
                         for n, m in model.named_modules() if runs_insert(m, s.insert))
            checks.append(Check("graph order", False,
                                f"no prefetch node in the captured {layer_name}" if inside else
                                f"not checked: no {s.insert.cls} inside {layer_name} holds the "
                                f"target", s.id, skipped=not inside))
            continue
        probs = problems.get(s.id, [])
        checks.append(Check("graph order", not probs,
                            f"{count[s.id]} node(s) after the dependency, before the target"
                            if not probs else "; ".join(probs[:3]), s.id))
    return checks
