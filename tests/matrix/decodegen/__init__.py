"""decodegen: GENERATED (not measured) Ascend decode profiles, and what each one is by construction.

The project's own test generator for the decision engine (issue 10). It writes torch_npu Level1 +
PipeUtilization exports (`kernel_details.csv` + `trace_view.json` call stacks) of one rank of a
real model's decode step, and returns the truth the tests hold the tool against. It imports
nothing from cannbot_prefetch: durations and counters come from physics.py's stated formula.

API (put `tests/matrix` on sys.path; tests/conftest.py does):

    from decodegen import Spec, generate, MATRIX
    g = generate(Spec("llama-3.2-3b", hardware="910B4", batch=8, context=4096, tp=2), tmp_path)
    g.profile            # the *_ascend_pt folder       -> analyze PROFILE
    g.config_path        # config.json (real values)     -> --model-config
    g.model_src          # the modeling file the call-stack lines were taken from
    g.ops                # one decode step's ops, in order (ops.Op: type, role, layer, shapes,
                         #   pipes, verdict, memory_bound, weight, frames)
    g.linears            # role -> truth.Linear (weight shape/bytes, calls_per_step, verdict)
    g.layers             # num_hidden_layers
    g.placed_windows(Placement(...))   # layer -> ops a prefetch placed there would overlap
    truth.smallest_window(g.ops, g.lines, i)   # the smallest window any insertion gives op i
    MATRIX               # name -> Spec: the labelled matrix of issue 10's tests (matrix.py)

Spec fields: model (a key of configs.CONFIGS: llama-3.2-1b, llama-3.2-3b, llama-3.1-8b,
qwen3-30b-a3b), hardware (910B3 | 910B4), batch (sequences, one token each), context (KV length
attention reads), tp (tensor-parallel ranks; rank 0 is written), steps (the first is warm-up,
x1.3), seed (jitter only: verdicts never depend on it), model_src (the modeling file to take
frame lines from: default transformers' installed one, found without importing it).

Deterministic: the same Spec (and model source) gives the same bytes. Module map: configs.py
(real config.json values, with sources), ops.py (the op sequence, TP sharding, MoE routing),
physics.py (the formula and counters), source.py (frame lines by text search), export.py (the
folder), truth.py (verdicts, linears, placed windows), matrix.py (the matrix). README.md beside.
Command line: `PYTHONPATH=tests/matrix python -m decodegen --help`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from . import configs as C
from . import physics as P
from .export import Kernel, timeline, write_folder
from .ops import Op, model_of, step_ops
from .source import Lines, installed_source
from .truth import Linear, Placement, PlacementError, linears, placed_windows

__all__ = ["Spec", "Generated", "generate", "Placement", "PlacementError", "Linear", "MATRIX",
           "write_config"]


@dataclass(frozen=True)
class Spec:
    model: str
    hardware: str = "910B3"
    batch: int = 1
    context: int = 1024
    tp: int = 1
    steps: int = 3
    seed: int = 0
    model_src: str | None = field(default=None, compare=False)
    order: str = "hf"        # hf (Python's evaluation order) | graph (ops.py)
    stacks: bool = True      # False: no trace_view.json, so no call stacks (issue 30)

    @property
    def label(self) -> str:
        return (f"GENERATED {self.model} decode batch {self.batch} context {self.context} "
                f"tp {self.tp} on {self.hardware}, {self.steps} steps, seed {self.seed}"
                + (f", {self.order} order" if self.order != "hf" else "")
                + ("" if self.stacks else ", no call stacks"))

    @property
    def model_type(self) -> str:
        return C.config(self.model)["model_type"]


@dataclass(frozen=True)
class Generated:
    spec: Spec
    profile: Path
    config_path: Path
    model_src: Path
    ops: tuple[Op, ...]
    kernels: tuple[Kernel, ...]
    lines: Lines = field(repr=False)

    @cached_property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_path.read_text(encoding="utf-8"))

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @cached_property
    def linears(self) -> dict[str, Linear]:
        return linears(self.ops)

    def placed_windows(self, placement: Placement) -> dict[int | None, list[Op]]:
        return placed_windows(self.ops, self.lines, placement)


def write_config(model: str, path: str | Path) -> Path:
    return C.write_config(model, path)


def generate(spec: Spec, out_dir: str | Path) -> Generated:
    """Write `out_dir/config.json` and `out_dir/<...>_ascend_pt/`; return what they are."""
    out = Path(out_dir)
    cfg = C.config(spec.model)
    hw = P.part(spec.hardware)
    ops = tuple(step_ops(cfg, hw, batch=spec.batch, context=spec.context, tp=spec.tp,
                         order=spec.order))
    src = Path(spec.model_src) if spec.model_src else installed_source(cfg["model_type"])
    lines = Lines(src)
    kernels = tuple(timeline(ops, spec.steps, spec.seed))
    mt = model_of(cfg).model_type
    model_file = f"/usr/local/lib/python3.10/site-packages/transformers/models/{mt}/modeling_{mt}.py"
    config_path = C.write_config(spec.model, out / "config.json")
    root = write_folder(out, kernels, hw, lines, model_file, spec.label, spec.steps, spec.stacks)
    return Generated(spec, root, config_path, src, ops, kernels, lines)


from .matrix import MATRIX  # noqa: E402  (matrix.py needs Spec)
