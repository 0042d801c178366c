"""Sweep: plan and apply prefetches on every decoder family of a vLLM release's model directory.

Not part of CI (minutes of CPU). The wheel is fetched into a cache outside the repository at run
time (`pip download vllm==VERSION --no-deps`); nothing of it is copied into the repository. For
every `vllm/model_executor/models/*.py` that defines a `*ForCausalLM` class:

1. list, with the standard library's `ast` (not the tool's evaluator), every attention and
   MLP/MoE linear its classes build: `self.X = <vLLM layer>(...)` for the layer classes below,
   `self.X = FusedMoE...(...)` as `X.w13_weight` / `X.w2_weight`, each as `Class.attr`;
2. `cannbot prefetch analyze --model-src <tmp copy> --model-config <tiny config> --tp 2
   --moe-tp 2 --target ...` (manual mode) as a user would run it (a target the tool refuses with
   exit 2, named in its message, is dropped and analyze run again without it, the refusal
   listed), then `apply --write --yes`;
3. compile the rewritten file (parse), then import it with cannbot-prefetch's vLLM shim
   (`verify/shims`) as `vllm.model_executor.models.<stem>` in a fresh process with
   `CANNBOT_PREFETCH=1` (a module or name the shim does not provide: the import step says which);
4. check TP-2 shard sizes of the canonical linears against vLLM's split rules, worked out here
   from the tiny config (qkv_proj: (heads/2 + 2*max(kv/2, 1)) * head_dim x hidden; o_proj:
   hidden x heads*head_dim/2; gate_up_proj: 2*I/2 x hidden; down_proj: hidden x I/2; experts
   w13 [E, 2*I_moe/2, hidden], w2 [E, hidden, I_moe/2]; GateLinear gate [E, hidden]).

5. count each planned site's window: its plan notes name the calls it holds, or warn that it
   holds none (manual mode must never plan a zero-op window silently);
6. `--verify` (default: the issue's six families): `cannbot prefetch verify --factory` with a
   generated factory that builds the wheel's rewritten `*ForCausalLM` at TP 1 under the shim
   (outputs off == on, and `CANNBOT_PREFETCH=1` alone on a fresh model firing every site).

A family passes when at least one of its attention and one of its MLP/MoE linears outside vision
and audio towers are planned and applied, the rewrite parses, and every checked shard size is
right. Only decoder families are counted (`decoder_family`; docs/limitations.md says what is
not). Each target the tool does not plan is listed with the tool's reason.

    nice -n 10 python benchmarks/vllm_sweep.py [--version 0.34.0] [--cache /work/cache/vllm] \
        [--families llama,qwen2] [--verify all|none|llama,qwen2] [--jobs 2] [--json sweep.json]

The last lines count issue 32's Done-when metric: decoder families planned, applied AND
verified ok, of all counted decoder families, with the verify failures grouped by reason
(`done_when`; the JSON's `done_when`). `--jobs N` runs N families at a time.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

# vLLM's layer classes (vllm/model_executor/layers/linear.py, fused_moe/, vocab_parallel_embedding)
LINEAR_LAYERS = {"ColumnParallelLinear", "MergedColumnParallelLinear", "QKVParallelLinear",
                 "RowParallelLinear", "ReplicatedLinear", "GateLinear"}
MOE_LAYERS = {"FusedMoE", "FusedMoEFactory", "SharedFusedMoE"}
ATTN_WORDS = ("attn", "attention", "qkv", "q_proj", "o_proj", "kv_")
# one tiny config for every family: the keys vLLM's decoder files read (values small, heads and
# kv heads such that TP 2 splits both)
TINY = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 32, "num_hidden_layers": 2, "vocab_size": 512,
        "rms_norm_eps": 1e-6, "layer_norm_eps": 1e-5, "norm_eps": 1e-6, "hidden_act": "silu",
        "max_position_embeddings": 256, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
        "num_experts": 8, "num_local_experts": 8, "n_routed_experts": 8, "moe_num_experts": 8,
        "num_experts_per_tok": 2, "moe_topk": 2, "moe_intermediate_size": 128,
        "n_shared_experts": 1, "shared_expert_intermediate_size": 128, "first_k_dense_replace": 1,
        "num_dense_layers": 1,
        "moe_layer_freq": 1, "decoder_sparse_step": 1, "mlp_only_layers": [0],
        "q_lora_rank": 64, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
        "v_head_dim": 32, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
        "attention_bias": False, "tie_word_embeddings": False, "partial_rotary_factor": 1.0,
        "ffn_hidden_size": 512, "multi_query_group_num": 4, "kv_channels": 32,
        "num_layers": 2, "padded_vocab_size": 512, "n_head": 8, "n_embd": 256, "n_layer": 2,
        "n_inner": 512, "layer_types": ["full_attention", "full_attention"],
        "global_head_dim": 32, "block_dim": 256, "conv_dim": 256,
        "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 32,
        "top_k_experts": 2}
# (global_head_dim: gemma4's full-attention layers; block_dim / conv_dim: lfm2's MLP and conv
# widths, None in transformers' Lfm2Config defaults; swa_*: mimo_v2's sliding-window layers,
# a family transformers does not know: each set to the tiny width it stands for; num_dense_layers:
# first_k_dense_replace as lfm2_moe and afmoe spell it, 2 in Lfm2MoeConfig: no MoE layer at 2;
# top_k_experts: gemma4's name for num_experts_per_tok, None in Gemma4TextConfig's defaults)
# keys of remote-code configs (no class in transformers or vLLM) that the Bailing / Ling files
# (bailing_moe, bailing_moe_linear, bailing_moe_v3) and sarvam read without a default, for a
# family transformers does not know: each the tiny value of the standard key it stands for
# (attention_bias, n_shared_experts, shared_expert_intermediate_size); layer_group_size 2: of the
# two tiny layers, the first linear attention, the second full attention (bailing_moe_linear's
# `is_linear_layer`: (i + 1) % layer_group_size != 0)
REMOTE_TINY = {"use_bias": False, "use_qkv_bias": False, "num_shared_experts": 1,
               "moe_shared_expert_intermediate_size": 128, "layer_group_size": 2,
               "embedding_dropout": 0.0}
# keys of TINY that name a kind, not a size: a family transformers knows keeps its class's own
KIND_KEYS = ("hidden_act",)
# layer kinds (transformers' names) of state-space / linear-attention mixers (`_mixer_layers`)
MIXER_KINDS = ("linear_attention", "mamba", "conv", "hybrid")
PURE_MIXERS = {"linear_attention", "mamba", "conv"}       # kinds whose layer holds no attention
# keys a family's released config.json carries that no config class here defines (transformers
# has no class for the family, or its class renames or drops them) and vLLM's file reads
# directly (`config.X`): no rule derives their values, so each family's are named, with where
# they come from, and given to that family only (`_released`)
RELEASED_KEYS = {
    # meituan-longcat/LongCat-Flash-Chat config.json: both LoRA norms scaled, identity "zero"
    # experts; transformers' LongcatFlashConfig defines neither
    "longcat_flash": {"mla_scale_q_lora": True, "mla_scale_kv_lora": True,
                      "zero_expert_type": "identity"},
    # openbmb/MiniCPM-2B config.json (remote code; transformers ships no MiniCPMConfig):
    # embedding scale 12, logits scaled by hidden / 256 (256 is TINY's hidden too), depth 1.4
    "minicpm": {"scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4},
    # MiniMaxAI/MiniMax-M2 config.json: rotary on half the head (64 of 128: 16 of TINY's 32),
    # sigmoid routing; transformers' MiniMaxM2Config stores neither
    "minimax_m2": {"rotary_dim": 16, "scoring_func": "sigmoid"},
    # XiaomiMiMo/MiMo-V2-Flash's config.json names (transformers' MiMoV2FlashConfig renames
    # them): the norm epsilon (TINY's rms_norm_eps), a 128-token window, and one full and one
    # sliding-window layer (1 = sliding, mimo_v2.py `hybrid_layer_pattern[layer_id] == 1`)
    "mimo_v2": {"layernorm_epsilon": 1e-6, "sliding_window_size": 128,
                "hybrid_layer_pattern": [0, 1]},
    # allenai/Molmo-7B-D-0924 config.json (remote code): RMS norms before each block, no q/k
    # norm, qkv with bias, the embedding as wide as the vocabulary (TINY's), an untied head
    "molmo": {"attention_layer_norm": False, "layer_norm_type": "rms", "norm_after": False,
              "qkv_bias": True, "embedding_size": 512, "weight_tying": False},
    # hy_v3.py reads `config.expert_hidden_dim` as its experts' width (transformers' HYV3Config
    # calls it `moe_intermediate_size`; vLLM's own configs/mistral.py maps the two names to each
    # other) and `config.route_norm` as FusedMoE's `renormalize`
    "hy_v3": {"expert_hidden_dim": TINY["moe_intermediate_size"], "route_norm": True},
    # stepfun-ai/step3's config.json gives its MoE layers as comma-separated text, which
    # step3_text.py splits (`moe_layers_enum.strip().split(",")`); vLLM's own Step3TextConfig
    # declares a tuple default instead. Tiny: layer 1 of the 2 is MoE, layer 0 dense
    "step3_text": {"moe_layers_enum": "1"},
    # transformers' AfmoeTokenChoiceRouter (models/afmoe/modeling_afmoe.py): sigmoid scores,
    # top-k renormalised, "matching the released checkpoints"; AfmoeConfig has neither key
    "afmoe": {"score_func": "sigmoid", "route_norm": True},
    # databricks/dbrx-instruct config.json: attn_config {"kv_n_heads", "rope_theta", "clip_qkv"};
    # transformers 5 moved rope_theta out of DbrxAttentionConfig (TINY's theta, 10000)
    "dbrx": {"attn_config": {"rope_theta": TINY["rope_theta"]}},
    # THUDM/chatglm3-6b config.json: "original_rope": true (chatglm.py: only cogagent-9b sets
    # it false); vLLM's ChatGLMConfig does not declare it
    "chatglm": {"original_rope": True},
    # ernie45_vl_moe.py reads baidu's flat ERNIE-4.5-VL config (remote code): per modality
    # (text, vision) the first and last MoE layer, and the image patch token. Tiny stand-ins:
    # MoE from layer TINY["first_k_dense_replace"] to the last layer (the file's own fallback
    # for the end, `[num_hidden_layers - 1] * 2`); the patch token is transformers'
    # Ernie4_5_VLMoeConfig.image_token_id default (100295)
    "ernie45_vl_moe": {"moe_layer_start_index": [TINY["first_k_dense_replace"]] * 2,
                       "moe_layer_end_index": [TINY["num_hidden_layers"] - 1] * 2,
                       "im_patch_id": 100295},
    # bailing_moe_v3.py's KDA mixer refuses any layout but `no_kda_lora: True` (it raises
    # "BailingMoeV3 KDA currently expects no_kda_lora=True"), so every checkpoint vLLM 0.34
    # serves with it sets the key; neither transformers nor vLLM ships its config class
    "bailing_moe_v3": {"no_kda_lora": True},
    # gemma4_dspark's draft config (its DSpark checkpoint's; no class here defines it): the
    # target layers whose hidden states it reads (tiny: both of TINY's 2 layers), its Markov
    # head's rank (tiny, chosen here below TINY's hidden 256, as dflash_config's ranks are),
    # every layer full attention (Gemma4TextConfig forces the last one full; TINY sets no
    # window), and gemma4.py's MLP activation, read through `_get_text_config(config)` where
    # `_config_reads` does not see it: Gemma4TextConfig's default (transformers 5.25)
    "gemma4_dspark": {"target_layer_ids": list(range(TINY["num_hidden_layers"])),
                      "markov_rank": 16,
                      "layer_types": ["full_attention"] * TINY["num_hidden_layers"],
                      "hidden_activation": "gelu_pytorch_tanh"},
    # domyn_edge.py reads the per-layer keys of Domyn-Edge's config (domyn/Domyn-Edge-Base;
    # neither transformers nor vLLM has its class): each layer's position scheme ("rope" |
    # "nope", the file's match), sliding window (HF (w, 0); 0: none), and head_dim through
    # transformers' heterogeneous configs (`per_layer_config`: layer index -> overrides, read
    # as `config.per_layer_config[i].head_dim`). Tiny stand-ins: every layer rope, no window,
    # TINY's head_dim
    # alice_ai.py's AttnRes grouping (`get_attn_res_block_size`: a positive int, else it
    # raises); neither transformers nor vLLM 0.34 has AliceAI's config class and no released
    # config.json is at hand. Tiny stand-in 1: layer 1 of TINY's 2 closes a block, so both
    # paths of `forward_attn_res` (finalising a block, continuing one) run
    "alice_ai": {"block_attn_res_block_size": 1},
    "domyn_edge": {"position_layers": ["rope"] * TINY["num_hidden_layers"],
                   "window_sizes": [[0, 0]] * TINY["num_hidden_layers"],
                   "per_layer_config": {str(i): {"head_dim": TINY["head_dim"]}
                                        for i in range(TINY["num_hidden_layers"])}},
    # step3p5.py asserts a router bias and float32 router logits, and reads the top-k
    # renormalisation flag; transformers' class for the model type (Step3p7TextConfig) stores
    # none of the three because its router (Step3p7TopKRouter, models/step3p7/
    # modeling_step3p7.py) always has them: a score-correction bias, sigmoid scores in float32,
    # the top-k weights renormalised. (vLLM's own step5.py config declares the first two False:
    # another family's defaults, so they are set here)
    "step3p5": {"use_moe_router_bias": True, "need_fp32_gate": True,
                "norm_expert_weight": True},
    # nemotron_parse3_5.py refuses any other value of its three switches (a causal visual
    # prefix, no cross-attention, packed images: "Parse 3.5 requires ..."); its RADIO encoder
    # config (remote code) is read for `args` (vLLM's RadioConfig parameters, `args["model"]`
    # naming the ViT in RadioConfig's table) and `patch_size`. The ViT is the huge one with
    # 16-pixel patches: the file's neck defaults to its width (vision_spatial_dim 1280, a
    # 3 x 1280 summary) and Nemotron-Parse-1.1's 885M parameters less its 256M decoder
    # (arXiv 2511.20478) are ViT-H's ~630M. The encoder is a tower, built on the meta device
    # and never run by a text step; `model_type` marks it a sub-config (`_config` types it).
    # The image size is a (height, width) pair (`tuple(config.image_size)`): vLLM's
    # RadioConfig's default side, 224, for both
    "nemotron_parse3_5": {"navit_packing": True, "image_size": [224, 224],
                          "decoder": {"causal_vision_prefix": True,
                                      "add_cross_attention": False},
                          "encoder": {"model_type": "", "patch_size": 16,
                                      "args": {"model": "vit_huge_patch16_224"}}},
    # IFM/K2-Horizon-MoVA-36B-A4B config.json (remote code; neither transformers nor vLLM has
    # its class; the file as quoted whole by hipfire's K2-Horizon config parser test): MoVA
    # attention on the MoE layers, 64 value experts 4 per token (tiny: TINY's 8 and 2), a
    # softplus output gate, RMS norms in 2 groups (256 splits in 2), full rotary (rope_head_dim
    # 128 = head_dim: TINY's 32), no q/k norm, a router bias, sigmoid scores scaled by 2.5
    "k2_horizon": {"mova_num_experts": TINY["num_experts"],
                   "mova_num_experts_per_tok": TINY["num_experts_per_tok"],
                   "attention_gate_func": "softplus", "layernorm_num_groups": 2,
                   "rope_head_dim": TINY["head_dim"], "query_key_norm": False,
                   "moe_gate_bias": True, "router_score_func": "sigmoid",
                   "router_scaling_factor": 2.5},
}
# keys the files of families transformers does not know (remote-code configs) read unguarded
# (`config.X`), which neither TINY nor vLLM's own config classes supply: one value per key, for
# any file that reads it. No general rule gives these (no class defines them to read a default
# from); each value says where it comes from
REMOTE_KEYS = {
    # FusedMoE's `renormalize` in openpangu; transformers' Qwen3MoeConfig default
    "norm_topk_prob": True,
    # rnj1 scales queries by its -0.5 power; Gemma2's released configs set it to head_dim
    "query_pre_attn_scalar": TINY["head_dim"],
    # solar's skip connections (Upstage's remote-code config): the layers that save (1, 2) and
    # blend in (3, 4) the hidden states, at layer 1 of the 2 tiny ones so every path runs
    # (layer 0 has no residual yet to save); `bskcn_tv` the (training, inference) weights
    "bskcn_1": [1], "bskcn_2": [1], "bskcn_3": [1], "bskcn_4": [1], "bskcn_tv": [0.9, 0.8],
    # rnj1's MLP accepts only this activation (it raises otherwise); Gemma3TextConfig's default
    "hidden_activation": "gelu_pytorch_tanh",
    # rnj1's logits soft cap; Gemma3TextConfig's default (none)
    "final_logit_softcapping": None,
    # rnj1's window for "sliding_attention" layers (TINY's layer_types has none); Gemma3's 4096
    "sliding_window": 4096,
    # plamo3's per-layer window (vLLM's loader renames a per-layer `sliding_window` list to
    # it): None for each of TINY's layer_types, both full attention; its local rope base (read
    # for sliding layers only) TINY's rope_theta
    "interleaved_sliding_window": [None] * TINY["num_hidden_layers"],
    "rope_local_theta": TINY["rope_theta"],
    # qwen3_dflash2's draft settings (its checkpoint's `dflash_config`; the keys it indexes):
    # tiny sizes chosen here, the conv group dividing TINY's hidden 256, its taps not above
    # the factory step's 2 tokens (the CPU path pads by the tap), the selector's top-k below
    # its rank
    "dflash_config": {"conv_kernel_size": 2, "conv_group_size": 32, "selector_rank": 16,
                      "selector_top_k": 4},
}
TP = 2
ENV = "CANNBOT_PREFETCH"
# `--jobs`: the tiny configs are made one at a time in the sweep's own process (made in two
# threads at once, transformers' lazy auto mappings gave llama.py an exaone config and
# deepseek_v2.py TINY alone, without its class's norm_topk_prob: verify then failed)
CONFIG_LOCK = threading.Lock()
MODELS_PKG = "vllm.model_executor.models"
# the families issue 32 names: verified (built under the shim, every site firing) by default
NAMED = ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v2")
NO_LINEARS = "no vLLM linear layer built in its classes"
# the sub-config of a multimodal config that holds its text decoder's keys
TEXT_SUBCONFIGS = ("text_config", "language_config", "llm_config")
# a class of a vision or audio tower (by its name): its linears are swept and
# listed, but they do not make the file a decoder family (docs/limitations.md, "Serving engines'
# model files": what counts)
TOWER_WORDS = ("vision", "visual", "audio", "patch", "merger", "vit", "clip", "siglip", "radio",
               "encoder", "projector")
# how many levels of sibling imports a family's copy carries: the tool follows imports of
# imports 3 levels deep (mapping/source.py load_model_source `follow_imports`)
SIBLING_DEPTH = 3
FOLDER_HINT = "give --model-src a folder that holds it"   # mapping/place.py's advice
NOT_DECODER = "no decoder linear of its own (its decoder is another family's file)"
# vLLM's own config classes (families transformers does not know: moondream3's
# Moondream3TextConfig), unpacked from the wheel beside the model files and read with `ast`
VLLM_CONFIGS = "vllm/transformers_utils/configs"


def wheel_models(version: str, cache: Path) -> Path:
    """vllm/model_executor/models of the wheel, fetched and unpacked into the cache once (with
    vLLM's own config classes, `VLLM_CONFIGS`, read by `_vllm_config_keys`)."""
    out = cache / f"x-{version}"
    models = out / "vllm" / "model_executor" / "models"
    if models.is_dir() and (out / VLLM_CONFIGS).is_dir():
        return models
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps",
                        "-d", str(cache)], check=True)
        wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        for n in z.namelist():
            if n.startswith(("vllm/model_executor/models/", VLLM_CONFIGS + "/")) and \
                    n.endswith(".py"):
                z.extract(n, out)
    return models


