"""Sweep: plan and apply prefetches on every installed transformers decoder family, then run them.

Not part of CI (minutes of CPU). For every `transformers/models/*/modeling_*.py` that defines a
`*ForCausalLM` class:

1. build a tiny random model from the family's own config class (defaults, made small);
2. list, from the *built* model (not from the tool), every linear of the decoder layers that a
   forward pass runs (nn.Linear / Conv1D modules seen by forward hooks, fused 3-D expert
   Parameters and 2-D router Parameters of modules that ran), each as `OwnerClass.attr`;
3. `analyze --model-src <tmp copy> --model-config <its config.json> --target ...` (manual mode)
   with all of them, then `apply --write --yes` on the tmp copy; the folder's other files that
   are not modeling files (`configuration_*.py`, ...) are copied beside it, as a user's folder
   holds them (xlstm's shape helper comes from `.configuration_xlstm`);
4. load the rewritten file under the package's own module name, load the reference weights and
   check: logits bit-identical with the switch off; then, the way a user turns it on, a model
   built with `enable_prefetch: true` at the top level of the config only, and separately one
   built with `CANNBOT_PREFETCH=1` in the environment only (never a module attribute or the
   helper's ENABLED set by hand): under a recording `torch_npu` stub every applied site's
   weight reaches `npu_prefetch` and the logits are unchanged.

The model class is the one `AutoModelForCausalLM` builds for the family (gemma3:
Gemma3ForConditionalGeneration), else (or when that class needs a package this machine lacks:
gemma3n's timm) the file's first *ForCausalLM; composite configs are made small with their
sub-configs. Where the default config does not build, what a user's config gives is filled in
(sweep_required.py). A plan analyze writes and its own loader refuses is a failure.

A family passes when every target is planned, applied and verified. Each target the tool does not
plan is printed with the tool's reason; disagreements between analyze and apply are failures.

    nice -n 10 .venv/bin/python benchmarks/corpus_sweep.py [--families llama,qwen3] \
        [--timeout 240] [--json sweep.json]

`--timeout` is per family on an idle machine; the limit scales with the load when the family
starts (`family_limit`: x the 1-minute load average per core, 1 to 4), and each family's wall
and CPU seconds are printed, so a slow shared machine is told from a hang.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import gc
import importlib
import importlib.util
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import sweep_reads as reads  # noqa: E402  (beside this script)
import sweep_required as required  # noqa: E402

SMALL = {"vocab_size": 256, "max_position_embeddings": 256}
LAYERS = 2
KEEP = False      # --keep: leave each family's tmp folder (plan, rewritten file) for inspection


def transformers_models() -> Path:
    spec = importlib.util.find_spec("transformers")
    return Path(spec.origin).parent / "models"


def families(only: set[str] | None) -> list[tuple[str, Path, list[str]]]:
    """(family, modeling file, ForCausalLM class names) for each file that defines one."""
    out = []
    for f in sorted(transformers_models().glob("*/modeling_*.py")):
        if f.name == "modeling_auto.py":
            continue
        fam = f"{f.parent.name}/{f.stem[len('modeling_'):]}" if f.stem[9:] != f.parent.name \
            else f.parent.name
        if only and fam not in only and f.parent.name not in only:
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                 and n.name.endswith("ForCausalLM")]
        if names:
            out.append((fam, f, names))
    return out


# ------------------------------------------------------------------------- tiny configs

def _set(cfg, k, v) -> None:
    with contextlib.suppress(Exception):
        if getattr(cfg, k, None) != v:
            setattr(cfg, k, v)


def _shrink(cfg, widths: bool = True, twice: bool = True) -> None:
    """Fewer heads, layers, experts and tokens, with every per-head size left as the family
    defines it (rotary and latent dims stay consistent): hidden = 4 heads x head_dim.
    widths=False: only layers, experts and the vocabulary (families with stricter checks)."""
    per_layer = _per_layer_overrides(cfg)
    d = cfg.to_dict()
    amap = getattr(cfg, "attribute_map", {}) or {}
    keys = set(d) | set(amap)

    def get(k):
        with contextlib.suppress(Exception):
            v = getattr(cfg, k, None)
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        return None

    heads, hidden, kv = get("num_attention_heads"), get("hidden_size"), get("num_key_value_heads")
    if "head_dim" in d and d["head_dim"] is None and heads and hidden:
        # a default the modeling file reads as a number (ministral's getattr(config,
        # "head_dim", ...) finds None; nemotron reads config.head_dim): the derived value
        _set(cfg, "head_dim", hidden // heads)
    if "num_key_value_heads" in d and d["num_key_value_heads"] is None and heads:
        _set(cfg, "num_key_value_heads", heads)   # None: multi-head (transformers' documented meaning)
        kv = heads
    hd = get("head_dim") or (hidden // heads if hidden and heads else None)
    new_heads = 4 if heads else None
    new_hidden = min(4 * hd, 1024) if hd else (64 if hidden else None)
    if new_heads and kv and widths:
        _set(cfg, "num_key_value_heads", 1 if kv == 1 else (new_heads if kv == heads else 2))
    for k in sorted(keys):
        v = get(k)
        if v is None:
            continue
        new = None
        if not widths and not re.search(r"layers|blocks|experts|vocab|top_?k|group|max_position", k):
            continue
        if k == "hidden_size" and new_hidden:
            new = new_hidden
        elif k == "vocab_size" or (re.search(r"vocab(_size)?(_per_layer_input)?$", k)
              and v > SMALL["vocab_size"]):
            new = SMALL["vocab_size"]   # blt's encoder_hash_byte_group_vocab, unpadded_vocab_size,
            # gemma3n's vocab_size_per_layer_input
        elif re.search(r"(intermediate_size|ffn_hidden_size|ffn_dim|d_ff|ffn_size)$", k):
            base = new_hidden or 64
            new = base // 2 if re.search(r"moe|expert|shared", k) else 2 * base
        elif re.fullmatch(r"(n_routed_experts|num_experts|num_local_experts|n_experts|moe_num_experts"
                          r"|num_routed_experts)", k):
            new = min(v, 4)
        elif re.fullmatch(r"(num_experts_per_tok|moe_topk|top_k|moe_k|num_experts_per_token)", k):
            new = min(v, 2)
        elif k in ("n_group", "topk_group", "num_expert_group"):
            new = 1
        elif re.fullmatch(r"(num_hidden_layers|n_layer|num_layers|(de|en)coder_layers|n_layers"
                          r"|num_blocks)", k):     # xlstm's and the conformer's layer count
            new = LAYERS
        elif re.fullmatch(r"((\w+_)?attention_heads|n_heads?|num_heads|(\w+_)?attn_heads)", k) \
                and new_heads:
            new = new_heads
        elif k == "max_position_embeddings":
            new = min(v, SMALL["max_position_embeddings"])
        if new is not None:
            _set(cfg, k, new)
    vocab = getattr(cfg, "vocab_size", None) or SMALL["vocab_size"]
    for tok in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        v = getattr(cfg, tok, None)
        if isinstance(v, int) and v >= vocab:
            _set(cfg, tok, vocab - 1)
        elif isinstance(v, list):
            _set(cfg, tok, [min(x, vocab - 1) for x in v])
    lt = getattr(cfg, "layer_types", None)
    if isinstance(lt, (list, tuple)) and lt:
        kinds = list(dict.fromkeys(lt))[:4]
        # each kind twice: a next-layer prefetch of a kind's module (qwen3_5's linear attention
        # after a full-attention layer) has a following layer of that kind to fire in
        n = max(LAYERS, 2 * len(kinds))
        pattern = (kinds * n)[:n]
        if not twice:
            # config classes that key per-layer settings by layer index (dots3_note's
            # per_layer_config) refuse a reordered pattern: the family's own, cut after each
            # kind's second layer, so its layer-to-layer order is the real model's
            want = {k: min(2, list(lt).count(k)) for k in kinds}
            n = next((j + 1 for j in range(len(lt))
                      if all(list(lt[:j + 1]).count(k) >= c for k, c in want.items())), len(lt))
            n = max(LAYERS, n)
            pattern = list(lt[:n])
            if n > 4 * len(kinds):      # a long prefix (a kind first seen deep in the stack):
                n = max(LAYERS, len(kinds))          # each kind once, as before
                pattern = (kinds * n)[:n]
        with contextlib.suppress(Exception):
            cfg.layer_types = pattern
            cfg.num_hidden_layers = n
    if per_layer is not None:
        _shrink_overrides(cfg, per_layer)
    with contextlib.suppress(Exception):
        cfg._attn_implementation = "eager"


def _per_layer_overrides(cfg) -> dict | None:
    """A heterogeneous config's per-layer overrides when they set head counts (transformers'
    `per_layer_config`: dots3_note's 64-head layers beside 128-head ones, whose global head count
    cannot be read while they are on), taken off so the global values read and shrink as usual;
    None otherwise."""
    if not getattr(cfg, "is_heterogeneous", False):
        return None
    raw = cfg.to_dict().get("per_layer_config") or {}
    if not any(HEADS.search(k) for v in raw.values() for k in v):
        return None        # only per-head sizes differ (gemma4's head_dim): left as they are
    cfg.per_layer_config = None
    return {int(i): dict(v) for i, v in raw.items()}


def _shrink_overrides(cfg, per_layer: dict) -> None:
    """The overrides back on the layers the tiny model keeps, their head counts the global ones
    (their per-head sizes and ranks as the family sets them)."""
    n = getattr(cfg, "num_hidden_layers", LAYERS)
    kept = {}
    for i, ov in per_layer.items():
        if i >= n:
            continue
        for k in list(ov):
            if HEADS.search(k) and isinstance(getattr(cfg, k, None), int):
                ov[k] = getattr(cfg, k)
        kept[i] = ov
    with contextlib.suppress(Exception):
        cfg.per_layer_config = kept or None


# widths the uniform scaling divides (every per-head size - head_dim, d_head, d_state - is kept)
HEADS = re.compile(r"(heads|n_head)$")
WIDTHS = re.compile(r"(hidden_size|hidden_dim|d_model|embed_dim|embedding_dim|n_embd|n_embed|d_inner"
                    r"|intermediate_size|ffn_dim|ffn_hidden_size|d_ff|ffn_size)$")
MODES = ("small", "scaled", "kept")


def _int_items(cfg):
    for k in sorted(set(cfg.to_dict()) | set(getattr(cfg, "attribute_map", {}) or {})):
        with contextlib.suppress(Exception):
            v = getattr(cfg, k, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                yield k, v


def _scale_factor(parts: list) -> int:
    """The largest power of two (at most 64) dividing every head count and model width of
    every part, so that hidden = heads x head_dim, a Mamba mixer's heads x d_head = expand x
    hidden and a tower's `text_hidden_size` = the text model's width all still hold after
    dividing."""
    f = 64
    for part in parts:
        for k, v in _int_items(part):
            if HEADS.search(k) or (WIDTHS.search(k) and not re.search(r"intermediate|ffn|d_ff", k)):
                while f > 1 and v % f:
                    f //= 2
    return f


def _scale(cfg, f: int) -> None:
    for k, v in list(_int_items(cfg)):
        if HEADS.search(k) or WIDTHS.search(k):
            _set(cfg, k, max(1, v // f))


def tiny_config(cls, mode: str = "small", twice: bool = True, fill: bool = False):
    """The family's default config made small. "small": 4 heads of the family's head_dim;
    "scaled" (families whose other sizes must stay in step with the width: Mamba heads,
    sliding-window heads, towers' `text_hidden_size`): every head count and width of the config
    and its sub-configs divided by one power of two; "kept": the family's widths.
    fill=True (tried after the defaults fail): what a user's config must give that the
    default leaves unset (`required.fill`)."""
    cfg_cls = getattr(cls, "config_class", None)
    if cfg_cls is None:
        raise RuntimeError(f"{cls.__name__} has no config_class")
    cfg = required.validated(cfg_cls) if fill else cfg_cls()
    parts = [cfg] + _sub_configs(cfg)   # text, vision, audio parts...: small too, none skipped
    source = Path(sys.modules[cls.__module__].__file__).read_text(encoding="utf-8")
    f = _scale_factor(parts) if mode == "scaled" else 1
    for part in parts:
        layers = getattr(part, "num_hidden_layers", None)
        if fill:
            required.fill(part, source)
        _shrink(part, widths=mode == "small", twice=twice)
        if f > 1:
            _scale(part, f)
        if fill:
            required.follow_layers(part, layers)
    if fill:
        required.fill_sub_configs(cfg, source)
    return cfg


def _sub_configs(cfg, depth: int = 0) -> list:
    """Every config object nested in `cfg` (text_config, vision_config, decoder, ...)."""
    out = []
    for v in list(vars(cfg).values()):
        if v is not cfg and hasattr(v, "to_dict") and type(v).__name__.endswith("Config"):
            out.append(v)
            if depth < 3:
                out += _sub_configs(v, depth + 1)
    return out


def causal_lm_class(module, fam_dir: str, classes: list[str]) -> str:
    """The class `AutoModelForCausalLM` builds for the family's model type (what a user who
    loads the family gets: Gemma3ForConditionalGeneration for gemma3), when this file defines
    it; else the file's first *ForCausalLM."""
    with contextlib.suppress(Exception):
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(fam_dir)
        if isinstance(name, str) and isinstance(getattr(module, name, None), type):
            return name
    return classes[0]


