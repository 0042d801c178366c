"""What a user's config must give that a family's default config leaves unset (corpus sweep).

`benchmarks/corpus_sweep.py` builds each family from its config class's defaults. A few
defaults are None (or empty) where the modeling file reads a number or a per-kind entry: no
checkpoint leaves them unset, so a user's config.json always gives them. The sweep tries these
fills only after the plain defaults fail to build (`fill` only for unset keys the modeling file
reads). Each value says where it comes from: derived from the config itself, the sweep's own
tiny size, the family's published checkpoint, or the config validator's own message.
"""

from __future__ import annotations

import ast
import contextlib
import re

# the sweep's tiny sizes (corpus_sweep._shrink caps every family at these): 4 routed experts,
# top-2, one group; one shared expert is the smallest count that builds a shared MLP
COUNTS = (
    (re.compile(r"(n_routed_experts|num_experts|num_local_experts|n_experts|moe_num_experts)"), 4),
    (re.compile(r"(num_experts_per_tok|moe_topk|top_k|moe_k|num_experts_per_token)"), 2),
    (re.compile(r"(n_shared_experts|num_shared_experts)"), 1),
    (re.compile(r"(n_group|topk_group|num_expert_group)"), 1),
)
# a token indexer's budget (tokens kept per query) and its compression ratio (tokens per
# block): the budget must be a multiple of the ratio (qwen4_exp's validator); 2 blocks of 2
# tokens fit the sweep's 4-token input
INDEXER = {"indexer_compress_ratio": 2, "indexer_budget": 4}
# optional by the config's docstring, yet read as a number with no None branch: the value of the
# family's published checkpoint (dbrx: `qkv.clamp(min=..., max=self.clip_qkv)` raises on None;
# databricks/dbrx-instruct config.json, "attn_config": {"clip_qkv": 8, ...})
CHECKPOINT = {"clip_qkv": 8}


def _reads(source: str, cfg, key: str) -> bool:
    """The modeling file reads `key` (or an attribute_map alias of it) off an object."""
    amap = getattr(cfg, "attribute_map", {}) or {}
    names = {key} | {a for a, k in amap.items() if k == key}
    return any(re.search(rf"\.{re.escape(n)}\b", source) for n in names)


def _set(cfg, k, v) -> None:
    with contextlib.suppress(Exception):
        setattr(cfg, k, v)


def _unset(cfg) -> list[str]:
    keys = set(cfg.to_dict()) | set(getattr(cfg, "attribute_map", {}) or {})
    out = []
    for k in sorted(keys):
        with contextlib.suppress(Exception):
            if getattr(cfg, k) is None:
                out.append(k)
    return out


def layer_kinds(source: str) -> list[str]:
    """The layer kinds a modeling file tells apart: string constants it compares a
    `layer_type(s)` expression with, "full_attention" first (transformers' attention kind, the
    key of every causal-mask mapping)."""
    kinds = {"full_attention": None}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and "layer_type" in ast.unparse(node):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and isinstance(side.value, str):
                    kinds[side.value] = None
    return list(kinds)


def fill(cfg, source: str) -> None:
    """Give each unset key the modeling file reads a value a user's config would carry."""
    for k in _unset(cfg):
        if not _reads(source, cfg, k):
            continue
        for pat, v in COUNTS:
            if pat.fullmatch(k):
                _set(cfg, k, v)
                break
        else:
            if k in CHECKPOINT:
                _set(cfg, k, CHECKPOINT[k])
            _fill_indexer(cfg, k)
    if "layer_types" in cfg.to_dict() and getattr(cfg, "layer_types", 0) is None \
            and re.search(r"layer_types\[", source):
        # lfm2_moe indexes config.layer_types per layer: every kind the file tells apart
        kinds = layer_kinds(source)
        n = getattr(cfg, "num_hidden_layers", None) or len(kinds)
        _set(cfg, "layer_types", (kinds * n)[:n])
    _fill_rope_kinds(cfg, source)
    lang = getattr(cfg, "languages", None)
    if "default_language" in cfg.to_dict() and getattr(cfg, "default_language", 0) is None and lang:
        # xmod: what `set_default_language(lang)` sets (the adapters' first language)
        _set(cfg, "default_language", list(lang)[0])


def _get(cfg, k):
    with contextlib.suppress(Exception):     # a per-layer key raises on global access
        return getattr(cfg, k, None)
    return None


def _fill_indexer(cfg, k: str) -> None:
    if not k.startswith("indexer_"):
        return
    heads, head_dim = _get(cfg, "num_attention_heads"), _get(cfg, "head_dim")
    if k in INDEXER:
        _set(cfg, k, INDEXER[k])
    elif k == "indexer_kv_heads":
        _set(cfg, k, 1)              # qwen4_exp's validator: "QSA requires indexer_kv_heads=1"
    elif k == "indexer_n_heads" and heads:
        _set(cfg, k, heads)          # as many as the attention's query heads
    elif k == "indexer_head_dim" and head_dim:
        _set(cfg, k, head_dim)       # the attention's head_dim: its rotary part fits (validator)