def families(models: Path, only: set[str] | None) -> list[Path]:
    out = []
    for f in sorted(models.glob("*.py")):
        if only and f.stem not in only:
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ClassDef) and n.name.endswith("ForCausalLM") for n in tree.body):
            out.append(f)
    return out


def _callee(node: ast.AST) -> str:
    f = node.func if isinstance(node, ast.Call) else None
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def targets(src: Path, follow: bool = True, only_own: bool = False) -> dict[str, str]:
    """Class.attr -> the vLLM layer it is built with, for every class but the model wrappers
    (an MLP class imported from another family's file: `Layer.mlp.gate_up_proj`). With `follow`,
    a class's build is read as Python runs it: its `__init__` (inherited when it has none), a
    base's `__init__` it calls through `super().__init__(...)` and the `self._method()` calls
    made on the way, each resolved through the class's bases in this file or a sibling family's
    file (minicpm3's decoder layer: minicpm.py's `__init__` calls `self._init_ffn_block()`, which
    builds `self.mlp = MiniCPMMLP(...)`; nemotron_nas's `DeciLMAttention(LlamaAttention)`: its
    linears are built by llama.py's `__init__`). `only_own`: only the assignments this file's own
    code makes (nemotron_nas's `self.mlp = LlamaMLP(...)`, not llama.py's `self.qkv_proj`)."""
    tree = ast.parse(src.read_text(encoding="utf-8"))
    imported = _imported_classes(src, tree) if follow else {}
    out: dict[str, str] = {}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}   # built, or handed on
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if cls.name.endswith(("ForCausalLM", "Model")):
            continue
        if follow and cls.name not in used:
            continue       # defined but never built in its own file (mistral's MistralMLP)
        if not follow:
            init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                         and m.name == "__init__"), None)
            for node in ast.walk(init) if init else ():
                _record(out, cls.name, node, imported)
            continue
        for body_file, fn in _build_bodies(src, tree, cls):
            if only_own and body_file != src:
                continue
            # a sibling's body builds its own classes and those it imports from a third file
            # (qwen3_dflash2's layer: qwen3_dflash.py's __init__ builds `Qwen3MLP`, qwen2.py's)
            classes = imported if body_file == src else {
                **_imported_classes(body_file, ast.parse(body_file.read_text(encoding="utf-8"))),
                **_local_classes(body_file)}
            for node in ast.walk(fn):
                _record(out, cls.name, node, classes)
    return {k: _kv_param(tree, k.split(".")[0], v) for k, v in out.items()}


