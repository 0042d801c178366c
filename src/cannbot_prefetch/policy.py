"""The analysis policy (configs/policy.yaml, with the shipped tables the stages read:
configs/op_classes.yaml, configs/serving_layers.yaml) as one frozen value, built once where a
run starts.

Why a value and not a global: every stage reads thresholds, and a run that reads them from
one object handed down sees one consistent set (a test or a library caller can hand a changed
copy down with `replace`), with nothing cached at module level: a config edited between two
library calls in one process is read by the second. Only the starts build one:
api/ (an Analysis), pipeline.py, report/run.py, verify/, cli/, and the public stage functions
listed in docs/architecture.md "The policy" when a caller gives none
(tests/unit/test_policy.py holds that list).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .errors import InputError

Section = Mapping[str, Any]   # one stage's keys, read-only (lists become tuples)


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class Policy:
    """configs/policy.yaml, one read-only section per stage (the keys: that file's comments)."""

    verdict: Section        # roofline/verdict.py: which evidence says memory-bound
    report: Section         # report/rules.py: noise, change shares, degraded windows
    steps: Section          # profiling: the warm-up step
    profiling: Section      # input bounds, frequency match share (hardware detection)
    ranks: Section          # --rank all
    bad_rows: Section       # damage tolerated before input is unusable
    windows: Section        # windows/: lookback, shortest window, large ops
    sizing: Section         # sizing.py: coefficient, ladder, CMO rate, L2 budget
    benefit: Section        # gain.py: L2/HBM bandwidth ratio, optimistic share
    plan: Section           # plan/: sites, mode, switch name
    calibration: Section    # hardware/calibration.py and the plan's override bounds
    verify: Section         # verify/factory.py: the tiny model
    # the shipped tables, each its own file in configs/ (named by the field's metadata)
    op_classes: Section = field(metadata={"file": "op_classes.yaml"})
    #   MatMul families (roofline/families.py), window classes (windows/classes.py), attention
    #   ops (plan/phase.py), prefetch tasks (report/streams.py), framework frames (stacks.py)
    serving_layers: Section = field(metadata={"file": "serving_layers.yaml"})
    #   serving engines' layers (mapping/evaluate/serving.py `ServingLayers`)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Policy":
        """Read `path` (default: the shipped configs/policy.yaml) and the shipped tables;
        InputError naming the file and the missing section otherwise. Not cached: a run builds
        it once and passes it."""
        from .settings import configs_dir, load_yaml

        where = Path(path) if path is not None else configs_dir() / "policy.yaml"
        data = load_yaml(where, "policy file")
        if not isinstance(data, dict):
            raise InputError("policy file is not a mapping", path=str(where))
        sections = {}
        for f in fields(cls):
            if "file" in f.metadata:          # a shipped table: its own file
                table = configs_dir() / f.metadata["file"]
                value = load_yaml(table)
                if not isinstance(value, dict):
                    raise InputError(f"{f.metadata['file']} is not a mapping", path=str(table))
                sections[f.name] = _frozen(value)
                continue
            value = data.get(f.name)
            if not isinstance(value, dict):
                raise InputError(f"policy file: section {f.name!r} is missing or not a mapping",
                                 path=str(where))
            sections[f.name] = _frozen(value)
        return cls(**sections)

    def __getitem__(self, section: str) -> Section:
        """`policy["sizing"]`: the section by name (the spelling the stages were written in)."""
        if section not in self.__dataclass_fields__:
            raise KeyError(section)
        return getattr(self, section)

    def get(self, section: str, default: Any = None) -> Any:
        return getattr(self, section) if section in self.__dataclass_fields__ else default