def input_ids(cfg):
    """4 random tokens in the shape the config asks for: one row per codebook where the model
    reads `num_codebooks` of them (musicgen: `input_ids` of shape (batch_size * num_codebooks,
    sequence_length), its forward's docstring)."""
    import torch

    vocab = getattr(cfg, "vocab_size", None) or getattr(cfg.get_text_config(), "vocab_size", 256)
    rows = getattr(cfg, "num_codebooks", None)
    rows = rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else 1
    return torch.randint(3, vocab - 1, (rows, 4))


# ------------------------------------------------------------------------- targets

def layer_targets(model, module_name: str, run) -> list[str]:
    """`OwnerClass.attr` of every linear a forward pass runs inside a stacked layer."""
    import torch
    from torch import nn

    ran: set[int] = set()
    hooks = []
    linear_types = (nn.Linear,)
    try:
        from transformers.pytorch_utils import Conv1D
        linear_types = (nn.Linear, Conv1D)
    except ImportError:
        pass
    for m in model.modules():       # every module: a 3-D Parameter counts only where it ran
        hooks.append(m.register_forward_hook(lambda mod, i, o: ran.add(id(mod))))
    try:
        with torch.no_grad():
            run(model)
    finally:
        for h in hooks:
            h.remove()
    mods = dict(model.named_modules())
    # a 3-D Parameter no MatMul reads is no weight (zamba's A_log): sweep_reads.py
    not_weights = reads.elementwise_only(model, run, [p for p in model.parameters() if p.dim() == 3])
    out: dict[str, None] = {}
    for name, m in mods.items():
        if not re.search(r"\.\d+(\.|$)", name):
            continue            # not inside a stack of layers
        parent_name, _, attr = name.rpartition(".")
        parent = mods.get(parent_name)
        if isinstance(m, linear_types) and id(m) in ran:
            if isinstance(parent, (nn.ModuleList, nn.Sequential)):
                continue       # a linear held in a list: not a CLASS.ATTR target
            out[f"{type(parent).__name__}.{attr}"] = None
        elif not isinstance(m, (linear_types, nn.Embedding, nn.LayerNorm)) and \
                type(m).__module__ == module_name and (id(m) in ran or id(parent) in ran):
            # (its own forward or its parent's ran: experts' tensors read by the MoE block;
            # not phi4_multimodal's audio convolution, which a text-only forward never runs)
            for pname, p in m.named_parameters(recurse=False):
                if id(p) in not_weights:
                    continue
                if p.dim() == 3 or (p.dim() == 2 and re.search(r"router|gate", type(m).__name__, re.I)):
                    out[f"{type(m).__name__}.{pname}"] = None
    return list(out)


