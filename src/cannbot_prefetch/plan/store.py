"""Plan files: load (bounded, validated), dump, save (through the atomic write every output
uses, atomic.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..atomic import write_atomic
from ..errors import PlanError
from .schema import Plan, plan_to_dict
from .validate import plan_from_dict

MAX_PLAN_BYTES = 16 << 20      # a plan with hundreds of sites is well under 1 MiB
_MAX_NODES = 1_000_000         # YAML aliases can make a small file a huge tree


def _count_nodes(data: Any, path: str) -> None:
    budget, todo = _MAX_NODES, [data]
    while todo:
        node = todo.pop()
        budget -= 1
        if budget < 0:
            raise PlanError(f"has more than {_MAX_NODES} values (YAML aliases?): not a plan",
                            path=path)
        if isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)


def load_plan(path: str | os.PathLike) -> Plan:
    p = Path(path)
    if not p.is_file():
        raise PlanError("plan file not found", path=str(p))
    if p.stat().st_size > MAX_PLAN_BYTES:
        raise PlanError(f"is {p.stat().st_size} bytes, more than a plan can be "
                        f"({MAX_PLAN_BYTES >> 20} MiB)", path=str(p))
    try:
        data = yaml.safe_load(p.read_bytes().decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise PlanError(f"not valid YAML{where}", path=str(p)) from None
    except RecursionError:
        raise PlanError("nested too deeply to be a plan", path=str(p)) from None
    _count_nodes(data, str(p))
    return plan_from_dict(data, str(p))


def dump_plan(plan: Plan) -> str:
    header = ("# cannbot-prefetch plan. Keys: docs/plan.md. Review before `cannbot prefetch apply`;\n"
              "# edit max_size / dependency by hand if you like: apply validates the file again.\n")
    data = plan_to_dict(plan)
    plan_from_dict(data, "plan")     # never write a plan that apply would refuse to load
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def save_plan(plan: Plan, path: str | os.PathLike) -> None:
    write_atomic(path, dump_plan(plan))


def resolve_source(plan_path: str | os.PathLike, file: str) -> Path:
    """A target file path as written in the plan, resolved against the plan's folder."""
    f = Path(file)
    return f if f.is_absolute() else (Path(plan_path).resolve().parent / f)
