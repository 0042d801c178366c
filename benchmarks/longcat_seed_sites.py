"""Sweep: seed 003's seven LongCat-Flash sites planned on the real model source (issue 30 part 3).

Not part of CI (needs a checkout of hicann/cann-recipes-infer, which is never copied into this
repository). The model files are copied to a temporary folder, the experts' own
`npu_prefetch(...)` statements are replaced by `pass` there (the tool plans on the model without
them; otherwise it refuses a weight "already prefetched by code the tool did not write"), and
`analyze` plans each seed row in manual mode twice: with the seed's dependency named as the value
the experts pass (`--window o_proj`) and as the module whose output it is
(`--window LongcatFlashAttention.o_proj`). The table printed is the one in docs/planning.md.

    python benchmarks/longcat_seed_sites.py --recipes /path/to/cann-recipes-infer [--json out.json]

`--recipes` may be a work tree or a bare git directory (read with `git archive HEAD`).

config.json: LongCat-Flash-Chat's published dimensions (huggingface.co/meituan-longcat/
LongCat-Flash-Chat, config.json: hidden 6144, ffn 12288, expert ffn 2048, 28 layers, 512 routed +
256 zero experts, top-12, q_lora 1536, kv_lora 512), bf16 weights.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = {"model_type": "longcat_flash", "hidden_size": 6144, "ffn_hidden_size": 12288,
          "expert_ffn_hidden_size": 2048, "num_layers": 28, "num_attention_heads": 64,
          "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
          "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 512,
          "zero_expert_num": 256, "moe_topk": 12, "vocab_size": 131072,
          "routed_scaling_factor": 6.0, "router_bias": False, "norm_topk_prob": False,
          "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}

# seed 003 "LongCat-Flash 实际使用模式": (row, --target, the experts' dependency as a value,
# as the module whose output it is, where the experts put it)
SEED = [
    ("router.classifier <- o_proj output", "LongcatFlashDecoderLayer.mlp.router.classifier",
     "o_proj", "LongcatFlashAttention.o_proj", "modeling L1387, dep o_proj"),
    ("gate_up_proj <- o_proj output", "LongcatFlashMLP.gate_up_proj",
     "o_proj", "LongcatFlashAttention.o_proj", "MLP.forward_prefetch L215, dep o_proj"),
    ("down_proj <- gate_up_proj input x", "LongcatFlashMLP.down_proj",
     "x", "x", "MLP.forward_w8a8int8 L271, dep x"),
    ("q_a_proj (next layer) <- down_proj output", "LongcatFlashAttention.q_a_proj",
     "down_proj", "LongcatFlashMLP.down_proj", "DecoderLayer L1474, next_layer, dep down_proj"),
    ("q_b_proj (next layer) <- down_proj output", "LongcatFlashAttention.q_b_proj",
     "down_proj", "LongcatFlashMLP.down_proj", "DecoderLayer L1476, next_layer, dep down_proj"),
    ("kv_a_proj (next layer) <- down_proj output", "LongcatFlashAttention.kv_a_proj_with_mqa",
     "down_proj", "LongcatFlashMLP.down_proj", "DecoderLayer L1478, next_layer, dep down_proj"),
    # the seed's "实际取值参考" rows L1259-1261: the second attention's weights at the first
    # dense MLP's output `dsq`, in the same layer
    ("self_attn[1].q_a_proj <- dense MLP output", "LongcatFlashDecoderLayer.self_attn[1].q_a_proj",
     "dsq", "dsq", "DecoderLayer L1431, dep dsq"),
    ("self_attn[1].q_b_proj <- dense MLP output", "LongcatFlashDecoderLayer.self_attn[1].q_b_proj",
     "dsq", "dsq", "DecoderLayer L1432, dep dsq"),
    ("self_attn[1].kv_a_proj <- dense MLP output",
     "LongcatFlashDecoderLayer.self_attn[1].kv_a_proj_with_mqa", "dsq", "dsq",
     "DecoderLayer L1433, dep dsq"),
    ("experts.w2_weight <- router_logits", "LongcatFlashFFN.experts.w2_weight",
     "router_logits", "LongcatFlashTopkRouter.classifier", "ffn.py L178, dep router_logits"),
    ("router.classifier (next layer) <- gmm2_out", "LongcatFlashFFN.router.classifier",
     "gmm2_out", "FusedMoEGMM.w2_weight", "FFNModel L285, layers[i+1], dep gmm2_out"),
    ("experts.w13_weight (next layer) <- gmm2_out", "LongcatFlashFFN.experts.w13_weight",
     "gmm2_out", "FusedMoEGMM.w2_weight", "FFNModel L287, layers[i+1], dep gmm2_out"),
]
PARTS = ("models/longcat_flash", "module", "executor")


def copy_recipes(src: Path, dst: Path) -> None:
    if (src / "HEAD").is_file() and not (src / "models").exists():      # a bare git directory
        tar = subprocess.run(["git", f"--git-dir={src}", "archive", "HEAD", *PARTS],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=tar, check=True)
    else:
        for p in PARTS:
            shutil.copytree(src / p, dst / p)
    (dst / "setup.py").write_text("")       # the project root the tool reads imports under


def strip_prefetches(path: Path) -> int:
    """Replace each `npu_prefetch(...)` expression statement by `pass` (same lines kept)."""
    code = path.read_text()
    lines = code.splitlines(keepends=True)
    hits = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "npu_prefetch"]
    for n in sorted(hits, key=lambda n: -n.lineno):
        first = lines[n.lineno - 1]
        indent = first[:len(first) - len(first.lstrip())]
        lines[n.lineno - 1:n.end_lineno] = [f"{indent}pass\n"] + ["\n"] * (n.end_lineno - n.lineno)
    path.write_text("".join(lines))
    return len(hits)


def plan_one(root: Path, target: str, window: str) -> dict:
    from cannbot_prefetch import api
    from cannbot_prefetch.errors import InputError
    try:
        res = api.analyze(None, model_src=str(root / "models/longcat_flash/models"),
                          model_config=str(root / "config.json"), targets=(target,),
                          window=(window,), out=str(root / "out"))
    except InputError as exc:
        return {"error": str(exc)}
    doc = res.to_json()
    if doc.get("rejections"):
        return {"error": doc["rejections"][0]["reason"]}
    res.save()
    from cannbot_prefetch.plan import load_plan
    site = load_plan(root / "out" / "prefetch_plan.yaml").sites[0]
    return {"weight": site.target.weight_expr, "scope": site.target.scope,
            "dependency": site.dependency,
            "insert": f"{site.insert.cls}.{site.insert.method} {site.insert.position} "
                      f"{site.insert.anchor_call}", "max_size": site.max_size}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", required=True, type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        copy_recipes(args.recipes, root)
        (root / "config.json").write_text(json.dumps(CONFIG))
        mdir = root / "models/longcat_flash/models"
        stripped = {p.name: strip_prefetches(p) for p in mdir.glob("*.py")}
        print(f"experts' npu_prefetch statements replaced by pass: {stripped}", file=sys.stderr)
        for row, target, value, module, experts in SEED:
            rows.append({"row": row, "target": target, "experts": experts,
                         "by_value": plan_one(root, target, value),
                         "by_module": plan_one(root, target, module)})
    for r in rows:
        for key in ("by_value", "by_module"):
            got = r[key]
            desc = got.get("error") or (f"{got['weight']} dep {got['dependency']} | "
                                         f"{got['insert']} | {got['max_size']} B")
            print(f"| {r['row']} | {r['experts']} | {key} | {desc} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
