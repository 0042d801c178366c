"""Stage 6: the plan (`prefetch_plan.yaml`), the contract between analyze, apply and report.

Keys follow ../shared/docs/CONTRACTS.md "Plan"; docs/plan.md in this repo documents each one
and the few this project adds where the contract is silent (`guard`, `max_tokens`,
`target.scope`, `window`). Anchors name calls and variables, never line numbers, so a plan survives edits
that do not touch the sites. Validation happens once, on load, with the key path in the error.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .. import __version__
from ..errors import PlanError

PLAN_VERSION = 1
STATUSES = ("proposed", "applied")
MODES = ("eager", "ge_graph", "npugraph_ex")
MAPPINGS = ("stack", "shape", "manual")
POSITIONS = ("before", "after")
SCOPES = ("same", "next_layer")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Target:
    file: str            # model source file, relative to the plan's directory or absolute
    cls: str             # class owning the weight's module, e.g. LlamaMLP
    attr: str            # attribute, e.g. gate_proj (or experts.gate_up_proj for fused Parameters)
    weight_expr: str     # expression valid in insert.method, e.g. self.mlp.gate_proj.weight
    scope: str = "same"  # same | next_layer (the weight belongs to the next decoder layer)


@dataclass(frozen=True)
class Insert:
    cls: str             # class whose method receives the call (lowest common caller)
    method: str          # e.g. forward
    anchor_call: str     # the call the prefetch is placed around, e.g. self.mlp or self.o_proj
    position: str        # before | after the statement holding anchor_call


@dataclass(frozen=True)
class Join:
    cls: str
    method: str
    where: str = "end"   # end | before:<call> | after:<call>  (eager / npugraph_ex side stream)


@dataclass(frozen=True)
class Cap:
    name: str            # weight | cmo_rate_x_window | hbm_headroom | l2_budget | user
    bytes: int
    note: str = ""


@dataclass(frozen=True)
class Basis:
    dims: tuple[int, ...]         # weight dims as stored
    dtype_bytes: float
    coefficient: float
    caps: tuple[Cap, ...] = ()
    bound_by: str = "coefficient"  # which cap (or the coefficient) set max_size
    formula: str = ""              # the seed formula used, e.g. "H*I*2*b*c"


@dataclass(frozen=True)
class Saving:
    low: float
    mid: float
    high: float


@dataclass(frozen=True)
class Guard:
    """Decode-only runtime guard (CONTRACTS.md "Defaults"): prefetch only while
    `<expr>.shape[dim] <= max_len`, i.e. while the tokens per sequence (query length) read from
    that tensor stay in decode range, at any batch size."""

    expr: str            # local name or dotted attribute path valid at the insertion point
    dim: int             # the query-length dim of that tensor (may be negative: -2 of [B, S, H])
    max_len: int         # >= 1: tokens per sequence up to which it is still decode


@dataclass(frozen=True)
class Site:
    id: str
    target: Target
    insert: Insert
    dependency: str               # dependency{expr}: a variable defined before the insertion
    join: Join
    max_size: int
    basis: Basis
    ladder: dict[str, list[float]]  # {"up": [0.7, 1.0], "down": [0.3, 0.1]}
    mapping: str
    evidence: dict[str, Any]
    saving_us: Saving
    source_sha256: str
    max_tokens: int | None = None  # old token-count guard (superseded by `guard`)
    guard: Guard | None = None     # decode guard: tensor + dim read at runtime


@dataclass(frozen=True)
class Switch:
    name: str = "enable_prefetch"
    default: bool = False
    config_path: str = "enable_prefetch"   # e.g. custom_params.enable_prefetch
    config_file: str | None = None         # YAML runner config to add the key to, if any


@dataclass(frozen=True)
class Plan:
    sites: tuple[Site, ...]
    mode: str = "eager"
    switch: Switch = field(default_factory=Switch)
    status: str = "proposed"
    created_from: dict[str, Any] = field(default_factory=dict)
    rejections: tuple[dict[str, Any], ...] = ()
    version: int = PLAN_VERSION
    tool_version: str = __version__

    def with_status(self, status: str) -> "Plan":
        return replace(self, status=status)


def sha256_file(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------- to / from plain data

def _site_to_dict(s: Site) -> dict[str, Any]:
    t, i, j = s.target, s.insert, s.join
    d = {
        "id": s.id,
        "target": {"file": t.file, "class": t.cls, "attr": t.attr, "weight_expr": t.weight_expr,
                   "scope": t.scope},
        "insert": {"class": i.cls, "method": i.method, "anchor_call": i.anchor_call,
                   "position": i.position},
        "dependency": {"expr": s.dependency},
        "join": {"class": j.cls, "method": j.method, "where": j.where},
        "max_size": s.max_size,
        "max_tokens": s.max_tokens,
        "basis": {"dims": list(s.basis.dims), "dtype_bytes": s.basis.dtype_bytes,
                  "coefficient": s.basis.coefficient, "formula": s.basis.formula,
                  "bound_by": s.basis.bound_by,
                  "caps": [asdict(c) for c in s.basis.caps]},
        "ladder": {k: list(v) for k, v in s.ladder.items()},
        "mapping": s.mapping,
        "evidence": s.evidence,
        "saving_us": asdict(s.saving_us),
        "source_sha256": s.source_sha256,
    }
    if s.guard is not None:     # absent = no decode guard
        d["guard"] = {"expr": s.guard.expr, "dim": s.guard.dim, "max_len": s.guard.max_len}
    return d


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "version": plan.version,
        "tool_version": plan.tool_version,
        "status": plan.status,
        "created_from": plan.created_from,
        "mode": plan.mode,
        "switch": asdict(plan.switch),
        "sites": [_site_to_dict(s) for s in plan.sites],
        "rejections": list(plan.rejections),
    }


class _Reader:
    """Typed access to a nested mapping that raises PlanError naming the key path."""

    def __init__(self, data: Any, where: str, source: str):
        if not isinstance(data, dict):
            raise PlanError(f"{where or 'plan'} must be a mapping", path=source)
        self.data, self.where, self.source = data, where, source

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, typ: type | tuple[type, ...], default: Any = ..., choices=None):
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise PlanError(f"missing key '{self._path(key)}'", path=self.source)
            return default
        value = self.data[key]
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise PlanError(f"'{self._path(key)}' must be {_type_name(typ)}, not {value!r}",
                            path=self.source)
        if choices is not None and value not in choices:
            raise PlanError(f"'{self._path(key)}' must be one of {', '.join(map(str, choices))}, "
                            f"not {value!r}", path=self.source)
        return value

    def sub(self, key: str) -> "_Reader":
        return _Reader(self.get(key, dict), self._path(key), self.source)


def _type_name(typ) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false",
             dict: "a mapping", list: "a list"}
    if isinstance(typ, tuple):
        return " or ".join(names.get(t, t.__name__) for t in typ)
    return names.get(typ, typ.__name__)


def _site_from(r: _Reader) -> Site:
    t, i, j, b = r.sub("target"), r.sub("insert"), r.sub("join"), r.sub("basis")
    max_size = r.get("max_size", int)
    if max_size <= 0:
        raise PlanError(f"'{r.where}.max_size' must be a positive integer, not {max_size}",
                        path=r.source)
    max_tokens = r.get("max_tokens", int, None)
    guard = None
    if r.get("guard", dict, None) is not None:
        g = r.sub("guard")
        max_len = g.get("max_len", int)
        if max_len < 1:
            raise PlanError(f"'{g.where}.max_len' must be an integer >= 1, not {max_len}",
                            path=r.source)
        expr = g.get("expr", str)
        if not _DOTTED.fullmatch(expr):
            raise PlanError(f"'{g.where}.expr' must be a local name or dotted attribute path, "
                            f"not {expr!r}", path=r.source)
        guard = Guard(expr, g.get("dim", int), max_len)
    caps = []
    for k, c in enumerate(b.get("caps", list, [])):
        cr = _Reader(c, f"{b.where}.caps[{k}]", r.source)
        caps.append(Cap(cr.get("name", str), cr.get("bytes", int), cr.get("note", str, "")))
    dims = b.get("dims", list)
    if not all(isinstance(d, int) and d > 0 for d in dims):
        raise PlanError(f"'{b.where}.dims' must be positive integers, not {dims!r}", path=r.source)
    ladder = r.get("ladder", dict, {"up": [], "down": []})
    sv = r.sub("saving_us")
    return Site(
        id=r.get("id", str),
        target=Target(t.get("file", str), t.get("class", str), t.get("attr", str),
                      t.get("weight_expr", str), t.get("scope", str, "same", SCOPES)),
        insert=Insert(i.get("class", str), i.get("method", str), i.get("anchor_call", str),
                      i.get("position", str, choices=POSITIONS)),
        dependency=r.sub("dependency").get("expr", str),
        join=Join(j.get("class", str), j.get("method", str), j.get("where", str, "end")),
        max_size=max_size,
        basis=Basis(tuple(dims), b.get("dtype_bytes", float), b.get("coefficient", float),
                    tuple(caps), b.get("bound_by", str, "coefficient"), b.get("formula", str, "")),
        ladder={str(k): [float(x) for x in v] for k, v in ladder.items()},
        mapping=r.get("mapping", str, choices=MAPPINGS),
        evidence=r.get("evidence", dict, {}),
        saving_us=Saving(sv.get("low", float), sv.get("mid", float), sv.get("high", float)),
        source_sha256=r.get("source_sha256", str),
        max_tokens=max_tokens,
        guard=guard,
    )


def plan_from_dict(data: Any, source: str = "plan") -> Plan:
    r = _Reader(data, "", source)
    version = r.get("version", int)
    if version != PLAN_VERSION:
        raise PlanError(f"plan version {version} is not supported (expected {PLAN_VERSION})",
                        path=source)
    sw = r.sub("switch")
    sites = []
    for k, s in enumerate(r.get("sites", list)):
        sites.append(_site_from(_Reader(s, f"sites[{k}]", source)))
    ids = [s.id for s in sites]
    dup = {x for x in ids if ids.count(x) > 1}
    if dup:
        raise PlanError(f"duplicate site id(s): {', '.join(sorted(dup))}", path=source)
    return Plan(
        sites=tuple(sites),
        mode=r.get("mode", str, "eager", MODES),
        switch=Switch(sw.get("name", str, "enable_prefetch"), sw.get("default", bool, False),
                      sw.get("config_path", str, "enable_prefetch"),
                      sw.get("config_file", str, None)),
        status=r.get("status", str, "proposed", STATUSES),
        created_from=r.get("created_from", dict, {}),
        rejections=tuple(r.get("rejections", list, [])),
        version=version,
        tool_version=r.get("tool_version", str, __version__),
    )


# ---------------------------------------------------------------- files

def load_plan(path: str | os.PathLike) -> Plan:
    p = Path(path)
    if not p.is_file():
        raise PlanError("plan file not found", path=str(p))
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise PlanError(f"not valid YAML{where}", path=str(p)) from None
    return plan_from_dict(data, str(p))


def dump_plan(plan: Plan) -> str:
    header = ("# cannbot-prefetch plan. Keys: docs/plan.md. Review before `cannbot prefetch apply`;\n"
              "# edit max_size / dependency by hand if you like: apply validates the file again.\n")
    return header + yaml.safe_dump(plan_to_dict(plan), sort_keys=False, allow_unicode=True, width=100)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write via a temp file in the same folder + rename, so readers never see half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_plan(plan: Plan, path: str | os.PathLike) -> None:
    write_atomic(path, dump_plan(plan))


def resolve_source(plan_path: str | os.PathLike, file: str) -> Path:
    """A target file path as written in the plan, resolved against the plan's folder."""
    f = Path(file)
    return f if f.is_absolute() else (Path(plan_path).resolve().parent / f)