def _fill_rope_kinds(cfg, source: str) -> None:
    """cohere_compass's rotary reads `rope_parameters[layer_type]` for every kind of
    `layer_types`; a default with no entry for a kind gets transformers' default rotary
    (`rope_type` "default", `rope_theta` the config's `default_theta`, documented in
    modeling_rope_utils as the value an omitted rope_theta takes)."""
    rp, lt = getattr(cfg, "rope_parameters", None), getattr(cfg, "layer_types", None)
    if not (isinstance(rp, dict) and isinstance(lt, (list, tuple))
            and re.search(r"rope_parameters\[layer_type\]", source)):
        return
    theta = getattr(cfg, "default_theta", None) or 10_000.0
    for kind in dict.fromkeys(lt):
        if kind not in rp:
            rp[kind] = {"rope_type": "default", "rope_theta": float(theta)}


def fill_sub_configs(cfg, source: str) -> None:
    """A sub-config the modeling file reads `rope_theta` from (dbrx: `attn_config.rope_theta`)
    and which has none gets the model's own: `rope_parameters["rope_theta"]` of the config
    holding it, the value its rotary embedding uses."""
    rp = getattr(cfg, "rope_parameters", None)
    theta = rp.get("rope_theta") if isinstance(rp, dict) else None
    for name, sub in list(vars(cfg).items()):
        if hasattr(sub, "to_dict") and theta is not None and \
                re.search(rf"\b{re.escape(name)}\.rope_theta\b", source) and \
                getattr(sub, "rope_theta", None) is None:
            _set(sub, "rope_theta", theta)


def follow_layers(cfg, old_layers) -> None:
    """A count of layers equal to the layer count ("all layers": a Gemma 4 assistant's
    `num_kv_shared_layers`, set so by its own config) stays equal to it when the sweep changes
    the layer count, one that no longer fits keeps its share; derived per-layer lists are derived again (zamba2's `hybrid_layer_ids`,
    as its config's __post_init__ computes them from `layers_block_type`)."""
    new = getattr(cfg, "num_hidden_layers", None)
    if isinstance(old_layers, int) and isinstance(new, int) and new != old_layers:
        count = {"num_hidden_layers", (getattr(cfg, "attribute_map", {}) or {}).get(
            "num_hidden_layers")}                 # the layer count itself (dbrx: n_layers)
        for k in _int_keys(cfg):
            v = getattr(cfg, k)
            if k in count or not k.endswith("_layers"):
                continue
            if v == old_layers:
                _set(cfg, k, new)
            elif new < v < old_layers:
                # a part of the layers that no longer fits (gemma3n: 15 of 35 layers share
                # their KV cache): the same share of the new count, at least one and not all
                _set(cfg, k, min(new - 1, max(1, round(v * new / old_layers))))
    if isinstance(getattr(cfg, "hybrid_layer_ids", None), list):
        kinds = getattr(cfg, "layers_block_type", None) or []
        _set(cfg, "hybrid_layer_ids", [i for i, t in enumerate(kinds) if t == "hybrid"])


def _int_keys(cfg) -> list[str]:
    out = []
    for k in sorted(cfg.to_dict()):
        with contextlib.suppress(Exception):
            v = getattr(cfg, k)
            if isinstance(v, int) and not isinstance(v, bool):
                out.append(k)
    return out


REQUIRED = re.compile(r"(\w+) must be (-?\d+|True|False|None), got")


def validated(cfg_cls, rounds: int = 8):
    """The config class built with the values its own validator names (gemma4_assistant:
    "hidden_size_per_layer_input must be 0, got 256" for the text config its default builds: the
    assistant's docstring builds it from a text config with those values), each set where the
    validator reads it: a field of the class, else its text sub-config."""
    top: dict = {}
    subs: dict = {}
    fields = set(getattr(cfg_cls, "__dataclass_fields__", {}))
    sub_key = next(iter(getattr(cfg_cls, "sub_configs_defaults", {}) or {}), None)
    for _ in range(rounds):
        try:
            return cfg_cls(**top, **({sub_key: dict(subs)} if subs else {}))
        except Exception as exc:
            m = REQUIRED.search(str(exc))
            if m is None:
                raise
            key, text = m.groups()
            value = {"True": True, "False": False, "None": None}.get(text, None)
            value = int(text) if value is None and text != "None" else value
            if key in fields or sub_key is None:
                if top.get(key, object()) == value:
                    raise
                top[key] = value
            else:
                if subs.get(key, object()) == value:
                    raise
                subs[key] = value
    return cfg_cls(**top, **({sub_key: dict(subs)} if subs else {}))
