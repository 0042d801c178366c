"""Where the shipped data lives (configs/) and how it is loaded. No thresholds in code.

`configs/` sits at the repository root and is force-included in the wheel as
`cannbot_prefetch/configs`; an editable install reads it from the checkout.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError

_PKG = Path(__file__).resolve().parent


def configs_dir() -> Path:
    """The shipped configs folder: inside the installed package, else the source checkout."""
    for cand in (_PKG / "configs", _PKG.parent.parent / "configs"):
        if cand.is_dir():
            return cand
    raise InputError("configs/ folder not found next to the package", hint="reinstall cannbot-prefetch")


def load_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            # libyaml's parser when PyYAML has it (5-10x faster on the shipped configs)
            return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"not valid YAML{where}", path=str(path)) from None


@lru_cache(maxsize=None)
def policy() -> dict[str, Any]:
    """configs/policy.yaml: thresholds and defaults every stage agrees on (CONTRACTS.md)."""
    return load_yaml(configs_dir() / "policy.yaml")


@lru_cache(maxsize=None)
def op_classes() -> dict[str, Any]:
    """configs/op_classes.yaml: MatMul-family types, window / memory-heavy / communication rules."""
    return load_yaml(configs_dir() / "op_classes.yaml")