def _kv_param(tree: ast.Module, owner: str, layer: str) -> str:
    """A QKV whose kv-head count is a parameter: `.../kv-or-heads:KEY` when every call of the
    owner class in the file that passes that parameter passes `getattr(config, "KEY", None)` (vLLM's
    QKVParallelLinear makes None the head count: nemotron_parse3_5's
    `num_kv_heads=getattr(config, "self_attention_kv_heads", None)`), else plain."""
    if "/kv-param:" not in layer:
        return layer
    name = layer.split("/kv-param:", 1)[1]
    keys = {None if not (isinstance(k.value, ast.Call) and ast.unparse(k.value.func) == "getattr"
                         and len(k.value.args) == 3
                         and isinstance(k.value.args[1], ast.Constant)
                         and isinstance(k.value.args[2], ast.Constant)
                         and k.value.args[2].value is None) else k.value.args[1].value
            for n in ast.walk(tree) if isinstance(n, ast.Call) and _callee(n) == owner
            for k in n.keywords if k.arg == name}
    if len(keys) == 1 and None not in keys:
        return f"QKVParallelLinear/kv-or-heads:{keys.pop()}"
    return "QKVParallelLinear"


def _record(out: dict[str, str], owner: str, node: ast.AST,
            classes: dict[str, dict[str, str]]) -> None:
    """One `self.X = <vLLM layer or a class with linears>(...)` of `owner`'s build, listed."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.value, ast.Call)):
        return
    t = node.targets[0]
    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
            and t.value.id == "self"):
        return
    value = node.value
    if _callee(value) == "ModuleList" and value.args and isinstance(
            value.args[0], (ast.ListComp, ast.GeneratorExp, ast.List)):
        inner = value.args[0]             # nn.ModuleList(Cls(...) for i in range(2))
        elt = inner.elts[0] if isinstance(inner, ast.List) and inner.elts else \
            getattr(inner, "elt", None)
        if isinstance(elt, ast.Call) and _callee(elt) in classes:
            value = elt
    layer = _callee(value)
    heads = node.value.args[2] if len(node.value.args) > 2 else next(
        (k.value for k in node.value.keywords if k.arg == "total_num_heads"), None)
    if layer == "QKVParallelLinear" and heads is not None and \
            "gate" in ast.unparse(heads):
        # qwen3_next: total_num_heads * (1 + attn_output_gate), the query doubled for
        # its output gate (`getattr(config, "attn_output_gate", True)`: TINY leaves it on)
        out.setdefault(f"{owner}.{t.attr}", "QKVParallelLinear/gated")
    elif layer == "QKVParallelLinear" and len(node.value.args) < 4 and not any(
            k.arg == "total_num_kv_heads" for k in node.value.keywords):
        out.setdefault(f"{owner}.{t.attr}", "QKVParallelLinear/no-kv")  # kv = heads
    elif layer == "QKVParallelLinear" and isinstance(kv_arg := (
            node.value.args[3] if len(node.value.args) > 3 else next(
                (k.value for k in node.value.keywords if k.arg == "total_num_kv_heads"),
                None)), ast.Name):
        # kv heads handed in by a parameter: resolved by `targets` at the build sites
        out.setdefault(f"{owner}.{t.attr}", f"QKVParallelLinear/kv-param:{kv_arg.id}")
    elif layer in LINEAR_LAYERS:
        out.setdefault(f"{owner}.{t.attr}", layer)
    elif layer in MOE_LAYERS:
        # which config key sizes the experts (mixtral: intermediate_size)
        kw = {k.arg: ast.unparse(k.value) for k in node.value.keywords if k.arg}
        tag = "moe" if "moe_intermediate_size" in kw.get("intermediate_size", "") else \
            "dense" if "config.intermediate_size" in kw.get("intermediate_size", "") \
            else layer
        out.setdefault(f"{owner}.{t.attr}.w13_weight", tag)
        out.setdefault(f"{owner}.{t.attr}.w2_weight", tag)
    elif layer in classes:       # an MLP class of another family (`from .qwen2 import`)
        for sub, kind in classes[layer].items():
            out.setdefault(f"{owner}.{t.attr}.{sub}", kind)


def _local_classes(src: Path) -> dict[str, dict[str, str]]:
    """The linears each class of a file builds in its own `__init__` (attr -> layer)."""
    got: dict[str, dict[str, str]] = {}
    for k, v in targets(src, follow=False).items():
        c, attr = k.split(".", 1)
        got.setdefault(c, {})[attr] = v
    return got


def _find_class(src: Path, tree: ast.Module, name: str):
    """(file, tree, ClassDef) of a class named in `src`: defined there, or imported from a
    sibling family's file; None for a class of a library (nn.Module, a vLLM layer)."""
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == name:
            return src, tree, n
    for n in tree.body:
        sib = _sibling(src, n)
        if sib is None:
            continue
        real = next((a.name for a in n.names if (a.asname or a.name) == name), None)
        if real is not None:
            stree = ast.parse(sib.read_text(encoding="utf-8"))
            return next(((sib, stree, c) for c in stree.body
                         if isinstance(c, ast.ClassDef) and c.name == real), None)
    return None


def _mro(src: Path, tree: ast.Module, cls: ast.ClassDef) -> list:
    """The class and its bases (depth first, each base resolved in the file that names it)."""
    seen, order, todo = set(), [], [(src, tree, cls)]
    while todo:
        f, t, c = todo.pop(0)
        if (f, c.name) in seen:
            continue
        seen.add((f, c.name))
        order.append((f, t, c))
        for b in c.bases:
            name = b.id if isinstance(b, ast.Name) else None
            hit = _find_class(f, t, name) if name else None
            if hit is not None:
                todo.append(hit)
    return order


def _build_bodies(src: Path, tree: ast.Module, cls: ast.ClassDef) -> list:
    """(file, function) for every method a build of `cls` runs: `__init__` as resolved through
    the bases, a base `__init__` reached by `super().__init__(...)`, and `self.m(...)` calls."""
    mro = _mro(src, tree, cls)

    def method(name: str, start: int = 0):
        for i, (f, _t, c) in enumerate(mro[start:], start):
            m = next((x for x in c.body if isinstance(x, ast.FunctionDef) and x.name == name),
                     None)
            if m is not None:
                return i, f, m
        return None

    out, seen = [], set()
    todo = [method("__init__")]
    while todo:
        hit = todo.pop(0)
        if hit is None or (hit[0], hit[2].name) in seen:
            continue
        i, f, fn = hit
        seen.add((i, fn.name))
        out.append((f, fn))
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            if isinstance(owner, ast.Call) and _callee(owner) == "super" and \
                    node.func.attr == "__init__":
                todo.append(method("__init__", i + 1))
            elif isinstance(owner, ast.Name) and owner.id == "self":
                todo.append(method(node.func.attr))
    return out


def _sibling(src: Path, node: ast.AST) -> Path | None:
    """The sibling model file an import names: `from .qwen2 import ...` or
    `from vllm.model_executor.models.deepseek_v2 import ...` (longcat_flash's MLA attention)."""
    if not isinstance(node, ast.ImportFrom) or not node.module:
        return None
    if node.level == 1:
        stem = node.module
    elif node.level == 0 and node.module.startswith(MODELS_PKG + "."):
        stem = node.module[len(MODELS_PKG) + 1:]
    else:
        return None
    sib = src.parent / f"{stem}.py"
    return sib if "." not in stem and sib.is_file() else None


def _siblings(src: Path, depth: int = SIBLING_DEPTH) -> list[Path]:
    """The sibling model files `src` imports, and those they import, `depth` levels deep (a
    user's vLLM checkout holds them all: qwen3_dflash2.py's decoder layer subclasses
    qwen3_dflash.py's, whose MLP is `from .qwen2 import Qwen2MLP as Qwen3MLP`)."""
    out: list[Path] = []
    todo = [src]
    for _ in range(depth):
        nxt = []
        for f in todo:
            for n in ast.parse(f.read_text(encoding="utf-8")).body:
                sib = _sibling(f, n)
                if sib is not None and sib != src and sib not in out:
                    out.append(sib)
                    nxt.append(sib)
        todo = nxt
    return out


def _imported_classes(src: Path, tree: ast.Module) -> dict[str, dict[str, str]]:
    """`from .qwen2 import Qwen2MLP as Qwen3MLP`: the linears of classes of sibling files, by
    the local name (attr -> layer)."""
    out: dict[str, dict[str, str]] = {}
    for n in tree.body:
        sib = _sibling(src, n)
        if sib is not None:
            names = {a.name: a.asname or a.name for a in n.names}
            if not any(k[:1].isupper() for k in names):
                continue
            inner = targets(sib, follow=False)
            for real, local in names.items():
                got = {k.split(".", 1)[1]: v for k, v in inner.items() if k.split(".")[0] == real}
                if got:
                    out[local] = got
    return out


