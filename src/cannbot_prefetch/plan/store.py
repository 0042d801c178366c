"""Plan files: load (bounded, validated), dump, save (through the atomic write every output
uses, atomic.py)."""

from __future__ import annotations

import os
from pathlib import Path

from .. import yaml_safe
from ..atomic import write_atomic
from ..errors import PlanError
from ..contract.plan import Plan
from .schema import plan_to_dict
from ..policy import Policy
from .validate import plan_from_dict

MAX_PLAN_BYTES = 16 << 20      # a plan with hundreds of sites is well under 1 MiB


def load_plan(path: str | os.PathLike, *, policy: Policy | None = None) -> Plan:
    p = Path(path)
    data = yaml_safe.load_file(p, "plan file", MAX_PLAN_BYTES, PlanError)
    return plan_from_dict(data, str(p), policy=policy)


def dump_plan(plan: Plan) -> str:
    header = ("# cannbot-prefetch plan. Keys: docs/plan.md. Review before `cannbot prefetch apply`;\n"
              "# edit max_size / dependency by hand if you like: apply validates the file again.\n")
    data = plan_to_dict(plan)
    plan_from_dict(data, "plan")     # never write a plan that apply would refuse to load
    return header + yaml_safe.dump(data, sort_keys=False, allow_unicode=True, width=100)


def save_plan(plan: Plan, path: str | os.PathLike) -> None:
    write_atomic(path, dump_plan(plan))


def resolve_source(plan_path: str | os.PathLike, file: str) -> Path:
    """A target file path as written in the plan, resolved against the plan's folder."""
    f = Path(file)
    return f if f.is_absolute() else (Path(plan_path).resolve().parent / f)
