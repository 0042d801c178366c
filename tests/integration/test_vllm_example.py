"""examples/vllm-qwen2 end to end without vLLM (issue 32): analyze (manual mode, TP 2) → apply →
verify under the vLLM shim. The model file is this project's own vLLM-style file; the shard sizes
are worked out by hand from config.json (hidden 256, 8 heads of 32, 2 KV heads, intermediate
1024) and vLLM's split rules."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

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


ROUTES = (  # (additional_config, CANNBOT_PREFETCH, sites expected to fire)
    ({"enable_prefetch": True}, None, True),     # vllm-ascend: --additional-config alone
    ({}, None, False),                           # nothing set: off
    ({}, "1", True),                             # the environment alone
    ({"enable_prefetch": True}, "0", False),     # the environment's 0 wins over the config
)


@pytest.mark.slow
def test_additional_config_switch_reaches_every_site(tmp_path, monkeypatch):
    """`analyze --switch additional_config.enable_prefetch`: the rewritten layers (built from
    sizes, no config object) read the key from the `vllm_config` their model's constructor
    receives, as vllm-ascend passes `--additional-config`; each route on a fresh model, the
    switch set nowhere else (no module attribute)."""
    from cannbot_prefetch.contract.plan import ENV_SWITCH
    from cannbot_prefetch.verify.stub import stub_torch_npu

    for f in ("qwen2_vllm_model.py", "config.json"):
        shutil.copy(EX / f, tmp_path / f)
    res = api.analyze(None, model_src=str(tmp_path / "qwen2_vllm_model.py"),
                      model_config=str(tmp_path / "config.json"), targets=TARGETS,
                      switch="additional_config.enable_prefetch", out=str(tmp_path / "plan"))
    res.save()
    plan = load_plan(tmp_path / "plan" / "prefetch_plan.yaml")
    assert plan.switch.config_path == "additional_config.enable_prefetch"
    design = (tmp_path / "plan" / "prefetch_design.md").read_text()
    assert "--additional-config '{\"enable_prefetch\": true}'" in design
    api.apply(tmp_path / "plan" / "prefetch_plan.yaml", root=str(tmp_path)).write()

    import json
    from types import SimpleNamespace

    from cannbot_prefetch.verify.shims import vllm_shim

    cfg = SimpleNamespace(**json.loads((tmp_path / "config.json").read_text()))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("qwen2_vllm_model", "_cannbot_prefetch"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with vllm_shim():
        from vllm.config import ModelConfig, VllmConfig
        mod = importlib.import_module("qwen2_vllm_model")
        for extra, env, fires in ROUTES:
            if env is None:
                monkeypatch.delenv(ENV_SWITCH, raising=False)
            else:
                monkeypatch.setenv(ENV_SWITCH, env)
            model = mod.Qwen2ForCausalLM(vllm_config=VllmConfig(ModelConfig(cfg),
                                                                additional_config=extra)).eval()
            with stub_torch_npu() as rec, torch.no_grad():
                model(torch.tensor([7, 11]), torch.tensor([5, 9]))
            seen = {id(c.weight) for c in rec.calls}
            for s in plan.sites:
                cls, attr = s.target.cls, s.target.attr
                weights = [getattr(m, attr).weight for m in model.modules()
                           if type(m).__name__ == cls]
                assert len(weights) == cfg.num_hidden_layers, (cls, attr)
                hit = [id(w) in seen for w in weights]
                if fires:
                    # the next layer's qkv site of the last layer has no next layer to run
                    assert sum(hit) >= len(weights) - (s.target.attr == "qkv_proj"), \
                        (extra, env, s.id, hit)
                else:
                    assert not any(hit), (extra, env, s.id)
    monkeypatch.delitem(sys.modules, "qwen2_vllm_model", raising=False)
