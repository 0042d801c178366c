"""The module structure of the loaded classes, read from their `__init__`: which class each
`self.x = ...` may hold (module lists, local lists appended to, conditional constructors), methods
bound to attributes, the arguments each class is instantiated with, and the names the classes
need but do not define (so load_model_source follows the imports that define them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from ..pysource import dotted
from .evaluate.syntax import assign_value, callee_name
from .init_body import init_statements

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource


def wanted_names(ms: "ModelSource") -> set[str]:
    """Names the loaded classes need but do not define: base classes and submodule
    constructors (`class FFN(MoE)`, `self.experts = FusedMoEGMM(...)`)."""
    out: set[str] = set()
    for _, info in ms.classes.values():
        out |= {b.split(".")[-1] for b in info.bases}
        init = info.methods.get("__init__")
        for st in init.stmts if init else []:
            av = assign_value(st) or _layer_stack(ms, init, st)
            if av is not None:
                out |= {callee_name(c) for c, _ in module_calls(av[1])}
    return out - set(ms.classes)


def scan_structure(ms: ModelSource) -> None:
    """Submodules (every class a `self.x = ...` may hold), module lists, methods bound to
    attributes, and the argument lists each class is instantiated with."""
    for cname in ms.classes:
        # a class without its own `__init__` runs its base's, with its own overrides of the
        # helpers that `__init__` calls (vLLM's minicpm3 decoder layer: minicpm.py's `__init__`
        # calls `self._init_attn_block()`, which minicpm3.py overrides)
        init = ms.method(cname, "__init__")
        if init is None:
            continue
        body = init_statements(ms, cname)
        local_lists = _local_appends(body)
        class_params = class_defaults(init)
        for s in body:
            appended = _list_append(s)
            stack = _layer_stack(ms, init, s)
            av = assign_value(s) or appended or stack
            if av is None:
                continue
            attr, value = av
            if stack is not None:      # the factory's return value is one element of the list
                appended = stack
                ms.built_stacks.add((cname, attr))
            d = dotted(value) or ""
            if d.startswith("self.") and d.count(".") == 1 and ms.method(cname, d[5:]):
                ms.method_aliases.setdefault((cname, attr), []).append(d[5:])
                continue
            for call, in_list in module_calls(value, local_lists):
                for child in class_params.get(callee_name(call), [callee_name(call)]):
                    if child not in ms.classes:
                        continue
                    ms.children.setdefault((cname, attr), child)
                    alts = ms.alternatives.setdefault((cname, attr), [])
                    if child not in alts:
                        alts.append(child)
                    if in_list or appended is not None:
                        ms.list_children.add((cname, attr))
                    ms.ctor_args.setdefault(child, (list(call.args), cname))
                    ms.ctor_sites.setdefault((cname, attr, child), (list(call.args), cname))
    _handed_lists(ms)


def _handed_lists(ms: ModelSource) -> None:
    """A module list handed in through the constructor is the list it was built as: vLLM's
    gemma3n builds `self.layers = make_layers(...)` and hands slices of it on
    (`Gemma3nSelfDecoder(decoder_layers=self.layers[:k])`, whose `__init__` keeps
    `self.decoder_layers = decoder_layers` and whose forward runs them), so `decoder_layers`
    holds the stack's class, as `layers` does. Repeated until nothing changes (a list handed
    on twice)."""
    from .evaluate.env import bind_args

    changed = True
    while changed:
        changed = False
        for (parent, _attr, child), (args, _p) in list(ms.ctor_sites.items()):
            init = ms.method(child, "__init__")
            if init is None:
                continue
            bound = dict(bind_args(args, [p for p in init.params if p != "self"]))
            for s in init_statements(ms, child):
                av = assign_value(s)
                if av is None or not isinstance(av[1], cst.Name) or av[1].value not in bound:
                    continue
                given = bound[av[1].value].value
                if isinstance(given, cst.Subscript):       # a slice of it: `self.layers[:k]`
                    given = given.value
                d = dotted(given) or ""
                if not (d.startswith("self.") and d.count(".") == 1
                        and (parent, d[5:]) in ms.list_children):
                    continue
                key = (child, av[0])
                if key in ms.list_children:
                    continue
                ms.children.setdefault(key, ms.children[(parent, d[5:])])
                ms.alternatives.setdefault(key, list(ms.alternatives.get((parent, d[5:]), [])))
                ms.list_children.add(key)
                changed = True


def _layer_stack(ms: ModelSource, init, s) -> tuple[str, cst.BaseExpression] | None:
    """`self.start, self.end, self.layers = make_layers(n, layer_fn, prefix)` (a layer-list
    call of configs/serving_layers.yaml `layer_list_calls`, its result's last element assigned
    to `self.X`) -> (X, what the factory returns): a lambda's body, or the `return` value of a
    function of that name defined in `__init__` (vLLM's `def get_layer(prefix): return
    Layer(...)`). None for any other statement."""
    node = s.node
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1
            and isinstance(node.body[0], cst.Assign) and len(node.body[0].targets) == 1):
        return None
    target, value = node.body[0].targets[0].target, node.body[0].value
    if isinstance(target, cst.Tuple) and target.elements:
        target = target.elements[-1].value
    d = dotted(target) if isinstance(target, cst.Attribute) else None
    if not (d and d.startswith("self.") and d.count(".") == 1 and isinstance(value, cst.Call)):
        return None
    spec = (ms.serving.layer_list_calls or {}).get(callee_name(value))
    if spec is None:
        return None
    pos = [a for a in value.args if a.keyword is None and not a.star]
    factory = next((a.value for a in value.args if a.keyword and a.keyword.value == spec[0]),
                   pos[spec[1]].value if len(pos) > spec[1] else None)
    if isinstance(factory, cst.Lambda):
        return d[5:], factory.body
    if isinstance(factory, cst.Name) and init.node is not None:
        for fn in _walk(init.node.body):
            if isinstance(fn, cst.FunctionDef) and fn.name.value == factory.value:
                rets = [r.value for r in _walk(fn.body)
                        if isinstance(r, cst.Return) and r.value is not None]
                if len(rets) == 1:
                    return d[5:], rets[0]
    return None


def class_defaults(init) -> dict[str, list[str]]:
    """Names that hold a class the layer instantiates: a parameter's default (vLLM's
    `attn_layer_type: type[nn.Module] = LlamaAttention`, then `attn_layer_type(...)`) and a local
    assigned a class in branches (`attn_cls = DeepseekAttention` / `= DeepseekV2MLAAttention`) or
    picked from a dict of classes (`layer_class = layer_classes[key]`): every class it may hold."""
    fn = init.node
    if fn is None:
        return {}
    out: dict[str, list[str]] = {}
    for p in (*fn.params.params, *fn.params.kwonly_params):
        if isinstance(p.default, cst.Name) and p.default.value[:1].isupper():
            out.setdefault(p.name.value, []).append(p.default.value)
    for node in _walk(fn.body):
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0].target, cst.Name)):
            continue
        v = node.value
        if isinstance(v, cst.Name) and v.value[:1].isupper():
            names = [v.value]
        elif isinstance(v, cst.Dict):
            # a mapping of classes (`layer_classes = {(True, False): SlidingLayer, ...}`)
            names = [e.value.value for e in v.elements if isinstance(e, cst.DictElement)
                     and isinstance(e.value, cst.Name) and e.value.value[:1].isupper()]
        elif isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name):
            names = list(out.get(v.value.value, ()))   # one picked from it: `layer_classes[k]`
        else:
            continue
        alts = out.setdefault(node.targets[0].target.value, [])
        for n in names:
            if n not in alts:
                alts.append(n)
    return out


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _local_appends(stmts) -> dict[str, list[cst.BaseExpression]]:
    """`mlps.append(MLP(...))` in __init__: what a local list later wrapped in a ModuleList
    holds (`self.mlps = nn.ModuleList(mlps)`)."""
    out: dict[str, list[cst.BaseExpression]] = {}
    for s in stmts:
        node = s.node
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and \
                isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
            call = node.body[0].value
            d = (dotted(call.func) or "").split(".")
            if len(d) == 2 and d[1] == "append" and d[0] != "self" and call.args:
                out.setdefault(d[0], []).append(call.args[0].value)
    return out


def _list_append(s) -> tuple[str, cst.BaseExpression] | None:
    """`self.layers.append(Layer(...))` -> ("layers", Layer(...))."""
    node = s.node
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1 or \
            not isinstance(node.body[0], cst.Expr) or not isinstance(node.body[0].value, cst.Call):
        return None
    call = node.body[0].value
    d = dotted(call.func) or ""
    parts = d.split(".")
    if len(parts) == 3 and parts[0] == "self" and parts[2] == "append" and call.args:
        return parts[1], call.args[0].value
    return None


def module_calls(value: cst.BaseExpression, local_lists=None) -> Iterator[tuple[cst.Call, bool]]:
    if isinstance(value, cst.Call):
        name = callee_name(value)
        if name in ("ModuleList", "Sequential", "ModuleDict") and value.args:
            inner = value.args[0].value
            elts: list[cst.BaseExpression] = []
            if isinstance(inner, cst.Name) and local_lists and inner.value in local_lists:
                elts = list(local_lists[inner.value])
            elif isinstance(inner, (cst.ListComp, cst.GeneratorExp)):
                elts = [inner.elt]
            elif isinstance(inner, cst.DictComp):
                elts = [inner.value]
            elif isinstance(inner, (cst.List, cst.Tuple)):
                elts = [el.value for el in inner.elements]
            elif isinstance(inner, cst.Dict):
                elts = [el.value for el in inner.elements if isinstance(el, cst.DictElement)]
            for el in elts:
                for call, _ in module_calls(el):
                    yield call, True
            return
        yield value, False
    elif isinstance(value, cst.IfExp):
        yield from module_calls(value.body)
        yield from module_calls(value.orelse)