def is_tower(key: str) -> bool:
    """Whether a target `Class.attr...` lies in a vision or audio tower's class."""
    return any(w in key.split(".")[0].lower() for w in TOWER_WORDS)


def is_attention(key: str) -> bool:
    return any(w in key.lower() for w in ATTN_WORDS)


def decoder_family(tg: dict[str, str], built: dict[str, str] | None = None) -> bool:
    """A decoder family builds its own decoder: an attention linear and an MLP/MoE linear in
    classes that are not a tower's (`tg`, with the linears of classes it imports from sibling
    families), at least one of them built by its own classes (`built`: qwen3's attention, its
    MLP being qwen2's). A multimodal wrapper whose own linears are only its towers (qwen3_vl:
    Qwen3_VisionBlock; the decoder is qwen3.py's), a draft that builds only a head
    (qwen3_dspark), a file that only subclasses another family's layers (qwen3_5 over
    qwen3_next, deepseek_eagle3 over deepseek_v2) is listed, its targets swept, not counted."""
    own = [k for k in tg if not is_tower(k)]
    if built is not None and not any(not is_tower(k) for k in built):
        return False
    return any(is_attention(k) for k in own) and any(not is_attention(k) for k in own)


def _holds(cfg: dict, key: str) -> bool:
    """Whether the config or one of its sub-configs has `key` set (not None)."""
    return cfg.get(key) is not None or any(
        isinstance(v, dict) and _holds(v, key) for v in cfg.values())


