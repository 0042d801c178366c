"""Reading a plan from plain data: every field typed and ranged, with its key path in the
error; every field that reaches source checked against its grammar (grammar.py). A plan is data:
nothing here is evaluated."""

from __future__ import annotations

import math
from typing import Any

from .. import __version__
from ..errors import PlanError
from ..policy import Policy
from ..contract import grammar
from ..contract.plan import (CALL_FORMS, MAPPINGS, MODES, PLAN_VERSION, POSITIONS, SCOPES, STATUSES, Basis, Cap, Guard,
                     Insert, Join, Plan, Saving, Site, Switch, Target)

class _Reader:
    """Typed access to a nested mapping that raises PlanError naming the key path.

    `done()` refuses keys nobody asked for: a misspelt key is an error, not silently ignored."""

    def __init__(self, data: Any, where: str, source: str):
        if not isinstance(data, dict):
            raise PlanError(f"'{where or 'plan'}' must be a mapping, not {_brief(data)}", path=source)
        self.data, self.where, self.source = data, where, source
        self.seen: set[str] = set()

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, message: str) -> PlanError:
        return PlanError(f"'{self._path(key)}' {message}", path=self.source)

    def get(self, key: str, typ: type | tuple[type, ...], default: Any = ..., choices=None):
        self.seen.add(key)
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise PlanError(f"missing key '{self._path(key)}'", path=self.source)
            return default
        value = self.data[key]
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)) or \
                (typ is float and isinstance(value, bool)):
            raise self.fail(key, f"must be {_type_name(typ)}, not {_brief(value)}")
        if typ is float and not math.isfinite(value):
            raise self.fail(key, f"must be a finite number, not {value!r}")
        if choices is not None and value not in choices:
            raise self.fail(key, f"must be one of {', '.join(map(str, choices))}, not {_brief(value)}")
        return value

    def number(self, key: str, lo: float, hi: float, default: Any = ..., *, lo_open=False) -> float:
        value = self.get(key, float, default)
        if value is None or value is default:
            return value
        if value > hi or value < lo or (lo_open and value == lo):
            raise self.fail(key, f"must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], not {value!r}")
        return value

    def integer(self, key: str, lo: int, hi: int, default: Any = ...) -> int:
        value = self.get(key, int, default)
        if value is None or value is default:
            return value
        if not lo <= value <= hi:
            raise self.fail(key, f"must be an integer in {lo}..{hi}, not {_brief(value)}")
        return value

    def code(self, key: str, field: str, default: Any = ...) -> str:
        """A string that reaches source code: it must match its grammar (grammar.RULES)."""
        value = self.get(key, str, default)
        msg = grammar.problem(field, value)
        if msg:
            raise self.fail(key, msg)
        return value

    def path(self, key: str, default: Any = ...) -> str | None:
        value = self.get(key, str, default)
        if value is None:
            return value
        if not value or any(c in value for c in "\0\r\n") or len(value) > 4096:
            raise self.fail(key, f"must be a file path (one line, no NUL), not {_brief(value)}")
        return value

    def text(self, key: str, default: Any = ...) -> str:
        return self.get(key, str, default)

    def sub(self, key: str) -> "_Reader":
        return _Reader(self.get(key, dict), self._path(key), self.source)

    def items(self, key: str, default: Any = ...) -> list:
        return self.get(key, list, default)

    def done(self) -> None:
        extra = sorted(str(k) for k in self.data if k not in self.seen)
        if extra:
            names = ", ".join(f"'{self._path(k)}'" for k in extra[:5])
            raise PlanError(f"unknown key{'s' if len(extra) > 1 else ''} {names} "
                            f"(docs/plan.md lists the keys)", path=self.source)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(typ) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false",
             dict: "a mapping", list: "a list"}
    if isinstance(typ, tuple):
        return " or ".join(names.get(t, t.__name__) for t in typ)
    return names.get(typ, typ.__name__)


_MAX_DIMS = 8
_MAX_DIM = 2**40          # one weight dimension; far above any model, far below overflow
_MAX_LIST = 64            # ladder rungs, caps


def _ladder(r: _Reader) -> dict[str, list[float]]:
    if "ladder" not in r.data or r.data["ladder"] is None:
        r.seen.add("ladder")
        return {"up": [], "down": []}
    lr = r.sub("ladder")
    out = {}
    for side in ("up", "down"):
        rungs = lr.items(side, [])
        if len(rungs) > _MAX_LIST:
            raise lr.fail(side, f"has {len(rungs)} rungs (at most {_MAX_LIST})")
        vals = []
        for k, x in enumerate(rungs):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                    or not 0 < x <= 1:
                raise lr.fail(f"{side}[{k}]", f"must be a coefficient in (0, 1], not {_brief(x)}")
            vals.append(float(x))
        out[side] = vals
    lr.done()
    return out


def _saving(r: _Reader, key: str) -> "Saving":
    sv = r.sub(key)
    out = Saving(*(sv.number(k, -1e12, 1e12) for k in ("low", "mid", "high")))
    sv.done()
    return out


def _absent(r: _Reader, key: str) -> None:
    """A key given as null (unknown), marked as read."""
    r.seen.add(key)
    return None


