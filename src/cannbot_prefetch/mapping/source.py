"""The model source as mapping sees it: classes, linear-like attributes with evaluated shapes
(evaluate/), submodules (`self.mlp = LlamaMLP(config)`, `self.layers = nn.ModuleList([...])`)
and the constructor arguments each class is instantiated with. The call order of a forward pass
is flatten.py.

Parsing reuses the rewriter's `SourceView` (one libcst parse, statements with defs/uses/calls),
so mapping and apply agree on what a statement is. config.py reads config.json; structure.py the
submodules and constructor arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from ..errors import InputError, SourceError
from ..policy import Policy
from ..profiling.stacks import Frames
from ..pysource import ClassInfo, Method, SourceView, parse_view
from .config import config_aliases, derive_config_keys
from .evaluate import LinearAttr, scan_linears
from .evaluate.serving import ServingLayers
from .structure import scan_structure, wanted_names

__all__ = ["Event", "Hop", "LinearAttr", "ModelSource", "load_model_source", "source_files"]

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
    serving: ServingLayers      # the run's serving-layer table (policy.serving_layers)
    frames: Frames              # which stack frame is the model's (policy.op_classes)
    tp: int = 1
    moe_tp: int = 1
    linears: dict[tuple[str, str], LinearAttr] = field(default_factory=dict)
    children: dict[tuple[str, str], str] = field(default_factory=dict)   # (cls, attr) -> class
    list_children: set[tuple[str, str]] = field(default_factory=set)     # ModuleList attrs
    built_stacks: set[tuple[str, str]] = field(default_factory=set)      # make_layers' lists
    ctor_args: dict[str, tuple[list[cst.Arg], str]] = field(default_factory=dict)
    ctor_sites: dict[tuple[str, str, str], tuple[list[cst.Arg], str]] = field(default_factory=dict)
    #             (parent class, attr, child class) -> the arguments that instance is built with
    method_aliases: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    alternatives: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # if/else
    primary: set[str] = field(default_factory=set)    # files the user named (others: imported)
    attribute_map: dict[str, str] = field(default_factory=dict)   # config alias -> stored key
    init_envs: dict[str, Any] = field(default_factory=dict)       # evaluate/env.py's cache
    init_bodies: dict[str, list] = field(default_factory=dict)    # init_body.py's cache
    helper_functions: dict[tuple, Any] = field(default_factory=dict)  # evaluate/functions.py's
    helper_modules: dict[str, tuple] = field(default_factory=dict)    # ... sibling files parsed
    calls_by_callee: dict[str, list] | None = None   # evaluate/linears.py's: every build site
    frame_files: dict[tuple, str | None] = field(default_factory=dict)  # mapping/stack.py's
    real_files: dict[str, str] | None = None     # ... cache: real path -> file in `files`
    switch_name: str = "enable_prefetch"      # the plan's switch: on wherever a prefetch runs
    layer_index: int | None = None            # evaluate/: the layer a per-layer shape is read for
    layer_indexed: bool | None = None         # evaluate/: some constructor takes a layer index
    layer_envs: dict[int, dict] = field(default_factory=dict)   # evaluate/static.py's per layer

    def file_of(self, cls: str) -> str:
        return self.classes[cls][0]

    def _chain(self, cls: str):
        """`cls`'s class info, then its first base the source defines, and so on; each class once.
        A name can point back into its own chain (vLLM's llama_eagle.py defines
        `class LlamaDecoderLayer(BaseLlamaDecoderLayer)` beside llama.py's LlamaDecoderLayer,
        one name for both), so the walk stops at a class it has seen instead of looping."""
        info, seen = self.classes.get(cls), set()
        while info is not None and id(info) not in seen:
            seen.add(id(info))
            yield info
            info = next((self.classes[b.split(".")[-1]] for b in info[1].bases
                         if b.split(".")[-1] in self.classes), None)

    def method(self, cls: str, name: str) -> Method | None:
        for info in self._chain(cls):
            m = info[1].methods.get(name)
            if m is not None:
                return m
        return None

    def method_owner(self, cls: str, name: str) -> str:
        for info in self._chain(cls):
            if name in info[1].methods:
                return info[1].name
        return cls


# ------------------------------------------------------------------------------ loading

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


def enclosing_project(start: Path) -> Path | None:
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



def load_model_source(model_src: str | Path, config: dict[str, Any], config_path: str = "",
                      tp: int = 1, moe_tp: int = 1, *, follow_imports: int = 3,
                      policy: Policy | None = None) -> ModelSource:
    """Parse the model source; classes it imports from files of its own project (relative
    imports in its folder, absolute ones under the project root) are loaded too, up to
    `follow_imports` levels, as read-only context: base classes, submodules, weights.
    `tp` / `moe_tp`: the ranks the profiled deployment splits dense linears / experts over;
    weight dims are evaluated per rank (evaluate/, roles.py). `policy`: the run's (its
    serving-layer and framework-frame tables); the shipped one when None (a caller running
    mapping alone)."""
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
    policy = policy or Policy.load()
    ms = ModelSource(files, classes, config, config_path,
                     serving=ServingLayers.of(policy.serving_layers),
                     frames=Frames.of(policy.op_classes), tp=tp, moe_tp=moe_tp,
                     primary={str(f) for f in primary})
    src = Path(model_src)
    folder = (src if src.is_dir() else src.parent).resolve()
    root = enclosing_project(folder)
    bound = root or folder
    roots_ = [root] if root else []
    for _ in range(max(follow_imports, 0)):
        wanted = wanted_names(ms)
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
    for view in list(files.values()):     # `from .qwen2 import Qwen2MLP as Qwen3MLP` (vLLM)
        for a in view.aliases.values():
            if a.name != a.original and a.name not in classes and a.original in classes:
                classes[a.name] = classes[a.original]
    ms.attribute_map = config_aliases(folder, config.get("model_type"))
    derive_config_keys(ms)
    scan_structure(ms)
    for cls in list(classes):
        scan_linears(ms, cls)
    return ms