def expected_dims(attr: str, layer: str, cfg: dict | None = None) -> tuple[int, ...] | None:
    """vLLM's per-rank split at TP 2 (moe TP 2) for the canonical names, from TINY. The attention
    reads its width from `attention_hidden_size` when the family's config has one (vLLM's
    zamba2: qkv_proj's input and o_proj's input are that width, 2 * hidden in transformers'
    Zamba2Config, its head dim `attention_head_dim`)."""
    c, cfg = TINY, cfg or {}
    h, hd, heads, kv = c["hidden_size"], c["head_dim"], c["num_attention_heads"], \
        c["num_key_value_heads"]
    i, e, im = c["intermediate_size"], c["num_experts"], c["moe_intermediate_size"]
    width = cfg.get("attention_hidden_size")
    if isinstance(width, int):
        hd = cfg.get("attention_head_dim") or hd
    name = attr.split(".")[-1]
    if name == "qkv_proj" and layer.startswith("QKVParallelLinear"):
        if layer.endswith("no-kv") or ("/kv-or-heads:" in layer and not _holds(
                cfg, layer.split("/kv-or-heads:", 1)[1])):
            kv = heads         # absent, or None from a key the config lacks: the head count
        q = 2 * heads if layer.endswith("gated") else heads
        return ((q // TP + 2 * max(kv // TP, 1)) * hd, width if isinstance(width, int) else h)
    if name == "o_proj" and layer == "RowParallelLinear":
        return (h, (width if isinstance(width, int) else heads * hd) // TP)
    im = {"moe": im, "dense": i}.get(layer)
    if name == "w13_weight" and im:
        return (e, 2 * im // TP, h)
    if name == "w2_weight" and im:
        return (e, h, im // TP)
    if name == "gate" and layer == "GateLinear":
        return (e, h)
    return None          # gate_up / down: intermediate differs for shared experts / dense layers


def family_config(src: Path) -> dict:
    """The config a user of the family would pass, made tiny: transformers' config class for the
    family (found through its `*ForCausalLM` class name in transformers' causal-LM mapping) built
    with TINY as its arguments, so the keys it derives follow TINY (zamba2's
    `attention_hidden_size = 2 * hidden_size`, laguna's `num_attention_heads_per_layer`), and its
    text sub-config (`text_config`, llama4) built the same way; the other sub-configs
    (`vision_config`, `audio_config`) keep the class's defaults, as in a user's config, so the
    towers are sized by them. A key the class stores under another name (`attribute_map`:
    hidden_size -> d_model) gets TINY's value too. A family transformers does not know: TINY,
    the keys of vLLM's own config classes the file imports and the sub-configs it hands to
    classes naming their config class. Each key keeps its kind (`_listed`)."""
    try:
        from transformers import AutoConfig
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return dict(TINY)
    tree = ast.parse(src.read_text(encoding="utf-8"))
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)
             and n.name.endswith("ForCausalLM")}
    mtype = next((t for t, c in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()
                  if (c if isinstance(c, str) else c[0]) in names), None)
    own = _vllm_config_class(src, mtype or src.stem)
    if own is not None:
        # its parameters stored under a standard key (moondream3's `dim` as `hidden_size`) as
        # tiny as TINY's, as for a file that imports the class (`_vllm_config_keys`)
        keys = {**TINY, **_vllm_config_keys(src, tree)}
        for sub in TEXT_SUBCONFIGS:      # its text sub-config the same (moondream3's text_config)
            if isinstance(own.get(sub), dict):
                own[sub] = {**own[sub], **{k: v for k, v in keys.items() if k in own[sub]}}
        return _released(src, _listed({**own, **_vllm_config_keys(src, tree)}, {}, tree))
    if mtype is None:
        # a family transformers maps to another model class (sarvam.py's SarvamMLAForCausalLM;
        # transformers' sarvam_mla runs DeepseekV3ForCausalLM): the model type whose config
        # class is named as the file's model class, `SarvamMLAConfig`
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        mtype = next((t for t, c in CONFIG_MAPPING_NAMES.items()
                      if c in {n[:-len("ForCausalLM")] + "Config" for n in names}), None)
    if mtype is None:
        # a family transformers knows by a multimodal class only (ernie45_vl_moe.py's
        # Ernie4_5_VLMoeForCausalLM; transformers' model type ernie4_5_vl_moe): its model
        # type spelled as the file's stem, underscores aside
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        mtype = next((t for t in CONFIG_MAPPING_NAMES
                      if t.replace("_", "") == src.stem.replace("_", "")), None)
    if mtype is None:
        return _released(src, _remote_keys(_listed({**_vllm_config_keys(src, tree), **TINY,
                                                    **REMOTE_TINY, **_sub_configs(tree)}, {},
                                                   tree), tree))
    try:
        default = AutoConfig.for_model(mtype).to_dict()      # the class's own kinds of keys
    except Exception:
        default = {}
    layers = _mixer_layers(default)
    layers.update(_block_kinds(default, layers.get("num_hidden_layers",
                                                   TINY["num_hidden_layers"])))
    if layers.get("num_hidden_layers", TINY["num_hidden_layers"]) > TINY["num_hidden_layers"] \
            and "layer_types" not in layers and "layers_block_type" not in layers:
        # more block kinds than TINY's layers: TINY's attention pattern grows with them
        layers["layer_types"] = [TINY["layer_types"][0]] * layers["num_hidden_layers"]
    # TINY's sizes override the class's; its names (hidden_act: "silu") yield to the class's
    # default, the kind a user's config has (apertus: "xielu", the only activation it accepts)
    tiny = {k: v for k, v in TINY.items() if not (isinstance(v, str) and
                                                   isinstance(default.get(k), str))}
    tiny.update(layers)
    if "layers_block_type" in layers:
        # the pattern under the class's own key only (zamba2, nemotron_h: layers_block_type,
        # from which the class derives its hybrid layer ids; "mlp", one of nemotron_h's kinds,
        # is not a kind a plain config's layer_types accepts)
        tiny.pop("layer_types", None)
    tiny_built = True
    try:
        cfg = AutoConfig.for_model(mtype, **tiny)
    except Exception:
        tiny_built = False
        try:
            cfg = AutoConfig.for_model(mtype)
        except Exception:
            return _released(src, _listed(dict(TINY), {}, tree))
    base = cfg.to_dict()
    amap = {std: stored for std, stored in getattr(cfg, "attribute_map", {}).items()
            if std in tiny and isinstance(stored, str)}
    derived = _derived_keys(mtype, amap, default) if tiny_built else {}
    for std, stored in amap.items():
        base[stored] = derived.get(std, tiny[std])
    for key in TEXT_SUBCONFIGS:
        sub = getattr(cfg, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            try:
                made = {**type(sub)(**TINY).to_dict(), **TINY}
            except Exception:
                made = {**sub.to_dict(), **TINY}
            base[key] = _listed(made, default.get(key) or {}, tree)
    for k in ("architectures", "auto_map", "transformers_version"):
        base.pop(k, None)
    # a key naming a kind, not a size, keeps the family's own (TINY shrinks sizes; vLLM's files
    # check the activation: zamba2's MLP is GELU only, apertus's xIELU only)
    kinds = {k: default[k] for k in KIND_KEYS if isinstance(default.get(k), str)}
    props = _properties(cfg, tree, base)
    for key in [k for k in props if k in ("layer_types", "layers_block_type")]:
        # a pattern the class computes (jamba's, from its attention period 8 and offset 4: no
        # attention in the first two layers) made tiny as a stored one is (`_mixer_layers`)
        props.update(_mixer_layers({key: props[key]}))
    out = _listed({**base, **tiny, **derived, **kinds, **props}, default, tree)
    # a LoRA rank the class defaults to None selects the architecture without that projection
    # (sarvam_mla: q_proj, no q_a_proj; vLLM's MLA wrapper then takes q_proj): kept None
    for k in ("q_lora_rank",):
        if k in default and default[k] is None and k in out:
            out[k] = None
    return _released(src, out, frozenset(getattr(cfg, "attribute_map", {})))


def _mixer_layers(default: dict) -> dict:
    """A hybrid family's layers, tiny: when the class's default layer pattern (`layer_types`,
    `layers_block_type`) holds a state-space or linear-attention mixer (`MIXER_KINDS`), TINY's
    two full-attention layers would build none of it, so the tiny model has one layer of each
    kind the default holds, in the order they first appear (qwen3_next: a gated delta-net layer
    then an attention layer; nemotron_h: mamba, MoE, attention, MLP), repeated to TINY's two
    layers at least (zaya: two hybrid layers, so a site on the next layer has one)."""
    for key in ("layer_types", "layers_block_type"):
        v = default.get(key)
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            kinds = list(dict.fromkeys(v))
            if any(k in MIXER_KINDS for k in kinds):
                if set(kinds) <= PURE_MIXERS and key == "layer_types":
                    # no attention in the default (granitemoehybrid's: all mamba): TINY's full
                    # attention joins, so the decoder's attention is built too
                    kinds.append("full_attention")
                n = max(len(kinds), TINY["num_hidden_layers"])     # a next layer for each
                kinds = (kinds * n)[:n]
                return {key: kinds, "num_hidden_layers": n}
            return {}
    return {}


def _block_kinds(default: dict, n: int) -> dict:
    """The class's per-layer block kinds other than the attention / mixer pattern
    (`mlp_layer_types`: step3p5's ["dense"] * 3 + ["sparse"] * 42, derived from the layer count
    when not given, so 2 tiny layers would build no MoE block), tiny: one layer of each kind in
    the order they first appear, repeated to `n` layers (more when there are more kinds), as
    `_mixer_layers` does for the mixers. A list is per-layer when it is as long as the
    default's `num_hidden_layers`; one kind only is left to the class."""
    layers = default.get("num_hidden_layers")
    out: dict = {}
    for key, v in default.items():
        if key in ("layer_types", "layers_block_type") or not isinstance(v, list) or \
                not isinstance(layers, int) or len(v) != layers or \
                not all(isinstance(x, str) for x in v):
            continue
        kinds = list(dict.fromkeys(v))
        if len(kinds) > 1:
            out[key] = kinds
    if not out:
        return {}
    n = max([n, *map(len, out.values())])
    return {**{k: (v * n)[:n] for k, v in out.items()}, "num_hidden_layers": n}


def _properties(cfg, tree: ast.Module, stored: dict) -> dict:
    """Values the config class computes in a property that `to_dict` does not store, read by
    the file (jamba's `config.layers_block_type`, from its attention / expert periods), stored
    as keys: the factory builds a plain `PretrainedConfig` from the keys."""
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and ast.unparse(n.value).split(".")[-1].endswith("config")}
    out = {}
    for name in sorted(read - set(stored)):
        if isinstance(getattr(type(cfg), name, None), property):
            try:
                value = getattr(cfg, name)
            except Exception:
                continue
            if isinstance(value, (int, float, str, bool, list)):
                out[name] = value
    return out


def _derived_keys(mtype: str, amap: dict[str, str], default: dict) -> dict:
    """TINY keys a config class stores under another name and derives from the other keys
    (zamba2: `head_dim` is stored as `attention_head_dim`, which Zamba2Config derives as
    2 * hidden_size / heads): built without it, the stored key moves off the class default,
    so the derived value is kept (as in a user's config, where they agree) instead of TINY's,
    which the class would take over its own rule."""
    from transformers import AutoConfig
    out = {}
    for std, stored in amap.items():
        if stored in TINY:
            continue          # set by TINY itself (glm4_moe_lite: head_dim -> qk_rope_head_dim)
        try:
            bare = AutoConfig.for_model(mtype, **{k: v for k, v in TINY.items() if k != std})
        except Exception:
            continue
        got = bare.to_dict().get(stored)
        if got is not None and stored in default and got != default[stored] and got != TINY[std]:
            out[std] = got
    return out


def _released(src: Path, cfg: dict, aliases: frozenset = frozenset()) -> dict:
    """`cfg` with the keys its file reads that no class gave it, where vLLM's own config
    classes declare a default for that name (`_declared_defaults`), then the family's
    `RELEASED_KEYS` (a sub-config's keys merged into it). `aliases`: names the config class
    answers through its `attribute_map` (exaone's `activation_function`), present already."""
    out = dict(cfg)
    for key in sorted(_read_keys(src) - set(out) - aliases):
        # transformers 5 nests a multimodal model's text keys in its text sub-config; the
        # released flat config.json (which vLLM's file reads) holds them at the top
        sub = next((out[t] for t in TEXT_SUBCONFIGS if isinstance(out.get(t), dict)
                    and key in out[t]), None)
        if sub is not None:
            out[key] = sub[key]
    configs = src.parents[2] / Path(*VLLM_CONFIGS.split("/")[1:])
    own, declared = _declared_defaults(configs, src.stem), _declared_defaults(configs, "")
    for key in sorted(_read_keys(src) - set(out) - aliases):
        if key in own or key in declared:
            out[key] = own.get(key, declared.get(key))
    for k, v in RELEASED_KEYS.get(src.stem, {}).items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else out.get(k, v) if isinstance(v, dict) else v
    return out


def _read_keys(src: Path) -> set[str]:
    """The config keys a model file reads unconditionally: `config.X` / `self.config.X`, not
    a method it calls (`config.get_text_config()`), nor a key whose presence it tests
    (`hasattr(config, "index_topk")`: deepseek_v2's V3.2 path; `getattr(config, "X", d)`), for
    which absence is a state the file expects."""
    tree = ast.parse(src.read_text(encoding="utf-8"))
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    tested = {n.args[1].value for n in ast.walk(tree) if isinstance(n, ast.Call)
              and _callee(n) in ("hasattr", "getattr") and len(n.args) >= 2
              and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and id(n) not in calls and isinstance(n.ctx, ast.Load):
            v = n.value
            if (isinstance(v, ast.Name) and v.id == "config") or \
                    (isinstance(v, ast.Attribute) and v.attr == "config"):
                out.add(n.attr)
    return out - tested


@functools.lru_cache(maxsize=None)
def _declared_defaults(configs: Path, lineage: str) -> dict:
    """name -> default, for every parameter of vLLM's own config classes (the wheel's
    configs folder, read with `ast`; with `lineage`, only the files named after the family,
    `bailing_moe_v3_vl.py` for bailing_moe) whose default is a literal the same in every class
    that declares it. bailing_moe.py reads `config.embedding_dropout`, `use_bias`,
    `num_shared_experts`, ...: Ling's config class is remote code, and vLLM's own
    BailingMoeV3TextConfig declares these keys with defaults. A name declared with different
    defaults is left out."""
    seen: dict[str, set] = {}
    for f in sorted(configs.glob(f"{lineage}*.py")) if configs.is_dir() else ():
        for cls in (n for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                    if isinstance(n, ast.ClassDef)):
            for m in cls.body:
                pairs = []
                if isinstance(m, ast.FunctionDef) and m.name == "__init__":
                    a = m.args
                    pairs += zip([x.arg for x in a.args[len(a.args) - len(a.defaults):]],
                                 a.defaults)
                    pairs += [(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d]
                elif isinstance(m, ast.AnnAssign) and isinstance(m.target, ast.Name) and \
                        m.value is not None:
                    pairs.append((m.target.id, m.value))
                for name, d in pairs:
                    try:
                        value = ast.literal_eval(d)
                    except (ValueError, SyntaxError, TypeError):
                        continue
                    if isinstance(value, (bool, int, float, str)):
                        seen.setdefault(name, set()).add((type(value).__name__, value))
    return {k: next(iter(v))[1] for k, v in seen.items() if len(v) == 1}


@functools.lru_cache(maxsize=None)
def _vllm_registry(configs: Path) -> dict[str, str]:
    """vLLM's model type -> its own config class (`_CONFIG_REGISTRY` of
    vllm/transformers_utils/config.py, read with `ast` from the wheel beside the cache)."""
    wheels = sorted(configs.parents[2].parent.glob(
        f"vllm-{configs.parents[2].name[2:]}-*.whl"))
    if not wheels:
        return {}
    with zipfile.ZipFile(wheels[0]) as z:
        tree = ast.parse(z.read("vllm/transformers_utils/config.py").decode())
    for n in ast.walk(tree):
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and \
                n.target.id == "_CONFIG_REGISTRY" and isinstance(n.value, ast.Call):
            return {k.arg: k.value.value for k in n.value.keywords
                    if k.arg and isinstance(k.value, ast.Constant)}
    return {}


def cfg_type(src: Path) -> str:
    """The model type family_config resolves the file to (its stem where transformers has
    none), for vLLM's own registry."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return src.stem
    tree = ast.parse(src.read_text(encoding="utf-8"))
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)
             and n.name.endswith("ForCausalLM")}
    return next((t for t, c in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()
                 if (c if isinstance(c, str) else c[0]) in names), src.stem)


def _vllm_config_name(src: Path, mtype: str) -> str:
    """"module:Class" of vLLM's own config class for a model type, or ''."""
    configs = src.parents[2] / Path(*VLLM_CONFIGS.split("/")[1:])
    name = _vllm_registry(configs).get(mtype)
    init = configs / "__init__.py"
    if not name or not init.is_file():
        return ""
    where = next((ast.literal_eval(n.value) for n in ast.walk(ast.parse(init.read_text()))
                  if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                  and n.target.id == "_CLASS_TO_MODULE"), {}).get(name, "")
    return f"{where}:{name}" if where else ""


def _derives(cls, key: str) -> bool:
    """Whether a config class fills `key` itself when it is not given (default None, set
    from the other keys on construction)."""
    try:
        return getattr(cls(), key, None) is not None and \
            getattr(cls, "__dataclass_fields__", {}).get(key) is not None and \
            cls.__dataclass_fields__[key].default is None
    except Exception:
        return False


def _vllm_config_class(src: Path, mtype: str) -> dict | None:
    """The tiny config of a model type vLLM loads with its own class (`_CONFIG_REGISTRY`:
    dory's DoryConfig, chatglm's ChatGLMConfig, ahead of transformers' class as vLLM's
    `get_config` does): the wheel's config file run on its own (it needs only transformers),
    the class built with TINY, every key it declares in its kind. None when vLLM has none or
    its file needs more than transformers."""
    configs = src.parents[2] / Path(*VLLM_CONFIGS.split("/")[1:])
    name = _vllm_registry(configs).get(mtype)
    init = configs / "__init__.py"
    if not name or not init.is_file():
        return None
    where = next((ast.literal_eval(n.value) for n in ast.walk(ast.parse(init.read_text()))
                  if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                  and n.target.id == "_CLASS_TO_MODULE"), {}).get(name, "")
    f = configs / (where.rsplit(".", 1)[-1] + ".py")
    if not f.is_file():
        return None
    try:
        spec = importlib.util.spec_from_file_location(f"_sweep_vllm_config_{f.stem}", f)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cls = getattr(mod, name)
        # TINY's all-attention `layer_types` is left to a class that derives its own from the
        # layer count (dory: attention and MLP blocks alternate; TINY's list builds no MLP)
        tiny = {k: v for k, v in TINY.items() if not (k == "layer_types" and _derives(cls, k))}
        try:
            made = cls(**tiny)
        except Exception:
            made = cls()
    except Exception:
        return None
    out = {**made.to_dict(), **{k: v for k, v in tiny.items() if not isinstance(v, str)}}
    for k in ("architectures", "auto_map", "transformers_version", "model_type"):
        out.pop(k, None)
    return out


def _config_reads(tree: ast.Module) -> set[str]:
    """The keys a file reads as `config.X` / `self.config.X` (unguarded, not `getattr`)."""
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and ast.unparse(n.value).split(".")[-1] == "config"}


def _remote_keys(cfg: dict, tree: ast.Module) -> dict:
    """`REMOTE_KEYS` the file reads that `cfg` lacks, added (for families transformers does
    not know only: a class transformers has defines the keys its family uses)."""
    read = _config_reads(tree)
    return {**cfg, **{k: v for k, v in REMOTE_KEYS.items() if k in read and k not in cfg}}


def _vllm_config_keys(src: Path, tree: ast.Module) -> dict:
    """The keys of the config classes a file imports from vLLM's own configs
    (`from vllm.transformers_utils.configs.moondream3 import Moondream3TextConfig`), read from
    each class's `__init__` in the wheel: a parameter its `__init__` stores under a standard
    key (`self.hidden_size = dim`) takes that key's TINY value, so the names the model file
    reads (`config.dim`) are as tiny as the standard ones; other parameters keep their constant
    defaults (numbers, flags: ricursive's `use_gated_attention`, names), as in a user's
    config."""
    root = src.parents[2] / Path(*VLLM_CONFIGS.split("/")[1:])      # .../vllm/<configs>
    pkg = VLLM_CONFIGS.replace("/", ".")
    out: dict = {}
    read = _config_reads(tree)
    for n in tree.body:
        if not (isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(pkg + ".")):
            continue
        f = root / (n.module[len(pkg) + 1:] + ".py")
        if not f.is_file():
            continue
        wanted = {a.name for a in n.names}
        for cls in ast.parse(f.read_text(encoding="utf-8")).body:
            if not (isinstance(cls, ast.ClassDef) and cls.name in wanted):
                continue
            init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                         and m.name == "__init__"), None)
            if init is None:
                continue
            a = init.args
            defaults = dict(zip([x.arg for x in a.args[len(a.args) - len(a.defaults):]],
                                a.defaults))
            stored: dict[str, str] = {}       # parameter -> the standard key it is stored as
            for node in ast.walk(init):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0], ast.Attribute) and \
                        isinstance(node.value, ast.Name) and node.value.id in defaults and \
                        node.targets[0].attr in TINY:
                    stored.setdefault(node.value.id, node.targets[0].attr)
            for p, d in defaults.items():
                if p in stored:
                    out.setdefault(p, TINY[stored[p]])
                elif isinstance(d, ast.Constant) and (d.value is not None or p in read):
                    # a number, flag or name as stored; None only for a key the file reads
                    # (ricursive's `ffn_clamp_threshold`), not for a parameter such as `config`
                    out.setdefault(p, d.value)
    return out