# evidence is free-form (shown in the design and the report), but the keys those read are typed
_EVIDENCE_MAPPINGS = ("signature", "window", "saving_per_op_us", "tuning", "call_site")
_EVIDENCE_NUMBERS = ("instances_per_step", "mean_us", "t_memory_us", "t_compute_us", "ai", "ridge",
                     "bytes_per_op", "useful_share", "cmo_gbps")
_EVIDENCE_TEXTS = ("role", "verdict", "measured_verdict", "stack", "call_stack")


def _evidence(r: _Reader) -> dict[str, Any]:
    ev = r.get("evidence", dict, {})
    er = _Reader(ev, r._path("evidence"), r.source)
    for k in _EVIDENCE_MAPPINGS:
        if ev.get(k) is not None:
            er.get(k, dict)
    for k in _EVIDENCE_NUMBERS:
        if ev.get(k) is not None:
            er.get(k, float)
    for k in _EVIDENCE_TEXTS:
        if ev.get(k) is not None:
            er.get(k, str)
    if ev.get("notes") is not None and not all(isinstance(n, str) for n in er.items("notes")):
        raise er.fail("notes", "must be a list of strings")
    if isinstance(ev.get("signature"), dict):
        sr = er.sub("signature")
        for k in ("type", "input_shapes", "dtypes", "input_dtypes"):
            if ev["signature"].get(k) is not None:
                sr.get(k, str)
    if isinstance(ev.get("window"), dict):
        wr = er.sub("window")
        if ev["window"].get("ops") is not None and \
                not all(isinstance(o, str) for o in wr.items("ops")):
            raise wr.fail("ops", "must be a list of operator names")
        for k in ("time_us", "effective_us", "min_us", "raw_us", "overlap_us", "bytes"):
            if ev["window"].get(k) is not None:
                wr.get(k, float)
    if isinstance(ev.get("call_site"), dict):
        cr = er.sub("call_site")
        for k in ("cluster", "clusters", "rank"):
            if ev["call_site"].get(k) is not None:
                cr.integer(k, 0, grammar.INT64_MAX)
    if isinstance(ev.get("saving_per_op_us"), dict):
        pr = er.sub("saving_per_op_us")
        for k in ("low", "mid", "high"):
            if ev["saving_per_op_us"].get(k) is not None:
                pr.get(k, float)
    return ev


def _basis(r: _Reader) -> Basis:
    b = r.sub("basis")
    caps = []
    raw_caps = b.items("caps", [])
    if len(raw_caps) > _MAX_LIST:
        raise b.fail("caps", f"has {len(raw_caps)} entries (at most {_MAX_LIST})")
    for k, c in enumerate(raw_caps):
        cr = _Reader(c, f"{b.where}.caps[{k}]", r.source)
        caps.append(Cap(cr.text("name"), cr.integer("bytes", 0, grammar.INT64_MAX),
                        cr.text("note", ""), cr.get("binding", bool, True)))
        cr.done()
    dims = b.items("dims")
    if not dims or len(dims) > _MAX_DIMS or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 < d <= _MAX_DIM for d in dims):
        raise b.fail("dims", f"must be 1 to {_MAX_DIMS} positive integers (each at most "
                             f"{_MAX_DIM}), not {_brief(dims)}")
    out = Basis(tuple(dims), b.number("dtype_bytes", 0, 64, lo_open=True),
                b.number("coefficient", 0, 1, lo_open=True), tuple(caps),
                b.text("bound_by", "coefficient"), b.text("formula", ""))
    b.done()
    return out


def _guard(r: _Reader) -> Guard | None:
    if r.get("guard", dict, None) is None:
        return None
    g = r.sub("guard")
    out = Guard(g.code("expr", "guard.expr"), g.integer("dim", -_MAX_DIMS, _MAX_DIMS - 1),
                g.integer("max_len", 1, grammar.INT32_MAX))
    g.done()
    return out


def _alt_weight_exprs(t: _Reader) -> tuple[str, ...]:
    """`target.alt_weight_exprs` (optional): the rule is grammar.alt_paths_problem."""
    items = tuple(t.get("alt_weight_exprs", list, []))
    msg = grammar.alt_paths_problem(t.data.get("weight_expr", ""), items,
                                    t.data.get("scope") or "same")
    if msg:
        raise t.fail("alt_weight_exprs", msg)
    return items