def stacked_modules(model) -> list:
    """Modules inside a stack of layers (a `.N.` in their path)."""
    return [m for name, m in model.named_modules() if re.search(r"\.\d+\.", name)]


def own_class_targets(model, module_name: str, targets: list[str]) -> tuple[list[str], list[str]]:
    """Targets whose class is defined in the family's file, and those defined elsewhere."""
    defined = {type(m).__name__ for m in model.modules() if type(m).__module__ == module_name}
    mine = [t for t in targets if t.split(".")[0] in defined]
    return mine, [t for t in targets if t not in mine]


# ------------------------------------------------------------------------- the run

@contextlib.contextmanager
def loaded_as(module_name: str, path: Path, helper: Path):
    pkg = module_name.rpartition(".")[0]
    saved = {k: sys.modules.get(k) for k in (module_name, f"{pkg}._cannbot_prefetch")}
    saved_attrs: dict = {}
    try:
        hs = importlib.util.spec_from_file_location(f"{pkg}._cannbot_prefetch", helper)
        hmod = importlib.util.module_from_spec(hs)
        hs.loader.exec_module(hmod)
        sys.modules[f"{pkg}._cannbot_prefetch"] = hmod
        spec = importlib.util.spec_from_file_location(module_name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = mod
        spec.loader.exec_module(mod)
        # the package's names point at the rewritten classes too, as they would for a user who
        # applied the plan to the installed file: AutoModel.from_config(config.text_config)
        # (gemma3's language model) builds its class from the package
        package = sys.modules.get(pkg)
        for name, obj in vars(mod).items():
            if package is not None and isinstance(obj, type) and name in vars(package):
                saved_attrs[name] = vars(package)[name]
                setattr(package, name, obj)
        yield mod, hmod
    finally:
        package = sys.modules.get(pkg)
        for name, obj in saved_attrs.items():
            setattr(package, name, obj)
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def _logits(out):
    return getattr(out, "logits", out[0] if isinstance(out, (tuple, list)) else out)


def _weights_of(model, target: str) -> list:
    """Every tensor the target names in the built model (one per layer instance)."""
    cls, attr = target.split(".", 1)
    out = []
    for m in model.modules():
        if cls not in {k.__name__ for k in type(m).__mro__}:   # a subclass holds it too
            continue
        obj = m
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            continue
        w = getattr(obj, "weight", obj)
        out.append(w)
    return out


def run_family(fam: str, path: str, classes: list[str]) -> dict:
    import torch

    from cannbot_prefetch.errors import CannbotError
    from cannbot_prefetch import api
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.verify.stub import stub_torch_npu
    from cannbot_prefetch.verify.routes import env_switch

    res: dict = {"family": fam, "file": path, "status": "setup", "targets": [], "planned": [],
                 "rejected": [], "refused": [], "problems": [], "applied": [], "fires": {}}
    src = Path(path)
    module_name = f"transformers.models.{src.parent.name}.{src.stem}"
    try:
        orig = importlib.import_module(module_name)
        cls_name = causal_lm_class(orig, src.parent.name, classes)
        cls = getattr(orig, cls_name)
        ids = None

        def run(m):
            return m(input_ids=ids, use_cache=False)

        # the last try keeps the family's widths; twice=False: config classes that refuse a
        # repeated layer pattern; fill=True: what a user's config gives that the default leaves
        # unset (sweep_required.py), tried only after the default fails
        tries = [(m, t, f) for m in MODES for t in (True, False) for f in (False, True)]
        i = -1
        while i + 1 < len(tries):
            i += 1
            mode, twice, fill = tries[i]
            try:
                cfg = tiny_config(cls, mode, twice, fill)
                torch.manual_seed(0)
                base = cls(cfg).eval()
                stacked = stacked_modules(base)
                if stacked and not any(type(m).__module__ == module_name for m in stacked):
                    # (gemma4_assistant: its decoder is AutoModel.from_config(text_config), the
                    # layers of gemma4's file; the family's own forward needs the target
                    # model's shared_kv_states): no layer linears of its own, as fuyu
                    res["status"] = "no-targets"
                    res["rejected"].append({"target": "-", "by": "sweep", "reason": (
                        "no module of the family's file in a stack of layers; they come from "
                        + ", ".join(sorted({type(m).__module__ for m in stacked})))})
                    return res
                ids = input_ids(cfg)
                with torch.no_grad():
                    ref = _logits(run(base))
                break
            except ImportError as exc:
                if cls_name == classes[0]:
                    raise
                # an optional package the Auto class's other towers need (gemma3n's vision
                # tower: timm) and this machine lacks: the file's own causal LM, as a text user
                # without that package builds it
                res["class_note"] = (f"{cls_name} needs a missing package "
                                     f"({str(exc).split('requires the')[-1].split(' library')[0].strip()}): "
                                     f"built {classes[0]}")
                cls_name = classes[0]
                cls, i = getattr(orig, cls_name), -1
            except Exception:
                if i == len(tries) - 1:
                    raise
        targets = layer_targets(base, module_name, run)
    except Exception as exc:  # the sweep could not build a tiny model: not the tool's fault
        res["problems"].append(f"tiny model: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                               if str(exc) else type(exc).__name__)
        return res
    mine, elsewhere = own_class_targets(base, module_name, targets)
    res["targets"] = mine
    for t in elsewhere:
        res["rejected"].append({"target": t, "reason": "class defined outside the family's file "
                                                       "(sweep: not targeted)", "by": "sweep"})
    if not mine:
        res["status"] = "no-targets"
        return res
    tmp = Path(tempfile.mkdtemp(prefix=f"sweep-{src.parent.name}-"))
    try:
        model_file = tmp / src.name
        shutil.copyfile(src, model_file)
        for sib in src.parent.glob("*.py"):      # the user's folder, less other modeling files
            if not sib.name.startswith("modeling_") and sib.name != "__init__.py":
                shutil.copyfile(sib, tmp / sib.name)
        (tmp / "config.json").write_text(cfg.to_json_string(use_diff=False))
        out_dir = tmp / "out"

        def plan_with(ts):
            planned = api.analyze(None, model_src=str(model_file),
                                  model_config=str(tmp / "config.json"), targets=tuple(ts),
                                  out=str(out_dir))
            planned.save()
            return planned
        try:
            doc = plan_with(mine).to_json()
        except CannbotError:
            # the tool stops at the first unplaceable target: find each one's reason
            ok = []
            for t in mine:
                try:
                    plan_with([t])
                    ok.append(t)
                except CannbotError as exc:
                    if str(exc).startswith("plan:"):   # analyze wrote what its loader refuses
                        res["problems"].append(f"{t}: analyze's plan refused by its own "
                                               f"loader: {exc}")
                    res["rejected"].append({"target": t, "reason": str(exc), "by": "analyze"})
            doc = plan_with(ok).to_json() if ok else None
        if doc is None:
            res["status"] = "refused"
            return res
        for r in doc.get("rejections", []):
            res["rejected"].append({"target": r.get("site") or r.get("signature"),
                                    "reason": r.get("reason"), "by": "analyze"})
        plan_path = out_dir / "prefetch_plan.yaml"
        plan = load_plan(plan_path)
        res["planned"] = [f"{s.target.cls}.{s.target.attr}" for s in plan.sites]
        if not plan.sites:
            res["status"] = "refused"
            return res
        changes = api.apply(plan_path, root=tmp)
        changes.write()
        res["refused"] = [{"site": r.site, "reason": r.reason} for r in changes.refused]
        if res["refused"]:
            res["problems"].append("apply refused a site analyze planned")
        applied = set(changes.applied)
        res["applied"] = sorted(applied)
        helper = tmp / "_cannbot_prefetch.py"
        with loaded_as(module_name, model_file, helper) as (mod, hmod):
            with env_switch(None):
                model = getattr(mod, cls_name)(cfg).eval()
            model.load_state_dict(base.state_dict(), strict=False)
            with torch.no_grad():
                off = _logits(run(model))
            res["off_identical"] = bool(torch.equal(ref, off))
            if not res["off_identical"]:
                res["problems"].append("switch off: logits differ from the original file's")
            # switch on the way a user does: the top level of the config the model is built
            # from, then (separately) the environment alone; never a module attribute by hand
            on_cfg = copy.deepcopy(cfg)
            setattr(on_cfg, "enable_prefetch", True)
            model = None                       # the off model goes before the next is built
            gc.collect()
            for route, route_cfg, env in (("config", on_cfg, None), ("env", cfg, "1")):
                with env_switch(env):      # set for the whole process's run, as a user sets it
                    model = getattr(mod, cls_name)(route_cfg).eval()
                    model.load_state_dict(base.state_dict(), strict=False)
                    with stub_torch_npu() as rec, torch.no_grad():
                        on = _logits(run(model))
                if not torch.equal(off, on):
                    res["problems"].append(f"switch on ({route}): logits differ from switch off")
                seen = {id(c.weight) for c in rec.calls}
                fires = res["fires"].setdefault(route, {})
                for s in plan.sites:
                    if s.id not in applied:
                        continue
                    ws = _weights_of(model, f"{s.target.cls}.{s.target.attr}")
                    fires[s.id] = any(id(w) in seen for w in ws)
                    if not fires[s.id]:
                        res["problems"].append(f"{s.target.cls}.{s.target.attr}: switch on by "
                                               f"{route}, the weight never reached npu_prefetch")
                model = rec = seen = None        # one rewritten model at a time (heap limit)
                gc.collect()
        fully = (not res["problems"] and len(res["planned"]) == len(mine)
                 and len(applied) == len(mine) and not any(r["by"] != "sweep" for r in res["rejected"]))
        res["status"] = "pass" if fully else ("fail" if res["problems"] else "refused")
    except Exception as exc:
        res["status"] = "fail"
        tb = traceback.format_exc().strip().splitlines()
        res["problems"].append(f"crash: {type(exc).__name__}: {exc}"[:300] + " @ " + " | ".join(tb[-3:])[:400])
    finally:
        if KEEP:
            res["tmp"] = str(tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return res


def _limit_memory(mb: int) -> None:
    """Bound the worker's heap so one oversized default config cannot starve a shared machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (mb << 20, mb << 20))


def _worker(args):
    global KEEP
    *rest, KEEP = args
    cpu0 = time.process_time()
    r = run_family(*rest)
    r["cpu_s"] = round(time.process_time() - cpu0, 1)    # the worker's CPU, all its threads
    return r


# at most this many times --timeout on a loaded machine (a hang still stops, later)
MAX_LOAD_SCALE = 4.0


def family_limit(base: float) -> tuple[float, float]:
    """(seconds a family may take, the load factor): --timeout on an idle machine, times the
    runnable processes per core (1-minute load average / cores, 1 to MAX_LOAD_SCALE) when the
    family starts. A wall-clock limit alone failed blt at 240 s on a shared 2-core machine: it
    needs about 140 s of CPU (measured alone, `time`: 126 s user + 12 s sys) and took 371 s of
    wall time at a load of 8-9, not a hang."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:              # no load average on this platform: the base limit
        load = 1.0
    f = min(MAX_LOAD_SCALE, max(1.0, load))
    return base * f, f


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", help="comma-separated family names (default: all)")
    ap.add_argument("--timeout", type=float, default=240.0,
                    help="seconds per family on an idle machine (scaled by the load: "
                         "family_limit)")
    ap.add_argument("--max-mb", type=int, default=3072, help="heap limit of the worker, MiB")
    ap.add_argument("--json", help="write every family's result here")
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    ap.add_argument("--keep", action="store_true", help="keep each family's tmp folder")
    ap.add_argument("--shard", default="1/1",
                    help="I/N: only every N-th family from the I-th (run N shards side by side)")
    a = ap.parse_args(argv)
    only = set(a.families.split(",")) if a.families else None
    fams = families(only)
    i, n = (int(x) for x in a.shard.split("/"))
    fams = fams[i - 1::n]
    results = []
    t0 = time.time()
    ctx = mp.get_context("spawn")
    def new_pool():
        return ctx.Pool(1, initializer=_limit_memory, initargs=(a.max_mb,), maxtasksperchild=10)

    pool = new_pool()
    try:
        for fam, f, classes in fams:
            for attempt in (1, 2):
                limit, scale = family_limit(a.timeout)
                t_fam = time.time()
                job = pool.apply_async(_worker, ((fam, str(f), classes, a.keep),))
                try:
                    r = job.get(timeout=limit)
                    r["wall_s"] = round(time.time() - t_fam, 1)
                except mp.TimeoutError:
                    pool.terminate()
                    pool = new_pool()
                    r = {"family": fam, "file": str(f), "status": "fail", "targets": [],
                         "planned": [], "rejected": [], "refused": [],
                         "problems": [f"timed out after {limit:.0f} s (--timeout {a.timeout:.0f}"
                                      f" x load {scale:.1f} per core)"]}
                    break
                if attempt == 1 and any("allocate memory" in p for p in r["problems"]):
                    pool.terminate()        # heap left by earlier families: once more, fresh
                    pool = new_pool()
                    continue
                break
            results.append(r)
            if not a.quiet:
                _print_one(r)
    finally:
        pool.terminate()
    _summary(results, time.time() - t0)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


def _print_one(r: dict) -> None:
    fires = " ".join(f"fires({k}) {sum(v.values())}/{len(v)}" for k, v in r.get("fires", {}).items())
    off = {True: "off bit-identical", False: "off DIFFERS"}.get(r.get("off_identical"), "")
    secs = f"{r['wall_s']:.0f} s wall, {r.get('cpu_s', 0):.0f} s CPU" if "wall_s" in r else ""
    print(f"{r['status']:10s} {r['family']:32s} targets {len(r['targets']):3d} "
          f"planned {len(r['planned']):3d} applied {len(r.get('applied', [])):3d} {off} {fires} "
          f"{secs}", flush=True)
    if r.get("class_note"):
        print(f"    class: {r['class_note']}")
    for x in r["rejected"]:
        print(f"    not planned ({x['by']}) {x['target']}: {x['reason']}")
    for x in r["refused"]:
        print(f"    apply refused {x['site']}: {x['reason']}")
    for p in r["problems"]:
        print(f"    problem: {p}")
    if r.get("tmp"):
        print(f"    kept: {r['tmp']}")


def _summary(results: list[dict], secs: float) -> None:
    counted = [r for r in results if r["status"] not in ("setup", "no-targets")]
    ok = [r for r in counted if r["status"] == "pass"]
    print()
    print(f"families with a *ForCausalLM: {len(results)}; tiny model not built by the sweep: "
          f"{sum(r['status'] == 'setup' for r in results)}; no layer linears: "
          f"{sum(r['status'] == 'no-targets' for r in results)}")
    n_t = sum(len(r["targets"]) for r in counted)
    n_p = sum(len(r["planned"]) for r in counted)
    print(f"targets: {n_t}, planned {n_p}")
    if counted:
        print(f"PASS RATE: {len(ok)}/{len(counted)} families fully planned, applied and verified "
              f"({100.0 * len(ok) / len(counted):.1f} %) in {secs:.0f} s")
    for st in ("refused", "fail", "setup"):
        names = [r["family"] for r in results if r["status"] == st]
        if names:
            print(f"{st}: {', '.join(names)}")


if __name__ == "__main__":
    sys.exit(main())