def _sub_configs(tree: ast.Module) -> dict:
    """Sub-configs a file hands to a class whose `__init__` names their transformers config
    class (nemotron_parse3_5: `MBartDecoderNoPos(config.decoder, ...)`, `config: BartConfig`),
    each that class built with TINY (its `attribute_map` names, `d_model`, included), under
    the key the file reads, as the family's config.json nests it."""
    try:
        import transformers
    except ImportError:
        return {}
    takes: dict[str, str] = {}           # class -> the config class its `config` parameter names
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                     and m.name == "__init__"), None)
        arg = next((a for a in (init.args.args if init else []) if a.arg == "config"), None)
        if arg is not None and isinstance(arg.annotation, ast.Name):
            takes[cls.name] = arg.annotation.id
    out: dict = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        kind = takes.get(_callee(call), "")
        given = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "config")]
        for g in given:
            if isinstance(g, ast.Attribute) and isinstance(g.value, ast.Name) and \
                    g.value.id == "config" and kind.endswith("Config") and \
                    isinstance(getattr(transformers, kind, None), type):
                try:
                    made = getattr(transformers, kind)(**TINY)
                except Exception:
                    continue
                sub = {**made.to_dict(), **TINY}
                for std, stored in getattr(made, "attribute_map", {}).items():
                    if std in TINY and isinstance(stored, str):
                        sub[stored] = TINY[std]
                out.setdefault(g.attr, sub)
    return out


def _listed(cfg: dict, default: dict, tree: ast.Module) -> dict:
    """TINY's numbers in the kind of key the family uses: a key whose class default is a list
    (ernie4_5_vl_moe's `moe_intermediate_size`, one per modality) stays a list of that length
    (one per layer, when the default has one per default layer: gemma3n's `intermediate_size`),
    and a key the file indexes (`config.moe_num_experts[1]`: a list in the released config,
    transformers' class folding it to a number) is a list long enough for every index read;
    each element the tiny value."""
    reads: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and \
                isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, int) and \
                ast.unparse(n.value.value).split(".")[-1].endswith("config"):
            reads[n.value.attr] = max(reads.get(n.value.attr, 0), n.slice.value + 1)
    out = dict(cfg)
    layers = default.get("num_hidden_layers")
    for k, v in cfg.items():
        # a count of some of the decoder's layers (`num_kv_shared_layers`: gemma3n's 15 of 35)
        # that the tiny layer count cannot hold keeps its share of the layers, at least one
        # and at least one layer outside it
        if re.fullmatch(r"num_\w+_layers", k) and k != "num_hidden_layers" and \
                isinstance(v, int) and not isinstance(v, bool) and isinstance(layers, int) and \
                TINY["num_hidden_layers"] < v < layers:
            n = TINY["num_hidden_layers"]
            out[k] = max(1, min(n - 1, round(n * v / layers)))
        if k not in TINY or isinstance(v, (list, dict)):
            continue
        d = default.get(k)
        length = len(d) if isinstance(d, list) else 0
        if length and length == default.get("num_hidden_layers"):
            length = TINY["num_hidden_layers"]    # one per layer (gemma3n's intermediate_size)
        length = max(length, reads.get(k, 0))
        if length:
            out[k] = [v] * length
    return out


def _cli(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from cannbot_prefetch.cli import main; main()",
                           "prefetch", *args], capture_output=True, text=True, timeout=timeout)


def _wheel_configs(models: Path) -> Path:
    """The wheel's `vllm/transformers_utils/configs` beside its models folder: put on the shim's
    package of that name at run time, so a model file's `from vllm.transformers_utils.configs.<x>
    import ...` (moondream3, nemotron_parse3_5's radio) reads vLLM's own config classes, never
    copied into the shim."""
    return models.parents[1] / Path(*VLLM_CONFIGS.split("/")[1:])


def _import_with_shim(path: Path, models: Path, timeout: int = 120) -> str:
    """'' when the rewritten file imports under the shim, else the first error line. It is
    imported as `vllm.model_executor.models.<stem>` (its copy's folder added to the shim's
    models package, then the wheel's folder for siblings the copy lacks; the wheel's config
    classes to the shim's configs package, `_wheel_configs`), so its relative imports
    (`from .utils import ...` from the shim, a sibling family from the wheel) resolve as in
    vLLM, and vLLM's own config classes (`vllm.transformers_utils.configs.falcon`) are the
    wheel's (`_wheel_configs`), in a fresh process with the switch on (`CANNBOT_PREFETCH=1`)."""
    code = ("import importlib, sys\n"
            "from cannbot_prefetch.verify.shims import vllm_shim\n"
            f"sys.path.insert(0, {str(path.parent)!r})\n"
            "with vllm_shim():\n"
            "    import vllm.model_executor.models as pkg\n"
            f"    pkg.__path__ += [{str(path.parent)!r}, {str(models)!r}]\n"
            "    import vllm.transformers_utils.configs as cfgs\n"
            f"    cfgs.__path__.append({str(_wheel_configs(models))!r})\n"
            f"    importlib.import_module('vllm.model_executor.models.{path.stem}')\n")
    env = {**os.environ, "CANNBOT_PREFETCH": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1][:160]


