"""Call stacks: which frame is the model's, and stacks for kernel_details rows.

A stack is "file(line): func;..." innermost first. It starts inside the framework (torch's
`linear.py`, torch_npu), so the model's call site is the first frame that is not the framework's
(configs/op_classes.yaml `framework_frames`): one rule for attribution, mapping and the report,
`Frames`, built from the run's policy where a stage starts and handed down (the windows' rules,
the model source).

kernel_details has no stacks; the trace of the same export has them per kernel (via the
async_npu flows), and both write the same start time, so rows match exactly on start_ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from ..errors import InputError


@dataclass(frozen=True)
class Frames:
    """Which frames are the framework's (compiled `framework_frames` patterns); the answer per
    stack text is kept on the object, for the run that holds it (a timeline repeats the same
    few stacks every layer and step)."""

    framework: tuple[re.Pattern[str], ...] = ()
    _first: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, op_classes: Mapping[str, Any]) -> "Frames":
        """From a run's op_classes table (`policy.op_classes`); InputError on a bad pattern."""
        pats = op_classes.get("framework_frames") or ()
        try:
            return cls(tuple(re.compile(str(p), re.IGNORECASE) for p in pats))
        except re.error as exc:
            raise InputError(f"op_classes.yaml: framework_frames: {exc}") from None

    def is_framework(self, frame: str) -> bool:
        """A frame (or just its file path) of the framework, never the model's source."""
        return any(p.search(frame) for p in self.framework)

    def first_model(self, stack: str | Sequence[str] | None) -> str:
        """The innermost frame of a stack that is the model's own ("" when none is)."""
        if not isinstance(stack, str):
            return self._first_of(list(stack or ()))
        hit = self._first.get(stack)
        if hit is None:
            hit = self._first[stack] = self._first_of(stack.split(";"))
        return hit

    def _first_of(self, frames: list) -> str:
        for fr in frames:
            fr = str(fr).strip()
            if fr and not self.is_framework(fr):
                return fr
        return ""


def attach_trace_stacks(df: pl.DataFrame, trace_path: Path,
                        max_bytes: int) -> tuple[pl.DataFrame, int]:
    """Fill `stack` (and add `launch_op`) where a trace kernel starts at the same ns."""
    from .trace_reader import trace_stacks
    try:
        found = trace_stacks(trace_path, max_bytes)
    except InputError:
        return df, 0
    if found is None or found.height == 0:
        return df, 0
    found = found.rename({"stack": "__stack", "launch_op": "__op"})
    out = df.join(found, on="start_ns", how="left", maintain_order="left")
    attached = int(out["__stack"].is_not_null().sum())
    out = out.with_columns(pl.coalesce("stack", "__stack").alias("stack"),
                           pl.col("__op").alias("launch_op")).drop("__stack", "__op")
    return out, attached
