"""The model source as mapping sees it: classes, linear-like attributes with evaluated shapes
(evaluate/), submodules (`self.mlp = LlamaMLP(config)`, `self.layers = nn.ModuleList([...])`)
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
from ..pysource import ClassInfo, Method, SourceView, dotted, parse_view
from .evaluate import LinearAttr, scan_linears
from .evaluate.syntax import assign_value, callee_name

__all__ = ["Event", "Hop", "LinearAttr", "ModelSource", "load_config", "load_model_source",
           "source_files"]

@dataclass(frozen=True)
class Hop:
    cls: str
    method: str
    stmt: int                    # index into Method.stmts
    call: str                    # callee as written, e.g. self.mlp / self.mlps[0] / decoder_layer
    line: int
    access: str | None = None    # the callee's module path from this method's self
                                 # (self.mlps[0]); None when not a fixed path (a loop variable)
    via_list: bool = False       # an element of a module list reached through a variable


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
    ctor_sites: dict[tuple[str, str, str], tuple[list[cst.Arg], str]] = field(default_factory=dict)
    #             (parent class, attr, child class) -> the arguments that instance is built with
    method_aliases: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    alternatives: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # if/else
    primary: set[str] = field(default_factory=set)    # files the user named (others: imported)
    attribute_map: dict[str, str] = field(default_factory=dict)   # config alias -> stored key
    init_envs: dict[str, Any] = field(default_factory=dict)       # evaluate/env.py's cache
    switch_name: str = "enable_prefetch"      # the plan's switch: on wherever a prefetch runs
    layer_index: int | None = None            # evaluate/: the layer a per-layer shape is read for
    layer_indexed: bool | None = None         # evaluate/: some constructor takes a layer index

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


def _read_view(f: Path) -> SourceView:
    try:
        code = f.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SourceError("model source is not UTF-8 text", path=str(f)) from None
    try:
        return parse_view(code)
    except cst.ParserSyntaxError as exc:
        raise SourceError(f"model source does not parse: line {exc.raw_line}: "
                          f"{str(exc).splitlines()[0]}", path=str(f)) from None


def project_root(start: Path) -> Path | None:
    """The nearest folder above `start` that holds .git, pyproject.toml or setup.py; None for
    code inside an installed package (site-packages is nobody's project)."""
    for d in [start, *start.parents]:
        if d.name in ("site-packages", "dist-packages"):
            return None
        if any((d / m).exists() for m in (".git", "pyproject.toml", "setup.py")):
            return d
    return None


def _module_file(importer: Path, source: str, roots: list[Path], bound: Path) -> Path | None:
    """The file an import names (`.modeling_x`, `module.fuse_moe_gmm`), when it lies under
    `bound` (the model's project); None for anything else (torch, transformers, ...)."""
    level = len(source) - len(source.lstrip("."))
    parts = [p for p in source.lstrip(".").split(".") if p]
    if level:
        up = importer.resolve().parent
        ups = [up, *up.parents]
        if level - 1 >= len(ups):      # `from ...x import` above the file system's root
            return None
        bases = [ups[level - 1]]
    else:
        bases = roots
    for base in bases:
        stem = base.joinpath(*parts) if parts else base
        for cand in (stem.with_suffix(".py"), stem / "__init__.py"):
            try:
                real = cand.resolve()
            except (OSError, IndexError):
                continue
            if cand.is_file() and (real == bound or bound in real.parents):
                return cand
    return None


def _wanted_names(ms: "ModelSource") -> set[str]:
    """Names the loaded classes need but do not define: base classes and submodule
    constructors (`class FFN(MoE)`, `self.experts = FusedMoEGMM(...)`)."""
    out: set[str] = set()
    for _, info in ms.classes.values():
        out |= {b.split(".")[-1] for b in info.bases}
        init = info.methods.get("__init__")
        for st in init.stmts if init else []:
            av = assign_value(st)
            if av is not None:
                out |= {callee_name(c) for c, _ in _module_calls(av[1])}
    return out - set(ms.classes)


def load_model_source(model_src: str | Path, config: dict[str, Any], config_path: str = "",
                      tp: int = 1, moe_tp: int = 1, *, follow_imports: int = 3) -> ModelSource:
    """Parse the model source; classes it imports from files of its own project (relative
    imports in its folder, absolute ones under the project root) are loaded too, up to
    `follow_imports` levels, as read-only context: base classes, submodules, weights.
    `tp` / `moe_tp`: the ranks the profiled deployment splits dense linears / experts over;
    weight dims are evaluated per rank (evaluate/, roles.py)."""
    if tp < 1:
        raise InputError(f"--tp must be at least 1, not {tp}")
    if moe_tp < 1:
        raise InputError(f"--moe-tp must be at least 1, not {moe_tp}")
    files: dict[str, SourceView] = {}
    classes: dict[str, tuple[str, ClassInfo]] = {}
    primary = source_files(model_src)
    for f in primary:
        view = _read_view(f)
        files[str(f)] = view
        for name, info in view.classes.items():
            classes.setdefault(name, (str(f), info))
    ms = ModelSource(files, classes, config, config_path, tp, moe_tp, primary={str(f) for f in primary})
    src = Path(model_src)
    folder = (src if src.is_dir() else src.parent).resolve()
    root = project_root(folder)
    bound = root or folder
    roots_ = [root] if root else []
    for _ in range(max(follow_imports, 0)):
        wanted = _wanted_names(ms)
        new: dict[Path, None] = {}
        for fname, view in list(files.items()):
            for name in wanted:
                alias = view.aliases.get(name)
                if alias is None:
                    continue
                mf = _module_file(Path(fname), alias.source, roots_, bound)
                if mf is not None and str(mf) not in files:
                    new[mf] = None
        if not new:
            break
        for mf in new:
            try:
                view = _read_view(mf)
            except SourceError:
                continue          # context only: an unreadable import is not the model's fault
            files[str(mf)] = view
            for name, info in view.classes.items():
                classes.setdefault(name, (str(mf), info))
    ms.attribute_map = config_aliases(folder, config.get("model_type"))
    derive_config_keys(ms)
    _scan_structure(ms)
    for cls in list(classes):
        scan_linears(ms, cls)
    return ms


def derive_config_keys(ms: "ModelSource") -> None:
    """Keys a config class computes in its __init__ from the ones config.json holds
    (`self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim`), added when config.json lacks
    them: a hand-written or trimmed config.json still gives the model's shapes."""
    from .evaluate import derived_attrs

    for name, (f, info) in list(ms.classes.items()):
        if not name.endswith("Config") or "__init__" not in info.methods:
            continue
        params = set(info.methods["__init__"].params) - {"self", "kwargs"}
        if not params or not params & set(ms.config):
            continue
        for k, v in derived_attrs(ms, name).items():
            if k not in ms.config and isinstance(v, (int, float, bool)):
                ms.config[k] = v


def config_aliases(folder: Path, model_type: Any = None) -> dict[str, str]:
    """`attribute_map` of the config classes beside the model (`configuration_*.py`), else of
    the installed transformers' configuration for the config's `model_type` (read, never
    imported): the names the modeling code reads (`hidden_size`) for the keys a config.json
    stores (`n_embd`)."""
    import ast
    import importlib.util

    out: dict[str, str] = {}
    files = sorted(folder.glob("configuration_*.py"))
    if not files and isinstance(model_type, str) and model_type.isidentifier():
        spec = importlib.util.find_spec("transformers")
        parts = model_type.split("_")
        for k in range(len(parts), 0, -1):     # dots3_note_text -> dots3_note
            name = "_".join(parts[:k])
            cand = Path(spec.origin).parent / "models" / name / f"configuration_{name}.py" \
                if spec is not None and spec.origin else None
            if cand is not None and cand.is_file():
                files = [cand]
                break
    exact: dict[str, str] = {}
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            amap: dict[str, str] = {}
            mine = False
            for st in node.body:
                target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    else st.target if isinstance(st, ast.AnnAssign) else None
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "model_type" and isinstance(st.value, ast.Constant):
                    mine = st.value.value == model_type
                if target.id == "attribute_map" and isinstance(st.value, ast.Dict):
                    for k, v in zip(st.value.keys, st.value.values):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and \
                                isinstance(k.value, str) and isinstance(v.value, str):
                            amap[k.value] = v.value
            for k, v in amap.items():
                (exact if mine else out).setdefault(k, v)
    return {**out, **exact}       # the config class of this model_type first


def _scan_structure(ms: ModelSource) -> None:
    """Submodules (every class a `self.x = ...` may hold), module lists, methods bound to
    attributes, and the argument lists each class is instantiated with."""
    for cname, (_, info) in ms.classes.items():
        init = info.methods.get("__init__")
        if init is None:
            continue
        local_lists = _local_appends(init.stmts)
        for s in init.stmts:
            appended = _list_append(s)
            av = assign_value(s) or appended
            if av is None:
                continue
            attr, value = av
            d = dotted(value) or ""
            if d.startswith("self.") and d.count(".") == 1 and ms.method(cname, d[5:]):
                ms.method_aliases.setdefault((cname, attr), []).append(d[5:])
                continue
            for call, in_list in _module_calls(value, local_lists):
                child = callee_name(call)
                if child in ms.classes:
                    ms.children.setdefault((cname, attr), child)
                    alts = ms.alternatives.setdefault((cname, attr), [])
                    if child not in alts:
                        alts.append(child)
                    if in_list or appended is not None:
                        ms.list_children.add((cname, attr))
                    ms.ctor_args.setdefault(child, (list(call.args), cname))
                    ms.ctor_sites.setdefault((cname, attr, child), (list(call.args), cname))


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


def _module_calls(value: cst.BaseExpression, local_lists=None) -> Iterator[tuple[cst.Call, bool]]:
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
                for call, _ in _module_calls(el):
                    yield call, True
            return
        yield value, False
    elif isinstance(value, cst.IfExp):
        yield from _module_calls(value.body)
        yield from _module_calls(value.orelse)