FACTORY = '''"""GENERATED by benchmarks/vllm_sweep.py: builds {cls} of the rewritten
{stem}.py at TP 1 under cannbot-prefetch's vLLM shim from the sweep's tiny config, and one decode
step's inputs (2 sequences, one token each, flat as vLLM passes them)."""
import importlib
import inspect
import json

import torch
from transformers import AutoConfig, PretrainedConfig

from cannbot_prefetch.verify.shims import vllm_shim


def build():
    data = json.loads(open({config!r}, encoding="utf-8").read())
    with vllm_shim():
        import vllm.model_executor.models as pkg
        from vllm.config import ModelConfig, VllmConfig

        import vllm.transformers_utils.configs as cfgs

        for extra in ({here!r}, {models!r}):
            if extra not in pkg.__path__:
                pkg.__path__.append(extra)
        if {configs!r} not in cfgs.__path__:
            cfgs.__path__.append({configs!r})        # vLLM's own config classes (the wheel's)
        cfg = _config(data, {own!r})
        mod = importlib.import_module("vllm.model_executor.models.{stem}")
        from vllm.model_executor.models.interfaces import SupportsMultiModal

        text = next((getattr(cfg, k) for k in {subs!r} if getattr(cfg, k, None) is not None),
                    None)
        if isinstance(text, PretrainedConfig) and not issubclass(mod.{cls}, SupportsMultiModal):
            # a text-only *ForCausalLM is built from the text sub-config, as vLLM builds it
            # (mllama4's init_vllm_registered_model(hf_config=config.text_config): llama4); a
            # sub-config left a dict (the family's class refused the keys: ernie45_vl_moe's flat
            # released config, `moe_num_experts` a list per modality) stays beside the flat keys
            # the file reads
            cfg = text
        torch.manual_seed(0)
        vllm_config = VllmConfig(ModelConfig(cfg))
        drafts = [inspect.getsource(inspect.getmodule(c)) for c in mod.{cls}.__mro__
                  if c.__module__.startswith(pkg.__name__)]
        if any("speculative_config.draft_model_config" in text for text in drafts):
            # a speculative draft (qwen3_dflash, its class or a base reading the draft's config)
            # is built as vLLM builds it, through the speculative config; the tiny config is
            # the draft's and the target's
            from vllm.config import SpeculativeConfig
            vllm_config.speculative_config = SpeculativeConfig(ModelConfig(cfg))
        from vllm.config import set_current_vllm_config
        with set_current_vllm_config(vllm_config):      # as vLLM's loader builds a model
            model = mod.{cls}(vllm_config=vllm_config).eval()
    # vLLM's runner passes intermediate_tensors (None on one pipeline stage) and the other
    # parameters by name; a forward that requires them positionally gets None, as there
    more = [p for p in list(inspect.signature(model.forward).parameters.values())[2:]
            if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    _fill_unset(model)
    _step_context(model, vllm_config)
    return model, (torch.tensor([7, 11]), torch.tensor([5, 9]), *[None] * len(more))


def _step_context(model, vllm_config):
    """vLLM's runner runs each step inside `set_forward_context(..., vllm_config)`; a model that
    registered layers by prefix in its config while built (zaya's `static_forward_context`)
    finds them there at run time. Hooks on the top module enter and leave that context around
    each call (only for such a model: nothing else reads it)."""
    if not vllm_config.compilation_config.static_forward_context:
        return
    from vllm.forward_context import set_forward_context
    open_ = []

    def enter(_m, _a):
        ctx = set_forward_context(None, vllm_config)
        ctx.__enter__()
        open_.append(ctx)

    def leave(_m, _a, _o):
        open_.pop().__exit__(None, None, None)
    model.register_forward_pre_hook(enter)
    model.register_forward_hook(leave)


def _fill_unset(model):
    """vLLM's loader fills every parameter from the checkpoint; one a model file makes with
    `torch.empty` (dory's nGPT scales, ernie45_vl_moe's e_score_correction_bias) holds whatever
    memory held. Those reading as unset memory (not finite, or beyond 1e4 in magnitude, which
    no initialised weight here reaches) get seeded values, as a loader would give real ones."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and \
                    not (torch.isfinite(p).all() and p.abs().max() <= 1e4):
                p.copy_(torch.randn(p.shape, generator=gen).to(p.dtype) * 0.05)


def _config(data, own=""):
    """The family's own config class built from the keys, as a user's config.json is loaded
    (its sub-configs become objects: dbrx's `attn_config.kv_n_heads`; its `attribute_map`
    names resolve: exaone's `activation_function`); a plain PretrainedConfig when transformers
    does not know the model type or its class refuses the tiny keys. Its rope settings are
    standardised as vLLM's config loader does (`patch_rope_parameters`: a config with a
    `rope_theta` gets `rope_parameters`). `own`: vLLM's own class for the model type
    ("module:Class", vLLM's `_CONFIG_REGISTRY`: dory's DoryConfig), used as vLLM uses it."""
    mtype = data.pop("model_type", None)
    cfg = None
    if own:
        mod, name = own.split(":")
        try:
            cfg = getattr(importlib.import_module(mod), name)(**data)
        except Exception:
            cfg = None
    if cfg is None and mtype:
        try:
            kind = type(AutoConfig.for_model(mtype))
            # a key the class derives (FalconConfig's `head_dim`, a property without a
            # setter) is left to the class
            cfg = kind(**{{k: v for k, v in data.items() if not (
                isinstance(getattr(kind, k, None), property) and getattr(kind, k).fset is None)}})
        except Exception:
            pass
    if cfg is None:
        cfg = PretrainedConfig(**data)
    if getattr(cfg, "rope_theta", None) is not None and \
            not getattr(cfg, "rope_parameters", None):
        cfg.standardize_rope_params()
    for k, v in data.items():
        if isinstance(v, dict) and "model_type" in v and isinstance(getattr(cfg, k, None), dict):
            # a sub-config the class left a dict (a plain config: nemotron_parse3_5's
            # `decoder`, a BartConfig's keys, and `encoder`): an object of its model type's
            # class, as transformers builds the sub-configs it declares, else a plain config;
            # one its class refuses (ernie45_vl_moe's text_config: a strict class checks its
            # per-layer lists against the layer count) stays the dict the class kept
            try:
                setattr(cfg, k, _config(dict(v)))
            except Exception:
                pass
    for k, v in data.items():
        # a key of the config.json a class did not keep (transformers 5 folds `rope_theta`
        # into `rope_parameters`) stays readable, as a released config's key is for vLLM's file
        if not hasattr(cfg, k):
            try:
                setattr(cfg, k, v)
            except Exception:
                pass
    return cfg
'''


def vllm_loaded(data: dict) -> dict:
    """The config as vLLM's loader hands it to a model (vllm/transformers_utils/config.py,
    `patch_rope_parameters`, run on every config it loads): a config without `rope_parameters`
    (remote-code families: orion, solar) gets `{"rope_type": "default", "rope_theta": ...}`
    from its `rope_theta`, with its `partial_rotary_factor`; its text sub-config the same."""
    out = dict(data)
    theta = out.get("rope_theta", out.get("rotary_emb_base"))
    if not out.get("rope_parameters") and theta is not None:
        rope = {"rope_type": "default", "rope_theta": theta}
        if out.get("partial_rotary_factor") is not None:
            rope["partial_rotary_factor"] = out["partial_rotary_factor"]
        out["rope_parameters"] = rope
    for key in TEXT_SUBCONFIGS:
        if isinstance(out.get(key), dict):
            out[key] = vllm_loaded(out[key])
    return out


def _verify_with_shim(d: Path, copy: Path, src: Path, plan_path: Path, timeout: int) -> str:
    """`cannbot prefetch verify PLAN --factory` on the rewritten file built under the shim (TP 1,
    the sweep's tiny config): outputs off == on and, with `CANNBOT_PREFETCH=1` alone while a
    fresh model is built, every site firing. 'ok', or the first failed check (or build error)."""
    tree = ast.parse(src.read_text(encoding="utf-8"))
    # the file's main model class: the one named after the file when there are several
    # (deepseek_v2.py: DeepseekForCausalLM and DeepseekV2ForCausalLM)
    names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
             and n.name.endswith("ForCausalLM")]
    if not names:
        return "no *ForCausalLM class"
    cls = next((n for n in names if src.stem.replace("_", "") in n.lower()), names[0])
    fdir = d / "factory"      # not d itself: its vllm/ folder would shadow the shim's package
    fdir.mkdir(exist_ok=True)
    fac = fdir / "sweep_factory.py"
    loaded = d / "config.vllm.json"     # the config as vLLM's loader hands it to the model
    loaded.write_text(json.dumps(vllm_loaded(json.loads((d / "config.json").read_text()))))
    fac.write_text(FACTORY.format(cls=cls, stem=copy.stem, config=str(loaded),
                                  own=_vllm_config_name(src, cfg_type(src)),
                                  here=str(copy.parent), models=str(src.parent),
                                  configs=str(_wheel_configs(src.parent)),
                                  subs=TEXT_SUBCONFIGS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(fdir), *filter(None, [os.environ.get("PYTHONPATH")])])}
    r = subprocess.run([sys.executable, "-c", "from cannbot_prefetch.cli import main; main()",
                        "prefetch", "verify", str(plan_path), "--factory", "sweep_factory:build",
                        "--root", str(d), "--json"], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=fdir)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return f"verify gave no JSON (exit {r.returncode}): {r.stderr.strip()[-160:]}"
    if "error" in doc:
        return "verify: " + doc["error"]["message"][-200:]
    bad = [c for c in doc.get("checks", []) if not c.get("passed") and not c.get("skipped")]
    # a site whose class this model does not build (a file with several model classes, an
    # attention class chosen by the config): nothing to fire, listed, not a failure
    absent = [c for c in bad if c.get("name") == "fires"
              and str(c.get("detail", "")).startswith("no module of ")]
    # nor anything to capture: such a site's graph check expects no node (`0/0 node(s)`)
    gone = {c.get("site") for c in absent if c.get("site")}
    absent += [c for c in bad if c.get("name") == "captured prefetch" and c.get("site") in gone
               and "0/0 node(s)" in str(c.get("detail", ""))]
    bad = [c for c in bad if c not in absent]
    # a site in a vision or audio tower's class (`is_tower`) the text decode step never runs
    # (molmo builds its vision backbone in a text-only deployment too): listed, not a failure
    plan = yaml.safe_load(plan_path.read_text()) or {}
    owner = {str(s.get("id")): f"{s['target']['class']}.{s['target']['attr']}"
             for s in plan.get("sites") or []}
    idle = [c for c in bad if c.get("name") == "fires" and is_tower(owner.get(
        str(c.get("site")), "")) and str(c.get("detail", "")).startswith("fired 0/")]
    bad = [c for c in bad if c not in idle]
    if idle:
        absent += idle
    fires = [c for c in absent if c.get("name") == "fires"]
    note = (f" ({len(fires)} site(s) of classes {cls} does not build under the tiny config"
            f" or of towers a text step does not run: "
            + ", ".join(str(c.get("site") or c.get("detail"))[:60] for c in fires) + ")"
            ) if fires else ""
    if not bad:
        return "ok" + note
    return "; ".join(f"{c.get('name')}: {str(c.get('detail'))[:140]}" for c in bad[:2]) + note


