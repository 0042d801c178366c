"""Predecessor classes: light / memory-heavy / communication (CONTRACTS "Defaults": window ops of
any type are classed by their counters when present, else by roofline time and bytes).

In order: communication by name / core (configs/op_classes.yaml `window_classes`); the op's own
PipeUtilization counters (memory-bound by the policy's rule on the cube or the vector side ->
memory-heavy, otherwise light, attention included); a MatMul-family op by its signature's roofline
verdict (a memory-bound MatMul is never a "small MatMul"); any other op by roofline time: it is
memory-bound when moving its bytes at the HBM rate takes at least `latency_roofline_share` (30%)
of its measured time. Only without hardware numbers (a bare `find_windows` call) do the sizes
`windows.large_op_bytes` / `large_op_us` stand in."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping

from ..errors import InputError
from ..fmt import mib
from ..i18n import said
from ..roofline.verdict import Verdict, pipe_verdict
from ..policy import Policy
from ..profiling.stacks import Frames
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
    verdict: tuple[tuple[str, float], ...] = ()   # policy `verdict` thresholds
    frames: Frames = field(default_factory=Frames)  # which stack frame is the model's (clusters)
    # kind_of's answers, owned by these rules (asked once per timeline op; a module dict keyed
    # by id() handed a freed object's answers to a new one that reused its id)
    _kinds: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    norms: tuple[re.Pattern[str], ...] = ()       # norm kernels (launched by norm calls only)

    def is_norm(self, op_type: str | None) -> bool:
        return _any(self.norms, op_type or "")

    def classify(self, op_type: str | None, name: str | None, core: str | None, nbytes: int,
                 dur_us: float, is_matmul: bool | None = None, memory_bound: bool | None = None,
                 pipes: tuple[float, ...] | None = None, hbm_bps: float | None = None,
                 explain: bool = True) -> tuple[str, str]:
        """(class, why) of one predecessor. `pipes`: its PipeUtilization ratios; `memory_bound`:
        its MatMul signature's roofline verdict; `hbm_bps`: the part's HBM bytes/s. Without
        `explain` the counters' branch (the one a timeline with counters takes for nearly
        every op) leaves why "": the caller reads the class only."""
        kind = self.kind_of(op_type, name, core)
        if kind == COMM:
            return COMM, f"{core} row" if core and core.upper() in self.comm_cores \
                else "communication op"
        pol = self._verdict
        if pipes is not None and pol:
            v, why = pipe_verdict(pipes, pol, explain)
            if v == Verdict.MEMORY:
                return HEAVY, said("part.heavy_by_counters", why=why) if explain else ""
            if v is not None:
                return LIGHT, said("part.light_by_counters", verdict=v, why=why) if explain else ""
        matmul = is_matmul or (is_matmul is None and kind == "matmul")
        moved = f"{mib(nbytes)} moved, {dur_us:.1f} µs" if nbytes else f"{dur_us:.1f} µs"
        if matmul and memory_bound is not None:
            return ((HEAVY, f"memory-bound MatMul by its roofline ({moved})") if memory_bound
                    else (LIGHT, f"MatMul not memory-bound by its roofline ({moved})"))
        if hbm_bps and nbytes and dur_us > 0 and pol:
            share = nbytes / hbm_bps * 1e6 / dur_us
            rate = f"moves {mib(nbytes)} in {dur_us:.1f} µs: {share:.0%} of the HBM rate"
            if share >= pol["latency_roofline_share"]:
                return HEAVY, f"memory-bound by its roofline ({rate})"
            return LIGHT, f"not memory-bound ({rate})"
        large_b = nbytes >= self.large_op_bytes
        long_mb = dur_us >= self.large_op_us and (memory_bound is None or memory_bound)
        # Without shapes the bytes are unknown (0): say so, and call a long op long, not large.
        size = (f"{mib(nbytes)} moved, {dur_us:.1f} µs" if nbytes else
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
            return HEAVY, f"moves {mib(nbytes)} (>= {mib(self.large_op_bytes)})"
        if kind == LIGHT:
            return LIGHT, "light op"
        return LIGHT, f"small op ({size})"

    @cached_property
    def _verdict(self) -> dict[str, float]:
        return dict(self.verdict)

    def kind_of(self, op_type: str | None, name: str | None, core: str | None) -> str:
        """communication | matmul | mover | light | other, from names alone (cached: asked
        once per timeline op)."""
        key = (op_type, name, core)
        hit = self._kinds.get(key)
        if hit is None:
            hit = self._kinds[key] = _kind_of(self, op_type, name, core.upper() if core else None)
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


def rules_from(config: Mapping[str, Any] | None, pol: Any, frames: Frames | None = None
               ) -> WindowRules:
    if not isinstance(config, Mapping):
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
        large_op_us=float(w.get("large_op_us", 20.0)),
        verdict=tuple(sorted((k, float(v)) for k, v in (pol.get("verdict") or {}).items())),
        norms=rx("norms"), frames=frames or Frames())


def default_rules(policy: Policy) -> WindowRules:
    """The run's window classes (its `op_classes` table) with its thresholds; the caller keeps
    the object (its `kind_of` answers are cached on it)."""
    return rules_from(policy.op_classes.get("window_classes"), policy,
                      Frames.of(policy.op_classes))
