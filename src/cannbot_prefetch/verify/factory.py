"""The built-in `verify` factory for transformers-style model files (no `--factory` needed).

    cannbot prefetch verify PLAN --model-config config.json

From the plan's (rewritten) model file and the model's config.json it builds a *tiny* random
model of the same architecture (policy.yaml `verify.tiny_model`: two layers, few heads, small
widths, fixed seed) and one decode step: a short prompt is run once to fill the KV cache where
the model has one, and every call then decodes one token from a fresh copy of that cache, so the
switch-off and switch-on runs see the same state and must give identical outputs.

A transformers file copied into a project keeps its relative imports (`from ...activations
import ACT2FN`): it is loaded as a module of the transformers package it came from
(`transformers.models.<name>`, from its file name or the config's `model_type`), so those imports
resolve against the installed transformers. The factory contract itself (for `--factory
MODULE:FUNC`) is in the model-infer-prefetch skill: FUNC() returns (model, inputs).
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Mapping

from ..errors import InputError
from ..policy import Policy

SEED = 0
MAX_CONFIG_BYTES = 16 << 20   # a transformers config.json is a few KiB


def build(plan_path: str | Path, config_path: str | Path | None,
          root: str | Path | None = None, *, switch_on: bool = False,
          policy: Policy | None = None) -> tuple[Any, Any]:
    """(model, inputs) for `verify`: the tiny model of the plan's model file and one decode step.

    The model file is a path the plan names, so it obeys apply's root rule (rewrite/root.py)
    before anything is imported: a plan may not make verify run a module outside the project.
    `switch_on`: the plan's switch set to true at the top level of the config, as a user sets it
    in config.json (verify/routes.py), and nowhere else. `policy`: verify's (the tiny model's
    caps); None: the shipped one."""
    import torch

    from ..plan import load_plan
    from ..rewrite.root import project_root, under_root

    plan_path = Path(plan_path)
    pol = policy or Policy.load()
    plan = load_plan(plan_path, policy=pol)
    if not plan.sites:
        raise InputError("the plan has no sites: nothing to verify", path=str(plan_path))
    top = project_root(plan_path, root)
    site = plan.sites[0]
    _, model_file = under_root(plan_path, site.target.file, top, f"site {site.id}: target.file")
    if not model_file.is_file():
        raise InputError(f"site {site.id}: target.file not found", path=str(model_file))
    cfg_file = _config_file(config_path, model_file, plan_path)
    data = _read_config(cfg_file)
    module = load_model_module(model_file, data, top)
    model_cls = _model_class(module, data, model_file)
    tiny = tiny_config(data, pol["verify"]["tiny_model"])
    if switch_on:
        *parents, key = plan.switch.config_path.split(".")
        node = tiny
        for p in parents:
            node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else {}
        node[key] = True
    config = _make_config(model_cls, module, tiny, cfg_file)
    torch.manual_seed(SEED)
    try:
        model = model_cls(config)
    except Exception as exc:  # noqa: BLE001 - a model that cannot be built from its config
        raise InputError(f"cannot build {model_cls.__name__} from the tiny config of {cfg_file} "
                         f"({type(exc).__name__}: {exc})",
                         hint="write a factory and pass --factory MODULE:FUNC") from None
    model.eval()
    return decode_step(model, _vocab(config))


# ------------------------------------------------------------------------------ the config
def _config_file(given, model_file: Path, plan_path: Path) -> Path:
    if given is not None:
        p = Path(given)
        if not p.is_file():
            raise InputError("config.json not found", path=str(p))
        return p
    for cand in (model_file.with_name("config.json"), plan_path.with_name("config.json")):
        if cand.is_file():
            return cand
    raise InputError("verify needs --factory MODULE:FUNC, or --model-config config.json for the "
                     "built-in factory (no config.json beside the model file or the plan)",
                     path=str(model_file))


def _read_config(path: Path) -> dict[str, Any]:
    from ..inputfile import read_regular

    try:
        data = json.loads(read_regular(path, "model config", MAX_CONFIG_BYTES).decode("utf-8"))
    except (RecursionError, ValueError) as exc:
        raise InputError(f"not a readable JSON config ({exc})", path=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("config.json is not a JSON object", path=str(path))
    return data


def tiny_config(data: dict[str, Any], rules: Mapping[str, Any]) -> dict[str, Any]:
    """The config made tiny by `rules` (policy.yaml `verify.tiny_model`), keeping it
    consistent: heads divide, KV heads divide heads, per-layer lists cut to the layer count,
    token ids in range."""
    out = dict(data)
    for key, cap in rules["caps"].items():
        if isinstance(out.get(key), int) and not isinstance(out.get(key), bool):
            out[key] = min(out[key], int(cap))
    heads, old_heads = out.get("num_attention_heads"), data.get("num_attention_heads")
    kv = data.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(old_heads, int) and isinstance(kv, int) and kv:
        groups = max(1, old_heads // kv)
        new_kv = max(1, heads // groups)
        while heads % new_kv:
            new_kv -= 1
        out["num_key_value_heads"] = new_kv
    if isinstance(heads, int) and "hidden_size" in out:
        head_dim = int(rules["head_dim"])
        if "head_dim" in data:
            out["head_dim"] = head_dim
        out["hidden_size"] = heads * head_dim
    layers = out.get("num_hidden_layers")
    if isinstance(layers, int):
        for key, value in list(out.items()):
            if isinstance(value, list) and len(value) == data.get("num_hidden_layers") \
                    and key != "architectures":
                out[key] = value[:layers]
        if isinstance(out.get("mlp_only_layers"), list):
            out["mlp_only_layers"] = [i for i in out["mlp_only_layers"] if i < layers]
    vocab = out.get("vocab_size")
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        v = out.get(key)
        if isinstance(vocab, int) and (isinstance(v, int) and v >= vocab
                                       or isinstance(v, list) and any(i >= vocab for i in v)):
            out[key] = None if key == "pad_token_id" else 0
    for key in rules.get("drop", []):
        out.pop(key, None)
    out.update(rules.get("set", {}))
    return out


def _make_config(model_cls, module, tiny: dict[str, Any], cfg_file: Path):
    cls = getattr(model_cls, "config_class", None)
    if cls is not None and hasattr(cls, "from_dict"):
        cfg = cls.from_dict(tiny)
    else:
        cls = next((v for k, v in vars(module).items() if k.endswith("Config")
                    and inspect.isclass(v) and v.__module__ == module.__name__), None)
        if cls is None:
            try:
                from transformers import AutoConfig
                cfg = AutoConfig.for_model(tiny["model_type"], **{k: v for k, v in tiny.items()
                                                                  if k != "model_type"})
            except Exception as exc:  # noqa: BLE001
                raise InputError(f"no config class found for this model ({exc})", path=str(cfg_file),
                                 hint="pass --factory MODULE:FUNC") from None
        else:
            params = inspect.signature(cls).parameters
            cfg = cls(**{k: v for k, v in tiny.items() if k in params})
            for k, v in tiny.items():
                if k not in params:
                    setattr(cfg, k, v)
    if hasattr(cfg, "_attn_implementation"):
        try:
            cfg._attn_implementation = "eager"   # plain ops: deterministic, graph-capturable
        except Exception:  # noqa: BLE001 - older configs: the default stays
            pass
    return cfg


def _vocab(config) -> int:
    v = getattr(config, "vocab_size", None)
    return int(v) if isinstance(v, int) and v > 0 else 32


# ------------------------------------------------------------------------------ the module
def _relative_imports(path: Path) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"cannot read the model file ({exc})", path=str(path)) from None
    return any(isinstance(n, ast.ImportFrom) and n.level > 0 and
               not (n.module is None and [a.name for a in n.names] == ["_cannbot_prefetch"])
               for n in ast.walk(tree))


def _dotted_on_sys_path(path: Path, root: Path) -> str | None:
    """`pkg.sub.mod` when `path` lies in a package chain rooted on sys.path, every package of
    it under `root` (importing the chain runs each `__init__.py`)."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder != root and root in folder.parents:
        parts.insert(0, folder.name)
        folder = folder.parent
    roots = {Path(p or ".").resolve() for p in sys.path}
    return ".".join(parts) if len(parts) > 1 and folder.resolve() in roots else None


