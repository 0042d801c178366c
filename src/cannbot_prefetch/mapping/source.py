"""The model source as mapping sees it: classes, linear-like attributes with evaluated shapes
(evaluate.py), submodules (`self.mlp = LlamaMLP(config)`, `self.layers = nn.ModuleList([...])`)
and the constructor arguments each class is instantiated with. The call order of a forward pass
is flatten.py.

Parsing reuses the rewriter's `SourceView` (one libcst parse, statements with defs/uses/calls),
so mapping and apply agree on what a statement is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import libcst as cst

from ..errors import InputError, SourceError
from ..pysource import ClassInfo, Method, SourceView, parse_view
from .evaluate import LinearAttr, _assign_value, _callee_name, scan_linears

__all__ = ["Event", "Hop", "LinearAttr", "ModelSource", "load_config", "load_model_source",
           "source_files"]

@dataclass(frozen=True)
class Hop:
    cls: str
    method: str
    stmt: int                    # index into Method.stmts
    call: str                    # dotted callee as written, e.g. self.mlp / decoder_layer / F.silu
    line: int


@dataclass(frozen=True)
class Event:
    path: tuple[Hop, ...]        # outermost first; the last hop is this call
    kind: str                    # linear | norm | act | module | func
    owner: str                   # class that owns the called attribute (for self.X calls)
    attr: str                    # X of self.X ('' for functions)
    child: str = ""              # class of the called submodule, when known

    @property
    def leaf(self) -> Hop:
        return self.path[-1]


@dataclass
class ModelSource:
    files: dict[str, SourceView]
    classes: dict[str, tuple[str, ClassInfo]]     # name -> (file, info)
    config: dict[str, Any]
    config_path: str
    tp: int = 1
    moe_tp: int = 1
    linears: dict[tuple[str, str], LinearAttr] = field(default_factory=dict)
    children: dict[tuple[str, str], str] = field(default_factory=dict)   # (cls, attr) -> class
    list_children: set[tuple[str, str]] = field(default_factory=set)     # ModuleList attrs
    ctor_args: dict[str, tuple[list[cst.Arg], str]] = field(default_factory=dict)

    def file_of(self, cls: str) -> str:
        return self.classes[cls][0]

    def method(self, cls: str, name: str) -> Method | None:
        info = self.classes.get(cls)
        while info is not None:
            m = info[1].methods.get(name)
            if m is not None:
                return m
            nxt = None
            for b in info[1].bases:
                if b.split(".")[-1] in self.classes:
                    nxt = self.classes[b.split(".")[-1]]
                    break
            info = nxt
        return None

    def method_owner(self, cls: str, name: str) -> str:
        info = self.classes.get(cls)
        while info is not None:
            if name in info[1].methods:
                return info[1].name
            info = next((self.classes[b.split(".")[-1]] for b in info[1].bases
                         if b.split(".")[-1] in self.classes), None)
        return cls


# ------------------------------------------------------------------------------ loading

def load_config(path: str | Path | None) -> tuple[dict[str, Any], str]:
    if path is None:
        return {}, ""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("model config not found", path=str(p)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"model config is not valid JSON ({exc})", path=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("model config must be a JSON object", path=str(p))
    # multimodal configs nest the language model's sizes
    for sub in ("text_config", "language_config", "llm_config"):
        if isinstance(data.get(sub), dict):
            merged = dict(data[sub])
            merged.update({k: v for k, v in data.items() if k not in merged and k != sub})
            data = merged
            break
    return data, str(p)


def source_files(model_src: str | Path) -> list[Path]:
    p = Path(model_src)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(x for x in p.rglob("*.py") if "_cannbot_prefetch" not in x.name)
        if not files:
            raise InputError("no Python files in the model source folder", path=str(p))
        return files
    raise InputError("model source not found", path=str(p))


def load_model_source(model_src: str | Path, config: dict[str, Any], config_path: str = "",
                      tp: int = 1, moe_tp: int = 1) -> ModelSource:
    """`tp` / `moe_tp`: the ranks the profiled deployment splits dense linears / experts over;
    weight dims are evaluated per rank (evaluate.py, roles.py)."""
    if tp < 1:
        raise InputError(f"--tp must be at least 1, not {tp}")
    if moe_tp < 1:
        raise InputError(f"--moe-tp must be at least 1, not {moe_tp}")
    files: dict[str, SourceView] = {}
    classes: dict[str, tuple[str, ClassInfo]] = {}
    for f in source_files(model_src):
        try:
            code = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SourceError("model source is not UTF-8 text", path=str(f)) from None
        try:
            view = parse_view(code)
        except cst.ParserSyntaxError as exc:
            raise SourceError(f"model source does not parse: line {exc.raw_line}: "
                              f"{str(exc).splitlines()[0]}", path=str(f)) from None
        files[str(f)] = view
        for name, info in view.classes.items():
            classes.setdefault(name, (str(f), info))
    ms = ModelSource(files, classes, config, config_path, tp, moe_tp)
    _scan_structure(ms)
    for cls in list(classes):
        scan_linears(ms, cls)
    return ms


def _scan_structure(ms: ModelSource) -> None:
    """Submodules and the argument lists each class is instantiated with."""
    for cname, (_, info) in ms.classes.items():
        init = info.methods.get("__init__")
        if init is None:
            continue
        for s in init.stmts:
            av = _assign_value(s)
            if av is None:
                continue
            attr, value = av
            for call, in_list in _module_calls(value):
                child = _callee_name(call)
                if child in ms.classes:
                    ms.children.setdefault((cname, attr), child)
                    if in_list:
                        ms.list_children.add((cname, attr))
                    ms.ctor_args.setdefault(child, (list(call.args), cname))


def _module_calls(value: cst.BaseExpression) -> Iterator[tuple[cst.Call, bool]]:
    if isinstance(value, cst.Call):
        name = _callee_name(value)
        if name in ("ModuleList", "Sequential") and value.args:
            inner = value.args[0].value
            if isinstance(inner, (cst.ListComp, cst.GeneratorExp)) and isinstance(inner.elt, cst.Call):
                yield inner.elt, True
            elif isinstance(inner, (cst.List, cst.Tuple)):
                for el in inner.elements:
                    if isinstance(el.value, cst.Call):
                        yield el.value, True
            return
        yield value, False
    elif isinstance(value, cst.IfExp):
        yield from _module_calls(value.body)
        yield from _module_calls(value.orelse)