def _site_from(r: _Reader) -> Site:
    t, i, j, d = r.sub("target"), r.sub("insert"), r.sub("join"), r.sub("dependency")
    basis = _basis(r)
    weight_bytes = math.prod(basis.dims) * basis.dtype_bytes
    max_size = r.get("max_size", int)
    if not 0 < max_size <= grammar.INT64_MAX:
        raise r.fail("max_size", f"must be a positive integer, not {_brief(max_size)}")
    if max_size > math.ceil(weight_bytes):
        raise r.fail("max_size", f"is {max_size} bytes, more than the weight it prefetches "
                                 f"({int(weight_bytes)} bytes from basis.dims x basis.dtype_bytes)")
    sha = r.text("source_sha256")
    if not grammar.SHA256.match(sha):
        raise r.fail("source_sha256", f"must be the 64 hex digits of the target file's sha256 "
                                      f"(apply refuses to write without it), not {_brief(sha)}")
    site = Site(
        id=r.code("id", "id"),
        target=Target(t.path("file"), t.code("class", "target.class"),
                      t.code("attr", "target.attr"), t.code("weight_expr", "target.weight_expr"),
                      t.get("scope", str, "same", SCOPES), _alt_weight_exprs(t)),
        insert=Insert(i.code("class", "insert.class"), i.code("method", "insert.method"),
                      i.code("anchor_call", "insert.anchor_call"),
                      i.get("position", str, choices=POSITIONS)),
        dependency=d.code("expr", "dependency.expr"),
        join=Join(j.code("class", "join.class"), j.code("method", "join.method"),
                  j.code("where", "join.where", "end")),
        max_size=max_size,
        basis=basis,
        ladder=_ladder(r),
        mapping=r.get("mapping", str, choices=MAPPINGS),
        evidence=_evidence(r),
        saving_us=_saving(r, "saving_us") if r.data.get("saving_us") is not None else _absent(r, "saving_us"),
        source_sha256=sha,
        max_tokens=r.integer("max_tokens", 1, grammar.INT32_MAX, None),
        guard=_guard(r),
    )
    for sub in (t, i, j, d, r):
        sub.done()
    return site


def _rejections(r: _Reader) -> tuple[dict[str, Any], ...]:
    out = []
    for k, item in enumerate(r.items("rejections", [])):
        rr = _Reader(item, f"rejections[{k}]", r.source)
        for key in ("signature", "reason_code", "reason", "site", "site_id"):
            if item.get(key) is not None:
                rr.get(key, str)
        out.append(item)
    return tuple(out)


def _override_range(key: str, cal) -> tuple[float | None, float | None]:
    """What a recorded override may be: policy.yaml calibration.plausible_* (`cal`; no host
    outside them; 1e-300 TB/s would overflow every time computed from it)."""
    bw_lo, bw_hi = (float(x) for x in cal["plausible_bw_tbps"])
    if key == "hbm_bw_tbps":
        return bw_lo, bw_hi
    if key == "cmo_bw_gbps":
        return bw_lo * 1000, bw_hi * 1000
    if key.startswith("peaks_tflops."):
        lo, hi = (float(x) for x in cal["plausible_tflops"])
        return lo, hi
    return None, None


def _created_from(r: _Reader, policy: Policy | None) -> dict[str, Any]:
    cf = r.get("created_from", dict, {})
    cr = _Reader(cf, "created_from", r.source)
    for key in ("profile", "hardware", "hardware_file"):
        if cf.get(key) is not None:
            cr.get(key, str)
    if cf.get("inputs") is not None:
        cr.get("inputs", dict)
    if cf.get("hardware_overrides") is not None:
        hr = cr.sub("hardware_overrides")
        cal = (policy or Policy.load())["calibration"]   # read only where overrides are
        for k in cf["hardware_overrides"]:
            lo, hi = _override_range(str(k), cal)
            if lo is None:
                raise hr.fail(k, "is no hardware number analyze overrides (hbm_bw_tbps, "
                                 "cmo_bw_gbps, peaks_tflops.<dtype>)")
            hr.number(k, lo, hi)
    return cf


def plan_from_dict(data: Any, source: str = "plan", *, policy: Policy | None = None) -> Plan:
    """Plain data -> Plan, every field checked. `policy`: the run's (the override bounds); a
    plan read alone (apply, a library caller) reads the shipped one."""
    r = _Reader(data, "", source)
    version = r.get("version", int)
    if version != PLAN_VERSION:
        raise PlanError(f"plan version {version} is not supported (expected {PLAN_VERSION})",
                        path=source)
    sw = r.sub("switch")
    sites = []
    for k, s in enumerate(r.items("sites")):
        sites.append(_site_from(_Reader(s, f"sites[{k}]", source)))
    ids = [s.id for s in sites]
    dup = {x for x in ids if ids.count(x) > 1}
    if dup:
        raise PlanError(f"duplicate site id(s): {', '.join(sorted(dup))}", path=source)
    switch = Switch(sw.code("name", "switch.name", "enable_prefetch"),
                    sw.get("default", bool, False),
                    sw.code("config_path", "switch.config_path", "enable_prefetch"),
                    sw.path("config_file", None))
    sw.done()
    plan = Plan(
        sites=tuple(sites),
        mode=r.get("mode", str, "eager", MODES),
        call=r.get("call", str, None, CALL_FORMS),
        switch=switch,
        status=r.get("status", str, "proposed", STATUSES),
        created_from=_created_from(r, policy),
        rejections=_rejections(r),
        version=version,
        tool_version=r.text("tool_version", __version__),
    )
    r.done()
    if plan.mode == "ge_graph" and plan.call == "side_stream":
        raise PlanError("call: side_stream is not a ge_graph form (torchair takes npu_prefetch as "
                        "a Cmo node ordered by its dependency; no stream of its own): use "
                        "call: direct or leave it out", path=source)
    return plan
