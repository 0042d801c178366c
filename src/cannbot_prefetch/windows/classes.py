"""Predecessor classes: light / memory-heavy / communication from configs/op_classes.yaml
`window_classes` plus sizes (policy `windows.large_op_bytes` / `large_op_us`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from ..errors import InputError
from ..settings import op_classes, policy
from .types import COMM, HEAVY, LIGHT


# ------------------------------------------------------------------------------ classes

@dataclass(frozen=True)
class WindowRules:
    comm_cores: frozenset[str]
    communication: tuple[re.Pattern[str], ...]
    matmul: tuple[re.Pattern[str], ...]
    movers: tuple[re.Pattern[str], ...]
    light: tuple[re.Pattern[str], ...]
    large_op_bytes: int
    large_op_us: float

    def classify(self, op_type: str | None, name: str | None, core: str | None, nbytes: int,
                 dur_us: float, is_matmul: bool | None = None, memory_bound: bool | None = None,
                 ) -> tuple[str, str]:
        """(class, why) of one predecessor."""
        kind = self.kind_of(op_type, name, core)
        if kind == COMM:
            return COMM, f"{core} row" if core and core.upper() in self.comm_cores \
                else "communication op"
        large_b = nbytes >= self.large_op_bytes
        long_mb = dur_us >= self.large_op_us and (memory_bound is None or memory_bound)
        # Without shapes the bytes are unknown (0): say so, and call a long op long, not large.
        size = (f"{_mib(nbytes)} moved, {dur_us:.1f} µs" if nbytes else
                f"{dur_us:.1f} µs, bytes unknown")
        big = "large" if large_b or not long_mb or nbytes else "long"
        if is_matmul or (is_matmul is None and kind == "matmul"):
            if large_b or long_mb:
                return HEAVY, f"{big} MatMul ({size})"
            return LIGHT, f"small MatMul ({size})"
        if kind == "mover":
            return (HEAVY, f"{big} data movement ({size})") if (large_b or long_mb) else \
                   (LIGHT, f"small data movement ({size})")
        if large_b:
            return HEAVY, f"moves {_mib(nbytes)} (>= {_mib(self.large_op_bytes)})"
        if kind == LIGHT:
            return LIGHT, "light op"
        return LIGHT, f"small op ({size})"

    def kind_of(self, op_type: str | None, name: str | None, core: str | None) -> str:
        """communication | matmul | mover | light | other, from names alone (cached)."""
        return _kind_cached(self, op_type, name, core.upper() if core else None)


_KINDS: dict[tuple, str] = {}


def _kind_cached(rules: "WindowRules", op_type: str | None, name: str | None,
                 core: str | None) -> str:
    key = (id(rules), op_type, name, core)
    hit = _KINDS.get(key)
    if hit is None:
        hit = _KINDS[key] = _kind_of(rules, op_type, name, core)
    return hit


def _kind_of(rules: "WindowRules", op_type: str | None, name: str | None,
             core: str | None) -> str:
    text = (op_type or name or "").strip()
    if core and core in rules.comm_cores:
        return COMM
    if _any(rules.communication, text) or (name and _any(rules.communication, name)):
        return COMM
    if _any(rules.matmul, text):
        return "matmul"
    if _any(rules.movers, text):
        return "mover"
    if _any(rules.light, text):
        return LIGHT
    return "other"


def _any(patterns: Iterable[re.Pattern[str]], text: str) -> bool:
    return any(p.search(text) for p in patterns)


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def rules_from(config: dict[str, Any] | None, pol: dict[str, Any]) -> WindowRules:
    if not isinstance(config, dict):
        raise InputError("op_classes.yaml: window_classes section is missing")

    def rx(key: str) -> tuple[re.Pattern[str], ...]:
        out = []
        for p in config.get(key) or []:
            try:
                out.append(re.compile(str(p), re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"op_classes.yaml: window_classes.{key} pattern {p!r}: {exc}") from None
        return tuple(out)

    w = pol.get("windows", {})
    return WindowRules(
        comm_cores=frozenset(str(c).upper() for c in config.get("communication_cores") or []),
        communication=rx("communication"), matmul=rx("matmul"), movers=rx("movers"),
        light=rx("light"), large_op_bytes=int(w.get("large_op_bytes", 8 * 2**20)),
        large_op_us=float(w.get("large_op_us", 20.0)))


@lru_cache(maxsize=1)
def default_rules() -> WindowRules:
    return rules_from((op_classes() or {}).get("window_classes"), policy())
