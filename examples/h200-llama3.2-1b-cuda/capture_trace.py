"""Capture a REAL PyTorch profiler trace of Llama-3.2-1B-sized decode on a CUDA GPU.

This is how `trace.json.gz` in this folder was produced (on one NVIDIA H200, see meta.json):
transformers' own LlamaForCausalLM with the public Llama-3.2-1B sizes and random bf16 weights
(no weights are downloaded), a 32-token prefill outside the profiler, then decode steps of
`--batch` tokens profiled with `record_shapes=True, with_stack=True`, one `ProfilerStep#N` per
decode step (after one
profiler warm-up step that is not recorded). Nothing here is generated: every duration is measured.

    python capture_trace.py --out DIR [--batch 8] [--steps 4]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import time
from pathlib import Path

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

# Public Llama-3.2-1B config.json sizes (meta-llama/Llama-3.2-1B).
LLAMA_3_2_1B = dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
                    num_key_value_heads=8, head_dim=64, num_hidden_layers=16, vocab_size=128256,
                    tie_word_embeddings=True, max_position_embeddings=131072, rope_theta=500000.0,
                    rms_norm_eps=1e-5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=LLAMA_3_2_1B["num_hidden_layers"])
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = args.device
    torch.manual_seed(0)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    cfg = LlamaConfig(**{**LLAMA_3_2_1B, "num_hidden_layers": args.layers})
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.prompt), device=dev)
    with torch.no_grad():
        res = model(input_ids=ids, use_cache=True)
        past = res.past_key_values
        nxt = res.logits[:, -1:].argmax(-1)
        # Untimed decode warm-up so cuBLAS heuristics and allocator settle.
        for _ in range(3):
            res = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past, nxt = res.past_key_values, res.logits[:, -1:].argmax(-1)
        sync()
        t0 = time.perf_counter()
        for _ in range(10):
            res = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past, nxt = res.past_key_values, res.logits[:, -1:].argmax(-1)
        sync()
        step_ms = (time.perf_counter() - t0) / 10 * 1e3
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        sched = torch.profiler.schedule(wait=0, warmup=1, active=args.steps, repeat=1)
        raw = out / "trace.json"
        with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True,
                                    with_stack=True,
                                    on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(args.steps + 1):
                res = model(input_ids=nxt, past_key_values=past, use_cache=True)
                past, nxt = res.past_key_values, res.logits[:, -1:].argmax(-1)
                sync()
                prof.step()
    with open(raw, "rb") as src, gzip.open(out / "trace.json.gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    meta = {
        "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else platform.processor(),
        "layers": args.layers,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "modeling_llama": str(Path(transformers.__file__).parent / "models/llama/modeling_llama.py"),
        "config": LLAMA_3_2_1B, "batch": args.batch, "prompt": args.prompt,
        "profiled_steps": args.steps, "unprofiled_decode_step_ms": round(step_ms, 3),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    print(json.dumps(meta, indent=2))
    print("trace bytes (gz):", os.path.getsize(out / "trace.json.gz"))


if __name__ == "__main__":
    main()
