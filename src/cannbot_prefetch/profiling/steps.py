"""Step selection: which `Step Id`s to analyse, warm-up excluded by default.

The first profiled step of a run carries one-off costs (graph compile, allocator growth,
first-touch), so with several steps present it is left out unless the user asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..errors import InputError
from ..i18n import said


@dataclass(frozen=True)
class StepChoice:
    df: pl.DataFrame
    kept: tuple[int, ...]
    available: tuple[int, ...]
    warmup_excluded: tuple[int, ...]
    notes: tuple[str, ...]


def select_steps(df: pl.DataFrame, path: str, step: int | None = None,
                 steps: tuple[int, int] | None = None, include_warmup: bool = False,
                 exclude_first: bool = True) -> StepChoice:
    """Filter rows to the chosen steps; InputError (naming what exists) when none match."""
    available = tuple(sorted(df["step"].drop_nulls().unique().to_list())) if "step" in df.columns \
        else ()
    if step is not None and steps is not None:
        raise InputError("give either a step or a step range, not both", path=path)
    if step is not None or steps is not None:
        lo, hi = (step, step) if step is not None else _ordered(steps, path)
        if not available:
            raise InputError("this profile has no Step Id column; cannot select steps", path=path)
        wanted = tuple(s for s in available if lo <= s <= hi)
        if not wanted:
            asked = str(lo) if lo == hi else f"{lo}:{hi}"
            raise InputError(f"step {asked} not in profile; steps available: "
                             f"{_steps_text(available)}", path=path)
        return StepChoice(df.filter(pl.col("step").is_in(wanted)), wanted, available, (), ())
    if len(available) > 1 and exclude_first and not include_warmup:
        first = available[0]
        kept = available[1:]
        note = said("said.warmup", first=first, n=len(available), last=available[-1])
        return StepChoice(df.filter(pl.col("step").is_null() | (pl.col("step") != first)),
                          kept, available, (first,), (note,))
    return StepChoice(df, available, available, (), ())


def _ordered(steps, path: str) -> tuple[int, int]:
    try:
        a, b = (int(steps[0]), int(steps[1]))
    except (TypeError, ValueError, IndexError):
        raise InputError(f"step range must be two integers, got {steps!r}", path=path) from None
    return (a, b) if a <= b else (b, a)


def _steps_text(steps: tuple[int, ...]) -> str:
    if len(steps) > 12:
        return f"{steps[0]}..{steps[-1]} ({len(steps)} steps)"
    return ", ".join(map(str, steps))
