"""Which op types are MatMul-family, and which family (configs/op_classes.yaml `matmul_family`).

Matching is case-insensitive, by exact type or full-match regex, families tried in the configured
order. Never by `Accelerator Core`: GroupedMatmul / QuantBatchMatmul run as MIX_AIC. When the type
is missing (Level0 exports), the kernel name stands in: aclnn names end in the op type
(`aclnnMatmul_MatMulV3Common_MatMulV3`), graph-mode names add a counter (`MatMul91`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InputError
from ..policy import Policy


@dataclass(frozen=True)
class WeightInput:
    """Which input of an op type is x and which the weight (op_classes.yaml `weight_inputs`)."""

    x: int = 0
    weight: int | str = 1          # an index (negative from the end) or "largest"
    n_from: str = "output"         # "output" | "weight"


DEFAULT_WEIGHT_INPUT = WeightInput()


@dataclass(frozen=True)
class FamilyRules:
    order: tuple[str, ...]
    types: dict[str, str]                              # lower-case type -> family
    patterns: tuple[tuple[re.Pattern[str], str], ...]  # (regex, family), in family order
    exclude_types: frozenset[str]
    exclude_suffixes: tuple[str, ...]
    weight_inputs: tuple[tuple[re.Pattern[str], WeightInput], ...] = ()

    def weight_input(self, op_type: str | None) -> WeightInput:
        """Where x and the weight are among the inputs of `op_type` (first matching rule)."""
        t = (op_type or "").strip()
        for rx, spec in self.weight_inputs:
            if rx.fullmatch(t):
                return spec
        return DEFAULT_WEIGHT_INPUT

    def family_of_type(self, op_type: str | None) -> str | None:
        if not op_type:
            return None
        t = op_type.strip().lower()
        if not t or t in self.exclude_types:
            return None
        hit = self.types.get(t)
        if hit is not None:
            return hit
        for rx, fam in self.patterns:
            if rx.fullmatch(t):
                return fam
        return None

    def type_from_name(self, name: str | None) -> str | None:
        """The op type a kernel name implies, or None (also for MemSet helpers)."""
        if not name or self.excluded_name(name):
            return None
        last = name.strip().split("_")[-1]
        for cand in (last, re.sub(r"\d+$", "", last)):
            if cand and self.family_of_type(cand):
                return cand
        return None

    def excluded_name(self, name: str | None) -> bool:
        return bool(name) and name.strip().lower().endswith(self.exclude_suffixes)

    def family_of(self, op_type: str | None, name: str | None = None) -> str | None:
        """Family of a row: by its type, or by its name when the type is missing."""
        if self.excluded_name(name):
            return None
        if op_type:
            return self.family_of_type(op_type)
        return self.family_of_type(self.type_from_name(name))


def rules_from(config: Any) -> FamilyRules:
    if not isinstance(config, Mapping) or not isinstance(config.get("families"), Mapping):
        raise InputError("op_classes.yaml: matmul_family.families is missing or not a mapping")
    fams: dict[str, Any] = config["families"]
    order = tuple(config.get("order") or fams.keys())
    types: dict[str, str] = {}
    patterns: list[tuple[re.Pattern[str], str]] = []
    for fam in order:
        spec = fams.get(fam) or {}
        for t in spec.get("types") or []:
            types.setdefault(str(t).lower(), fam)
        for p in spec.get("patterns") or []:
            try:
                patterns.append((re.compile(str(p), re.IGNORECASE), fam))
            except re.error as exc:
                raise InputError(f"op_classes.yaml: matmul_family.{fam} pattern {p!r}: {exc}") from None
    return FamilyRules(
        order=order, types=types, patterns=tuple(patterns),
        weight_inputs=_weight_inputs(config.get("weight_inputs") or []),
        exclude_types=frozenset(str(t).lower() for t in config.get("exclude_types") or []),
        exclude_suffixes=tuple(str(s).lower() for s in config.get("exclude_name_suffixes") or []))


def _weight_inputs(rows: Any) -> tuple[tuple[re.Pattern[str], WeightInput], ...]:
    out = []
    for i, row in enumerate(rows if isinstance(rows, (list, tuple)) else []):
        where = f"op_classes.yaml: matmul_family.weight_inputs[{i}]"
        if not isinstance(row, Mapping) or not isinstance(row.get("types"), str):
            raise InputError(f"{where}: needs a `types` regex")
        weight = row.get("weight", 1)
        if not (isinstance(weight, int) or weight == "largest"):
            raise InputError(f"{where}: weight {weight!r} is neither an index nor 'largest'")
        n_from = row.get("n_from", "output")
        if n_from not in ("output", "weight"):
            raise InputError(f"{where}: n_from {n_from!r} is neither 'output' nor 'weight'")
        try:
            rx = re.compile(row["types"], re.IGNORECASE)
        except re.error as exc:
            raise InputError(f"{where}: {exc}") from None
        out.append((rx, WeightInput(int(row.get("x", 0)), weight, n_from)))
    return tuple(out)


def rules_of(policy: Policy) -> FamilyRules:
    """The run's MatMul families (its `op_classes` table, compiled): built where a stage
    starts and handed down, never kept at module level."""
    return rules_from(policy.op_classes.get("matmul_family"))
