"""Stand-ins for a serving engine's layer classes (plain torch, tensor parallel size 1), so
`verify` can build a tiny model from a rewritten vLLM-style file and run one decode step where
the engine is not installed (a CPU machine, CI). Only what a decoder model file builds and calls:
parallel linears returning (output, bias), RMSNorm with a residual, SiluAndMul, rotary
embedding, causal attention over the step's tokens, embeddings and LM head, fused MoE with
`w13_weight` / `w2_weight`. Never used when the real engine imports.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


@contextlib.contextmanager
def vllm_shim():
    """`import vllm...` finds the shim while the block runs, unless vLLM itself is installed
    (then nothing changes). Yields True when the shim is in use."""
    if importlib.util.find_spec("vllm") is not None and "vllm" not in _ours():
        yield False
        return
    sys.path.insert(0, str(HERE))
    try:
        yield True
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(HERE))


def _ours() -> set[str]:
    mod = sys.modules.get("vllm")
    return {"vllm"} if mod is not None and str(HERE) in str(getattr(mod, "__file__", "")) else set()
