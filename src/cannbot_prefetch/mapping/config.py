"""The model's config.json as mapping reads it: loaded (a multimodal config's language-model
sizes lifted to the top), completed with the keys its config class derives in `__init__`, and the
`attribute_map` aliases the modeling code reads keys by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .evaluate import derived_attrs

if TYPE_CHECKING:  # pragma: no cover
    from .source import ModelSource


def load_config(path: str | Path | None) -> tuple[dict[str, Any], str]:
    if path is None:
        return {}, ""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("model config not found", path=str(p)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"model config is not valid JSON ({exc})", path=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("model config must be a JSON object", path=str(p))
    # multimodal configs nest the language model's sizes
    for sub in ("text_config", "language_config", "llm_config"):
        if isinstance(data.get(sub), dict):
            merged = dict(data[sub])
            merged.update({k: v for k, v in data.items() if k not in merged and k != sub})
            data = merged
            break
    return data, str(p)


def derive_config_keys(ms: "ModelSource") -> None:
    """Keys a config class computes in its __init__ from the ones config.json holds
    (`self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim`), added when config.json lacks
    them: a hand-written or trimmed config.json still gives the model's shapes."""
    for name, (f, info) in list(ms.classes.items()):
        if not name.endswith("Config") or "__init__" not in info.methods:
            continue
        params = set(info.methods["__init__"].params) - {"self", "kwargs"}
        if not params or not params & set(ms.config):
            continue
        for k, v in derived_attrs(ms, name).items():
            if k not in ms.config and isinstance(v, (int, float, bool)):
                ms.config[k] = v


def config_aliases(folder: Path, model_type: Any = None) -> dict[str, str]:
    """`attribute_map` of the config classes beside the model (`configuration_*.py`), else of
    the installed transformers' configuration for the config's `model_type` (read, never
    imported): the names the modeling code reads (`hidden_size`) for the keys a config.json
    stores (`n_embd`)."""
    import ast
    import importlib.util

    out: dict[str, str] = {}
    files = sorted(folder.glob("configuration_*.py"))
    if not files and isinstance(model_type, str) and model_type.isidentifier():
        spec = importlib.util.find_spec("transformers")
        models = Path(spec.origin).parent / "models" if spec is not None and spec.origin \
            else None
        parts = model_type.split("_")
        special = _special_modules(models).get(model_type) if models is not None else None
        for name in ([special] if special else []) + [
                "_".join(parts[:k]) for k in range(len(parts), 0, -1)]:
            # the module transformers names for the type (step3p5 -> step3p7), then
            # dots3_note_text -> dots3_note
            cand = models / name / f"configuration_{name}.py" if models is not None else None
            if cand is not None and cand.is_file():
                files = [cand]
                break
    exact: dict[str, str] = {}
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            amap: dict[str, str] = {}
            mine = False
            for st in node.body:
                target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    else st.target if isinstance(st, ast.AnnAssign) else None
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "model_type" and isinstance(st.value, ast.Constant):
                    mine = st.value.value == model_type
                if target.id == "attribute_map" and isinstance(st.value, ast.Dict):
                    for k, v in zip(st.value.keys, st.value.values):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and \
                                isinstance(k.value, str) and isinstance(v.value, str):
                            amap[k.value] = v.value
            for k, v in amap.items():
                (exact if mine else out).setdefault(k, v)
    return {**out, **exact}       # the config class of this model_type first


# transformers' table of model types whose config lives in a module of another name
# (`models/auto/auto_mappings.py` in transformers 5, `configuration_auto.py` before it)
SPECIAL_TABLE = "SPECIAL_MODEL_TYPE_TO_MODULE_NAME"


def _special_modules(models: Path) -> dict[str, str]:
    """transformers' model type -> module name exceptions (`"step3p5": "step3p7"`), read from
    its auto-mapping source (never imported); {} when the table is not found."""
    import ast

    for f in (models / "auto" / "auto_mappings.py", models / "auto" / "configuration_auto.py"):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and node.targets[0].id == SPECIAL_TABLE:
                return {el.elts[0].value: el.elts[1].value for el in ast.walk(node.value)
                        if isinstance(el, ast.Tuple) and len(el.elts) == 2 and
                        all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                            for e in el.elts)}
    return {}
