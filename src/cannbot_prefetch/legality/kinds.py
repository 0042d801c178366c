"""Is what a dependency names a tensor? `npu_prefetch` takes one (`Tensor? dependency`); a model
output object (`BaseModelOutputWithPast`, a dataclass, a tuple, a dict) raises at run time with
the switch on, and only then (issue 30: the `lm_head` site after `outputs = self.model(...)`).

Read statically from the method that receives the call, no torch: the name's annotation (a
parameter's, an annotated assignment's), else the value that defines it (a literal tuple / dict /
list, a class constructed, a submodule call whose forward is annotated to return something that
is not a tensor). What is not known either way (a parameter without annotation, a function's
result) passes here; `verify` runs the model and names a site that still fails.
`tensor_field` finds the tensor the method itself reads out of such an object next
(`hidden_states = outputs.last_hidden_state`), which mapping offers as the dependency instead.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from ..pysource import ClassInfo, Method, SourceView, dotted

_CONTAINER = re.compile(r"^(?:typing\.)?(?:tuple|Tuple|list|List|dict|Dict|Mapping|Sequence)\b")
_TENSOR = re.compile(r"Tensor\b")
_CODE = cst.Module([])


def annotation_kind(text: str) -> str:
    """'tensor' when the annotation names a tensor (`torch.Tensor`, `Optional[torch.FloatTensor]`,
    `torch.Tensor | None`), else 'other' (`tuple[torch.Tensor, ...]`, `Cache`, a ModelOutput)."""
    text = text.strip().strip("'\"")
    if _CONTAINER.match(text) or not _TENSOR.search(text):
        return "other"
    return "tensor"


def _ann(node) -> str:
    return _CODE.code_for_node(node.annotation)


def _forward_returns(view: SourceView, cls: str) -> str | None:
    """The return annotation of `cls.forward` (through the file's base classes), if any; read
    from the whole file's stdlib tree (libcst parsed only the classes a plan touches)."""
    tops = {n.name: n for n in view.module.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    while cls in tops and cls not in seen:
        seen.add(cls)
        node = tops[cls]
        fwd = next((f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and f.name == "forward"), None)
        if fwd is not None:
            return ast.unparse(fwd.returns) if fwd.returns is not None else _returned(fwd)
        cls = next((b for b in (ast.unparse(x).split(".")[-1] for x in node.bases) if b in tops), "")
    return None


def _returned(fwd: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """What an unannotated `forward` returns when every one of its own `return` statements
    says so: 'tuple' when each returns a tuple display (`return context, probs`; RoFormer's
    self-attention), else None (unknown: a name, a call, a tensor expression)."""
    rets, todo = [], list(fwd.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue                                  # a nested function's returns are its own
        if isinstance(node, ast.Return):
            rets.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    if rets and all(isinstance(v, ast.Tuple) for v in rets):
        return "tuple"
    return None


def value_problem(view: SourceView, icls: ClassInfo, value: cst.BaseExpression) -> str | None:
    """Why `value`, assigned in a method of `icls`, is not a tensor (a literal container, an
    object constructed, a submodule whose forward returns a tuple); None when nothing says so."""
    if isinstance(value, (cst.Tuple, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp)):
        return f"a {type(value).__name__.lower()} literal"
    if not isinstance(value, cst.Call):
        return None
    name = dotted(value.func) or ""
    if name.startswith("self.") and name.count(".") == 1:
        for ctor in (view.module_attrs.get(icls.name) or {}).get(name[5:], []):
            ret = _forward_returns(view, ctor.split(".")[-1])
            if ret is not None and annotation_kind(ret) == "other":
                return f"what {name} returns ({ctor}.forward -> {ret})"
        return None
    last = name.split(".")[-1]
    if last in view.class_bases or (last[:1].isupper() and last not in ("Tensor",) and "." not in name):
        return f"an object built by {name}(...)"
    return None


def not_a_tensor(view: SourceView, icls: ClassInfo, method: Method, point: int,
                 name: str) -> str | None:
    """Why the local `name`, as it stands at statement `point` of `method`, is not a tensor;
    None when it is one or nothing says otherwise."""
    idx = max((i for i in range(min(point, len(method.stmts))) if name in method.stmts[i].defs),
              default=None)
    if idx is None:
        for p in method.node.params.params:
            if p.name.value == name and p.annotation is not None:
                ann = _ann(p.annotation)
                if annotation_kind(ann) == "other":
                    return f"parameter '{name}' is annotated {ann}"
        return None
    node = method.stmts[idx].node
    if not isinstance(node, cst.SimpleStatementLine):
        return None
    for small in node.body:
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                and small.target.value == name:
            ann = _ann(small.annotation)
            if annotation_kind(ann) == "other":
                return f"'{name}' is annotated {ann} (line {method.stmts[idx].start})"
            return None
        if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
            why = value_problem(view, icls, small.value)
            if why:
                return f"'{name}' is {why} (line {method.stmts[idx].start})"
    return None


def tensor_field(method: Method, start: int, name: str) -> str | None:
    """`name.field` when a statement from `start` on reads a field of `name` into a local
    (`hidden_states = outputs.last_hidden_state`): what the method itself takes as its tensor."""
    for st in method.stmts[start:]:
        node = st.node
        if not isinstance(node, cst.SimpleStatementLine):
            continue
        for small in node.body:
            value = getattr(small, "value", None)
            if isinstance(small, (cst.Assign, cst.AnnAssign)) and isinstance(value, cst.Attribute) \
                    and isinstance(value.value, cst.Name) and value.value.value == name:
                return f"{name}.{value.attr.value}"
        if name in st.defs:
            return None
    return None