def load_model_module(path: Path, data: dict[str, Any], root: Path):
    """Import the model file (under `root`, checked by the caller). Its folder, under the root
    too, goes on sys.path (the helper module sits beside it)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    dotted = _dotted_on_sys_path(path, root)
    if dotted is not None:
        return importlib.import_module(dotted)
    package = _home_package(path, data) if _relative_imports(path) else None
    name = f"{package}._cannbot_verify_{path.stem}" if package else f"_cannbot_verify_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        sys.modules.pop(name, None)
        raise InputError(f"cannot import the model file ({exc})", path=str(path),
                         hint="write a factory and pass --factory MODULE:FUNC") from None
    return module


def _home_package(path: Path, data: dict[str, Any]) -> str:
    """The transformers package a copied `modeling_<name>.py` came from."""
    names = []
    if path.stem.startswith("modeling_"):
        names.append(path.stem[len("modeling_"):])
    if isinstance(data.get("model_type"), str):
        names.append(data["model_type"].replace("-", "_"))
    for n in names:
        pkg = f"transformers.models.{n}"
        try:
            if importlib.util.find_spec(pkg) is not None:
                importlib.import_module(pkg)
                return pkg
        except (ImportError, ValueError):
            continue
    raise InputError("uses relative imports (from ... import) and is not part of an importable "
                     f"package; no transformers.models.<{'|'.join(names) or 'name'}> to resolve "
                     "them against", path=str(path),
                     hint="install transformers, or write a factory and pass --factory MODULE:FUNC")


def _model_class(module, data: dict[str, Any], path: Path):
    import torch

    def ok(obj) -> bool:
        return inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and \
            getattr(obj, "__module__", "") == module.__name__
    wanted = [a for a in data.get("architectures") or [] if isinstance(a, str)]
    for name in wanted:
        if ok(getattr(module, name, None)):
            return getattr(module, name)
    classes = [v for v in vars(module).values() if ok(v)]
    for suffix in ("ForCausalLM", "Model"):
        hits = [c for c in classes if c.__name__.endswith(suffix)]
        if hits:
            return hits[0]
    raise InputError("no model class (config.json 'architectures', *ForCausalLM or *Model) in "
                     "the model file", path=str(path), hint="pass --factory MODULE:FUNC")


# ------------------------------------------------------------------------------ the inputs
# The KV-cache argument and output field: `cache` (transformers 5.x), else `past_key_values`
# (transformers 4.x, most model code). The current name first: 5.x still takes the old one but
# prints a deprecation warning for it on every call.
_CACHE_NAMES = ("cache", "past_key_values")


def decode_step(model, vocab: int):
    """(model, inputs) for one decode step; with a KV cache the model is wrapped so each call
    starts from a copy of the prefilled cache."""
    import torch

    prompt = (torch.arange(4, dtype=torch.long) % vocab).unsqueeze(0)
    token = torch.tensor([[4 % vocab]], dtype=torch.long)
    params = inspect.signature(model.forward).parameters
    arg = next((n for n in _CACHE_NAMES if n in params), None)
    if "input_ids" not in params:
        return model, (token,)
    if arg is None or "use_cache" not in params:
        return model, {"input_ids": token}
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
    cache = next((getattr(out, n, None) for n in _CACHE_NAMES if getattr(out, n, None) is not None),
                 None)
    if cache is None:
        return model, {"input_ids": token}
    return DecodeStep(model, cache, arg), (token,)


def _decode_step_class():
    import torch

    class DecodeStep(torch.nn.Module):
        """One decode step of `model` after a fixed prompt; every call copies the cache first."""

        def __init__(self, model, cache, arg: str):
            super().__init__()
            self.model = model
            self._cache = cache
            self._arg = arg

        def forward(self, input_ids):
            kwargs = {self._arg: copy.deepcopy(self._cache)}
            out = self.model(input_ids=input_ids, use_cache=True, **kwargs)
            return getattr(out, "logits", out)

        def compile_target(self):
            """For verify's torch.compile checks (capture.py): compile the model itself and copy
            the cache outside the graph (dynamo cannot trace deepcopy); decode batch xk repeats
            the token and the cache k times."""
            def make(inputs, k: int):
                (input_ids,) = inputs
                cache = copy.deepcopy(self._cache)
                if k > 1:
                    cache.batch_repeat_interleave(k)
                return {"input_ids": input_ids.repeat(k, 1), "use_cache": True, self._arg: cache}

            return self.model, make

    return DecodeStep


def DecodeStep(model, cache, arg: str):  # noqa: N802 - reads as the class it builds (torch late)
    return _decode_step_class()(model, cache, arg)
