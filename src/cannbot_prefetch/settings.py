"""Where the shipped data lives (configs/) and how it is loaded. No thresholds in code.

`configs/` sits at the repository root and is force-included in the wheel as
`cannbot_prefetch/configs`; an editable install reads it from the checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import InputError

_PKG = Path(__file__).resolve().parent


def configs_dir() -> Path:
    """The shipped configs folder: inside the installed package, else the source checkout."""
    for cand in (_PKG / "configs", _PKG.parent.parent / "configs"):
        if cand.is_dir():
            return cand
    raise InputError("configs/ folder not found next to the package", hint="reinstall cannbot-prefetch")


MAX_YAML_BYTES = 4 << 20   # a config or hardware profile is a few KiB; the plan has its own bound


def load_yaml(path: Path, what: str = "YAML file") -> Any:
    """A config or hardware YAML, read through yaml_safe (bounded with aliases expanded, no
    duplicate keys); InputError naming the file otherwise."""
    from .yaml_safe import load_file

    return load_file(path, what, MAX_YAML_BYTES)
