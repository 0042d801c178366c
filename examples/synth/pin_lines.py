"""Record the model-source lines the generated call stacks use (writes synth/source_lines.json).

Run once with the transformers version whose files the stacks should point into:
    python examples/synth/pin_lines.py
Plain text search (writer.find_source_lines) over the installed
transformers/models/<family>/modeling_<family>.py; the file's sha256 and the transformers version
are recorded, so a test can tell when the pinned table no longer matches the installed package.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth import models as M  # noqa: E402
from synth import writer as W  # noqa: E402

# A minimal config per family: enough for step_ops to emit every frame the family can need.
FAMILY_CONFIGS = {
    "llama": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256},
    "qwen2": {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256},
    "qwen3": {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 1, "vocab_size": 256},
    "qwen2_moe": {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128,
                  "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64, "num_experts": 4,
                  "num_experts_per_tok": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "num_hidden_layers": 1, "vocab_size": 256},
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 64, "moe_intermediate_size": 32, "num_experts": 4,
                  "num_experts_per_tok": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 16, "num_hidden_layers": 1, "vocab_size": 256},
}


def site_packages_file(rel: str) -> Path | None:
    import importlib.util
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]).parent
    p = root / rel
    return p if p.is_file() else None


def transformers_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("transformers")
    except Exception:
        return None


def table() -> dict:
    files = {}
    sha = {}
    for cfg in FAMILY_CONFIGS.values():
        spec = M.load_config(cfg)
        path = site_packages_file(spec.source)
        if path is None:
            continue
        ops = M.step_ops(spec, 1, None, "decode")
        files[spec.source] = dict(sorted(W.find_source_lines(path, ops).items()))
        sha[spec.source] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"transformers_version": transformers_version(), "sha256": sha, "files": files}


def main() -> None:
    data = table()
    W.PINNED_LINES.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {W.PINNED_LINES} ({len(data['files'])} files, transformers {data['transformers_version']})")


if __name__ == "__main__":
    main()