def run_family(src: Path, timeout: int, verify: set[str] | None = None) -> dict:
    fam = src.stem
    res: dict = {"family": fam, "targets": {}, "planned": [], "rejected": {}, "applied": False,
                 "parses": False, "import_shim": "", "shards_checked": 0, "shards_wrong": [],
                 "windows": {"held": 0, "warned": 0, "silent": 0}}
    tg = targets(src)
    res["targets"] = tg
    res["decoder"] = decoder_family(tg, targets(src, follow=False))
    # the wider rule, recorded to compare: a decoder linear whose `self.X = ...` this file's
    # own code runs counts as built by it (nemotron_nas's LlamaMLP sized from its block_configs)
    res["decoder_own_code"] = decoder_family(tg, targets(src, only_own=True))
    if not tg:
        res["why"] = NO_LINEARS
        return res
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # laid out as in a vLLM checkout (a project root with vllm/model_executor/models/), so
        # an absolute import of a sibling family resolves as the tool resolves it for a user
        (d / "pyproject.toml").write_text("# GENERATED by benchmarks/vllm_sweep.py: marks the "
                                          "copy's project root\n")
        copy = d / Path(*MODELS_PKG.split(".")) / src.name
        copy.parent.mkdir(parents=True)
        shutil.copy(src, copy)
        for sib in _siblings(src):        # sibling files it imports, and theirs
            shutil.copy(sib, copy.parent)
        with CONFIG_LOCK:       # transformers' lazy config mappings are not thread safe
            cfg = family_config(src)        # RELEASED_KEYS joined in by _released
        (d / "config.json").write_text(json.dumps(cfg, default=str))
        for model_src in (copy, copy.parent):
            asked = list(tg)
            dropped: dict[str, str] = {}
            advised: list[str] = []
            while True:
                args = ["analyze", "--model-src", str(model_src), "--model-config",
                        str(d / "config.json"), "--tp", str(TP), "--moe-tp", str(TP),
                        "--max-sites", str(len(asked)), "--out", str(d / "plan"), "--json"]
                for t in asked:
                    args += ["--target", t]
                r = _cli(args, timeout)
                try:
                    doc = json.loads(r.stdout)
                except json.JSONDecodeError:
                    res["why"] = (f"analyze gave no JSON (exit {r.returncode}): "
                                  f"{r.stderr.strip()[-200:]}")
                    return res
                # a named target the tool refuses (exit 2, the target in the message): dropped
                # and analyze run again without it, as a user would; the refusal is listed
                bad = next((t for t in asked if "error" in doc
                            and f"--target {t}:" in doc["error"]["message"]), None)
                if bad is None or len(asked) == 1:
                    break
                said = doc["error"]["message"].split(f"--target {bad}:", 1)[1].strip()
                dropped[bad] = said[:200]
                advised += [said]           # whole: the advice closes a long reason
                asked.remove(bad)
            reasons = [*advised, *(x.get("reason", "") for x in
                                            doc.get("rejections", [])),
                       doc.get("error", {}).get("message", "")]
            if not any(FOLDER_HINT in x for x in reasons):
                break
            # the tool's advice for a call path wholly in a sibling file (minicpm3's MLP, run by
            # minicpm.py's decoder forward), taken as a user would: the copy's folder (the file
            # and the siblings it imports) as the model source, every target asked again
            res["model_src"] = "folder (the tool's advice)"
        res["rejected"] = dict(dropped)
        if "error" in doc:
            res["why"] = "analyze: " + doc["error"]["message"][:200]
            return res
        res["rejected"].update({x["site"]: x["reason"][:200] for x in doc.get("rejections", [])
                                if x.get("site")})
        plan_path = d / "plan" / "prefetch_plan.yaml"
        if not plan_path.is_file():
            res["why"] = "no plan written"
            return res
        plan = yaml.safe_load(plan_path.read_text())
        for s in plan.get("sites") or []:
            key = f"{s['target']['class']}.{s['target']['attr']}"
            res["planned"].append(key)
            # manual mode names the calls a window holds, or warns that it holds none
            notes = [str(x) for x in ((s.get("evidence") or {}).get("notes") or [])]
            held = any(x.startswith("the window holds:") for x in notes)
            warned = any("the window holds no op" in x for x in notes)
            res["windows"]["held" if held else "warned" if warned else "silent"] += 1
            want = expected_dims(key, tg.get(key, ""), cfg)
            if want is not None:
                res["shards_checked"] += 1
                got = tuple(s["basis"]["dims"])
                if got != want:
                    res["shards_wrong"].append(f"{key}: {got} != {want}")
        r = _cli(["apply", str(plan_path), "--write", "--yes", "--root", str(d), "--json"], timeout)
        res["applied"] = r.returncode == 0
        if not res["applied"]:
            res["why"] = f"apply exit {r.returncode}: {(r.stdout + r.stderr).strip()[-200:]}"
        try:
            compile(copy.read_text(encoding="utf-8"), str(copy), "exec")
            res["parses"] = True
        except SyntaxError as exc:
            res["why"] = f"rewritten file does not parse: {exc}"
        # the family's time limit (an import on a loaded machine can pass two minutes)
        res["import_shim"] = _import_with_shim(copy, src.parent, timeout) or "ok"
        if res["import_shim"] == "ok" and res["applied"] and (verify is None or fam in verify):
            res["verify"] = _verify_with_shim(d, copy, src, plan_path, timeout)
        elif verify is None or fam in verify:
            res["verify"] = f"not run: import under the shim: {res['import_shim']}"
    own = [k for k in res["planned"] if not is_tower(k)]       # the decoder's, not a tower's
    attn = [k for k in own if is_attention(k)]
    mlp = [k for k in own if k not in attn]
    res["passed"] = bool(attn and mlp and res["applied"] and res["parses"]
                         and not res["shards_wrong"])
    if not res["passed"] and "why" not in res:
        res["why"] = ("no attention linear planned" if not attn else
                      "no MLP/MoE linear planned" if not mlp else
                      "; ".join(res["shards_wrong"]) or "?")
    return res


def verify_reason(text: str) -> str:
    """The reason of a verify failure, to group a sweep's failures: the stage it stopped at (the
    import under the shim, the factory's build or step, verify's own checks) and the error's
    first line (exception and message, which name the missing module, key or attribute and not
    the family) or the failed checks' names."""
    if text.startswith("not run: import under the shim: "):
        return "import: " + text[len("not run: import under the shim: "):][:90]
    if text.startswith("timed out"):
        return "timed out"
    if text.startswith("verify gave no JSON"):
        return "verify crashed"
    if text.startswith("verify: "):
        return "build/run: " + text[len("verify: "):].strip().splitlines()[0][:90]
    checks = sorted({part.split(":", 1)[0].strip() for part in text.split("; ")
                     if ":" in part})
    return "check failed: " + (", ".join(checks) or text[:50])


def done_when(counted: list[dict]) -> dict:
    """Issue 32's Done-when metric over the counted decoder families: planned and applied (the
    sweep's pass) AND `verify` ok under the shim, as a count and a percentage of all counted
    families; the families whose verify was not ok, grouped by `verify_reason`."""
    ran = [r for r in counted if "verify" in r]
    good = [r["family"] for r in ran if r.get("passed") and r["verify"].startswith("ok")]
    groups: dict[str, list[str]] = {}
    for r in ran:
        if not r["verify"].startswith("ok"):
            groups.setdefault(verify_reason(r["verify"]), []).append(r["family"])
        elif not r.get("passed"):
            groups.setdefault("verify ok, but not planned+applied", []).append(r["family"])
    for r in counted:
        if "verify" not in r and not r.get("passed"):     # stopped before verify could run
            groups.setdefault("not planned+applied (verify not run)", []).append(r["family"])
    n = len(counted)
    return {"verified": len(good), "families": n, "percent": 100 * len(good) / max(n, 1),
            "verify_run": len(ran), "verified_families": good,
            "verify_failures": dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="0.34.0")
    ap.add_argument("--cache", default=os.environ.get("VLLM_CACHE", "/work/cache/vllm"))
    ap.add_argument("--families", default="")
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--json", default="")
    ap.add_argument("--jobs", type=int, default=1,
                    help="families run at a time (each in its own subprocesses)")
    ap.add_argument("--verify", default=",".join(NAMED),
                    help="families to run `verify` on (comma list, 'all' or 'none'; about 40 s "
                         "each: the torch.compile checks): default the issue's six")
    a = ap.parse_args()
    models = wheel_models(a.version, Path(a.cache))
    only = set(a.families.split(",")) if a.families else None
    verify = None if a.verify == "all" else set() if a.verify == "none" else \
        set(a.verify.split(","))
    t0 = time.perf_counter()

    def one(f: Path) -> dict:
        try:
            return run_family(f, a.timeout, verify)
        except subprocess.TimeoutExpired:
            # still counted when it is a decoder family (the metric's denominator is all of them)
            row = {"family": f.stem, "passed": False, "why": "timed out",
                   "decoder": decoder_family(targets(f), targets(f, follow=False))}
            if verify is None or f.stem in verify:
                row["verify"] = f"timed out (a step over --timeout {a.timeout} s)"
            return row

    rows = []
    # each family runs in its own subprocesses; the threads only wait on them. `map` hands the
    # rows back in family order, so the listing reads the same for any --jobs
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for row in pool.map(one, families(models, only)):
            rows.append(row)
            tag = ("PASS" if row.get("passed") else "FAIL") if row.get("decoder") else "----"
            print(f"{tag} {row['family']:<28} "
                  f"planned {len(row.get('planned', []))}/{len(row.get('targets', {}))} "
                  f"shards {row.get('shards_checked', 0) - len(row.get('shards_wrong', []))}/"
                  f"{row.get('shards_checked', 0)} import-shim: {row.get('import_shim', '')[:60]}"
                  + f" windows {row.get('windows', {})}"
                  + ("" if row.get("passed") else f"  -- {row.get('why', '')[:160]}"),
                  flush=True)
    # files whose own classes build no decoder (drafts, multimodal wrappers of another family's
    # decoder, config.py, pure-SSM models) are listed, swept, but not counted
    wide = [r for r in rows if r.get("decoder_own_code")]
    print(f"by the wider rule (decoder linears this file's own code assigns): "
          f"{sum(1 for r in wide if r.get('passed'))}/{len(wide)}; added: "
          + ", ".join(f"{r['family']} ({'pass' if r.get('passed') else 'fail'})"
                      for r in wide if not r.get("decoder")))
    counted = [r for r in rows if r.get("decoder")]
    n = len(counted)
    ok = sum(1 for r in counted if r.get("passed"))
    win = {k: sum(r.get("windows", {}).get(k, 0) for r in rows) for k in ("held", "warned",
                                                                          "silent")}
    imp = [r for r in counted if r.get("import_shim") == "ok"]
    print(f"\n{ok}/{n} decoder families planned, applied and parsed with TP-2 shard sizes right "
          f"({100 * ok / max(n, 1):.1f} %); {len(rows) - n} of {len(rows)} files with a "
          f"*ForCausalLM build no decoder of their own; {time.perf_counter() - t0:.0f} s")
    print(f"planned sites' windows (manual mode): {win['held']} hold named calls, "
          f"{win['warned']} hold none and say so, {win['silent']} hold none silently")
    print(f"import under the shim, switch on: {len(imp)}/{n} decoder families "
          f"({sum(1 for r in imp if r.get('passed'))} of them passing)")
    for r in rows:
        if "verify" in r:
            print(f"verify {r['family']} (TP 1 under the shim, {ENV}=1 alone on a fresh model): "
                  f"{r['verify'][:200]}")
    done = done_when(counted)
    print(f"\nissue 32's Done-when: {done['verified']}/{n} decoder families planned, applied and "
          f"verified ok ({done['percent']:.1f} %); verify run on {done['verify_run']} of them")
    for why, fams in done["verify_failures"].items():
        print(f"  verify not ok, {why}: {len(fams)} ({', '.join(fams)})")
    if a.json:
        Path(a.json).write_text(json.dumps({"version": a.version, "passed": ok, "families": n,
                                            "done_when": done, "windows": win, "rows": rows},
                                           indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
