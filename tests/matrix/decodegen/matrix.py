"""The labelled matrix of issue 10's tests: GENERATED decode profiles that cover the cases.

Names read <model>-b<batch>-<short|long>-tp<N>-<part>. Together they cover three dense Llama
sizes (3.2-1B, 3.2-3B, 3.1-8B) and one MoE (Qwen3-30B-A3B); decode batch 1 / 8 / 64 / 256;
short context (512 positions: decode attention light by its counters at batch 1, memory-bound
from batch ~8 on the larger heads) and long context (8192: attention memory-bound); tp 1 / 2 / 4;
910B3 and 910B4. Two steps each (the first is warm-up): enough for every
decision, cheap in CI. Batch 256 on 910B3 makes the dense linears compute-bound (M = 256 is above the
ridge, ~184 FLOP/B), on 910B4 (ridge ~307) still memory-bound, and makes the small vector ops
(Add, Mul, Silu, RoPE) memory-bound.
"""

from __future__ import annotations

from . import Spec

SHORT, LONG = 512, 8192

_SHORT_NAMES = {"llama-3.2-1b": "llama1b", "llama-3.2-3b": "llama3b", "llama-3.1-8b": "llama8b",
                "qwen3-30b-a3b": "qwen3moe"}


def name(s: Spec) -> str:
    ctx = "long" if s.context >= LONG else "short"
    return f"{_SHORT_NAMES.get(s.model, s.model)}-b{s.batch}-{ctx}-tp{s.tp}-{s.hardware}"


MATRIX: dict[str, Spec] = {name(s): s for s in (
    Spec("llama-3.2-1b", "910B3", batch=1, context=SHORT, tp=1),
    Spec("llama-3.2-1b", "910B4", batch=8, context=LONG, tp=2),
    Spec("llama-3.2-1b", "910B3", batch=256, context=SHORT, tp=1),
    Spec("llama-3.2-3b", "910B4", batch=1, context=LONG, tp=1),
    Spec("llama-3.2-3b", "910B3", batch=8, context=SHORT, tp=2),
    Spec("llama-3.2-3b", "910B4", batch=64, context=SHORT, tp=4),
    Spec("llama-3.1-8b", "910B3", batch=1, context=SHORT, tp=4),
    Spec("llama-3.1-8b", "910B3", batch=64, context=LONG, tp=2),
    Spec("llama-3.1-8b", "910B4", batch=256, context=SHORT, tp=1),
    Spec("qwen3-30b-a3b", "910B3", batch=1, context=SHORT, tp=1),
    Spec("qwen3-30b-a3b", "910B4", batch=8, context=LONG, tp=1),
    Spec("qwen3-30b-a3b", "910B3", batch=256, context=SHORT, tp=1),
)}
