"""The plan's plain-data form (`plan_to_dict`, what store.py writes as YAML) and the source
hash; the values themselves live in the leaf contract/plan.py (plan/__init__ re-exports them).

Reading and validating a plan (once, on load, with the key path in the error) is validate.py,
the files (load, save, atomic writes) store.py.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..contract.plan import Cap, Plan, Site


def sha256_file(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------- to / from plain data

def _site_to_dict(s: Site) -> dict[str, Any]:
    t, i, j = s.target, s.insert, s.join
    d = {
        "id": s.id,
        "target": {"file": t.file, "class": t.cls, "attr": t.attr, "weight_expr": t.weight_expr,
                   "scope": t.scope,
                   **({"alt_weight_exprs": list(t.alt_weight_exprs)} if t.alt_weight_exprs
                      else {})},
        "insert": {"class": i.cls, "method": i.method, "anchor_call": i.anchor_call,
                   "position": i.position},
        "dependency": {"expr": s.dependency},
        "join": {"class": j.cls, "method": j.method, "where": j.position},
        "max_size": s.max_size,
        "basis": {"dims": list(s.basis.dims), "dtype_bytes": s.basis.dtype_bytes,
                  "coefficient": s.basis.coefficient, "formula": s.basis.formula,
                  "bound_by": s.basis.bound_by,
                  "caps": [_cap_dict(c) for c in s.basis.caps]},
        "ladder": {k: list(v) for k, v in s.ladder.items()},
        "mapping": s.mapping,
        "evidence": s.evidence,
        "saving_us": asdict(s.saving_us) if s.saving_us is not None else None,
        "source_sha256": s.source_sha256,
    }
    if s.max_tokens is not None:    # only a plan read with the older token count keeps it
        d["max_tokens"] = s.max_tokens
    if s.guard is not None:     # absent = no decode guard
        d["guard"] = {"expr": s.guard.expr, "dim": s.guard.dim, "max_len": s.guard.max_len}
    return d


def _cap_dict(c: Cap) -> dict[str, Any]:
    d = {"name": c.name, "bytes": c.bytes, "note": c.note}
    if not c.binding:
        d["binding"] = False   # absent = binding (plans written before the key existed)
    return d


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "version": plan.version,
        "tool_version": plan.tool_version,
        "status": plan.status,
        "created_from": plan.created_from,
        "mode": plan.mode,
        **({"call": plan.call} if plan.call else {}),
        "switch": asdict(plan.switch),
        "sites": [_site_to_dict(s) for s in plan.sites],
        "rejections": list(plan.rejections),
    }
