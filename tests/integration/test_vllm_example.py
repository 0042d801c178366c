"""examples/vllm-qwen2 end to end without vLLM (issue 32): analyze (manual mode, TP 2) → apply →
verify under the vLLM shim. The model file is this project's own vLLM-style file; the shard sizes
are worked out by hand from config.json (hidden 256, 8 heads of 32, 2 KV heads, intermediate
1024) and vLLM's split rules."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cannbot_prefetch import api  # noqa: E402
from cannbot_prefetch.plan import load_plan  # noqa: E402

EX = Path(__file__).resolve().parents[2] / "examples" / "vllm-qwen2"
TARGETS = ("Qwen2MLP.down_proj", "Qwen2MLP.gate_up_proj", "Qwen2Attention.qkv_proj",
           "Qwen2Attention.o_proj")


@pytest.mark.slow
def test_analyze_apply_verify_without_vllm(tmp_path):
    for f in ("qwen2_vllm_model.py", "config.json", "factory.py"):
        shutil.copy(EX / f, tmp_path / f)
    res = api.analyze(None, model_src=str(tmp_path / "qwen2_vllm_model.py"),
                      model_config=str(tmp_path / "config.json"), targets=TARGETS, tp=2,
                      out=str(tmp_path / "plan"))
    res.save()
    plan = load_plan(tmp_path / "plan" / "prefetch_plan.yaml")
    dims = {s.target.attr: s.basis.dims for s in plan.sites}
    assert dims == {"qkv_proj": (192, 256), "o_proj": (256, 128),
                    "gate_up_proj": (1024, 256), "down_proj": (256, 512)}
    rw = api.apply(tmp_path / "plan" / "prefetch_plan.yaml", root=str(tmp_path))
    rw.write()
    assert "npu_prefetch" in (tmp_path / "qwen2_vllm_model.py").read_text()
    sys.path.insert(0, str(tmp_path))
    try:
        v = api.verify(tmp_path / "plan" / "prefetch_plan.yaml",
                       factory=f"{tmp_path / 'factory.py'}:build")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("qwen2_vllm_model", None)
    failed = [c for c in v.checks if not c.passed and not c.skipped]
    assert not failed, failed
    fired = [c for c in v.checks if c.name == "captured prefetch"]
    assert len(fired) == 4 and all(c.passed for c in fired)
