"""Shared command line of the examples' make_profile.py scripts.

    python examples/<example>/make_profile.py [--hardware 910B3|910B4] [--out DIR] [--layers N]
                                              [--steps N] [--decode-tokens N] [--model-src PATH]

writes DIR/<host>_<pid>_<ts>_ascend_pt/ (replacing a previously GENERATED one there) and
DIR/GENERATED.txt. Default DIR: the example's profile/ (910B3) or profile-910b4/ (910B4).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import timing as T
from . import writer as W


def _is_generated(folder: Path) -> bool:
    meta = folder / "profiler_metadata.json"
    try:
        return "synthetic" in json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def generated_note(example: str, options: Mapping[str, Any], hardware: str) -> str:
    hw = T.hardware(hardware)
    opts = ", ".join(f"{k}={v!r}" for k, v in sorted(options.items()))
    flag = "" if hw.name == "910B3" else f" --hardware {hw.name}"
    return (
        "GENERATED PROFILE - NOT MEASURED\n"
        "================================\n"
        f"Example: {example}. Written by examples/synth (writer.generate) from the documented torch_npu\n"
        f"Level1 + PipeUtilization export format and the model's sizes in examples/{example}/config.json.\n"
        "No NPU ran this model. Durations come from one formula (examples/synth/timing.py):\n\n"
        "    dur_us = max(t_compute / 0.6, t_memory / 0.7) + 3.0    (then x(1 +- 2%) jitter;\n"
        "    t_compute = FLOPs / peak, t_memory = bytes / HBM bandwidth    first step x1.25 warm-up)\n\n"
        f"Hardware numbers used: {hw.name}: {hw.cube_cores} cube / {hw.vector_cores} vector cores, "
        f"{hw.mhz} MHz,\n{hw.bf16_tflops} bf16 TFLOPS, HBM {hw.hbm_tbps} TB/s (REFERENCE.md 4.1 default column).\n"
        f"Options: {opts}\n"
        f"Regenerate: python examples/{example}/make_profile.py{flag} (see its README.md). Tests check the\n"
        "committed files equal a "
        "fresh regeneration byte for byte.\n"
    )


def run(example_dir: Path, options: Mapping[str, Any], argv: Sequence[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=f"Regenerate the GENERATED profile of {example_dir.name}")
    ap.add_argument("--hardware", default="910B3", choices=sorted(T.HARDWARE))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--layers", type=int, default=None, help="emit the first N decoder layers")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--decode-tokens", type=int, default=None, help="decode batch (tokens per step)")
    ap.add_argument("--model-src", type=Path, default=None,
                    help="model source file to take call-site lines from (default: the pinned table)")
    a = ap.parse_args(argv)
    opts = dict(options)
    for key in ("layers", "steps", "decode_tokens"):
        if getattr(a, key) is not None:
            opts[key] = getattr(a, key)
    if a.model_src is not None:
        opts["model_src"] = str(a.model_src)
    out = a.out or example_dir / ("profile" if a.hardware == "910B3" else f"profile-{a.hardware.lower()}")
    return write_example(example_dir, out, a.hardware, opts)


def write_example(example_dir: Path, out: Path, hardware: str, opts: Mapping[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*_ascend_pt"):
        if old.is_dir() and _is_generated(old):
            shutil.rmtree(old)
    root = W.generate(example_dir / "config.json", out, hardware=hardware, label=example_dir.name, **opts)
    note_opts = {k: v for k, v in opts.items() if k != "model_src"}
    (out / "GENERATED.txt").write_text(generated_note(example_dir.name, note_opts, hardware), encoding="utf-8")
    print(f"wrote {root}")
    return root


__all__ = ["run", "write_example", "generated_note"]
