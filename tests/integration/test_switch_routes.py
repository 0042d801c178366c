"""The switch a user sets reaches every site (issue 37), on REAL transformers model files copied
into a temp folder at test time (never committed): `enable_prefetch: true` at the top level of
the config the model is built from, or `CANNBOT_PREFETCH=1` in the environment, and nothing else
(no module attribute, no helper ENABLED). Gemma3ForConditionalGeneration builds its text layers
from `config.text_config` through AutoModel; XGLM's attention gets no config object at all
(`XGLMAttention(embed_dim, num_heads, ...)`). A recording torch_npu stub is installed only inside
each run. Every planned site must fire on every layer; with the switch off, logits are
bit-identical to the original file's."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.plan import load_plan
from cannbot_prefetch.contract.plan import ENV_SWITCH
from cannbot_prefetch.verify.stub import stub_torch_npu

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
runner = CliRunner()
LAYERS = 2


def _gemma3():
    text = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                num_attention_heads=4, num_key_value_heads=1, head_dim=16, vocab_size=256,
                max_position_embeddings=64, sliding_window=16)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  image_size=28, patch_size=14)
    return transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4)


def _xglm():
    return transformers.XGLMConfig(d_model=64, ffn_dim=128, num_layers=LAYERS, attention_heads=4,
                                   vocab_size=256, max_position_embeddings=64)


CASES = {
    "gemma3": ("Gemma3ForConditionalGeneration", _gemma3,
               ["Gemma3MLP.down_proj", "Gemma3Attention.o_proj"]),
    "xglm": ("XGLMForCausalLM", _xglm, ["XGLMDecoderLayer.fc2", "XGLMAttention.out_proj"]),
}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(ENV_SWITCH, raising=False)


def _apply(family: str, config, targets: list[str], tmp: Path) -> tuple[Path, Path]:
    src = Path(transformers.__file__).parent / "models" / family / f"modeling_{family}.py"
    model_file = Path(shutil.copy(src, tmp / src.name))
    (tmp / "config.json").write_text(config.to_json_string(use_diff=False))
    args = ["prefetch", "analyze", "--model-src", str(model_file), "--model-config",
            str(tmp / "config.json"), "--out", str(tmp / "out")]
    for t in targets:
        args += ["--target", t]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    plan = tmp / "out" / "prefetch_plan.yaml"
    assert len(load_plan(plan).sites) == len(targets)      # the plan analyze wrote reloads
    res = runner.invoke(app, ["prefetch", "apply", str(plan), "--write", "--yes", "--root",
                              str(tmp)])
    assert res.exit_code == 0, res.output
    return model_file, plan


def _load_rewritten(family: str, model_file: Path, monkeypatch):
    """The rewritten file under the family's own module name (its relative imports resolve) and
    its helper beside it; the package's names point at the rewritten classes, as for a user who
    applied the plan to the file the package imports (AutoModel builds gemma3's text model)."""
    pkg_name = f"transformers.models.{family}"
    name = f"{pkg_name}.modeling_{family}"
    importlib.import_module(name)                     # the original, for its package
    hspec = importlib.util.spec_from_file_location(f"{pkg_name}._cannbot_prefetch",
                                                   model_file.with_name("_cannbot_prefetch.py"))
    helper = importlib.util.module_from_spec(hspec)
    monkeypatch.setitem(sys.modules, hspec.name, helper)
    hspec.loader.exec_module(helper)
    spec = importlib.util.spec_from_file_location(name, model_file)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    package = sys.modules[pkg_name]
    for k, v in vars(mod).items():
        if isinstance(v, type) and k in vars(package):
            monkeypatch.setattr(package, k, v)
    return mod


def _weights(model, plan) -> dict[str, list]:
    out = {}
    for s in plan.sites:
        ws = []
        for m in model.modules():
            if s.target.cls in {k.__name__ for k in type(m).__mro__}:
                ws.append(m.get_submodule(s.target.attr.rsplit(".", 1)[0]).weight
                          if "." in s.target.attr else getattr(m, s.target.attr).weight)
        out[s.id] = ws
    return out


@pytest.mark.parametrize("family", sorted(CASES))
def test_switch_set_where_the_user_sets_it_reaches_every_site(family, tmp_path, monkeypatch):
    cls_name, make_config, targets = CASES[family]
    config = make_config()
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    original = getattr(importlib.import_module(f"transformers.models.{family}"), cls_name)
    base = original(config).eval()
    ids = torch.randint(3, 250, (1, 4))
    with torch.no_grad():
        ref = base(input_ids=ids, use_cache=False).logits
    model_file, plan_path = _apply(family, config, targets, tmp_path)
    plan = load_plan(plan_path)
    mod = _load_rewritten(family, model_file, monkeypatch)
    cls = getattr(mod, cls_name)

    def run(cfg, env: str | None):
        if env is None:
            monkeypatch.delenv(ENV_SWITCH, raising=False)
        else:
            monkeypatch.setenv(ENV_SWITCH, env)
        model = cls(cfg).eval()
        model.load_state_dict(base.state_dict())
        with stub_torch_npu() as rec, torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits
        return model, logits, rec.calls

    _, off, calls = run(config, None)
    assert torch.equal(off, ref) and calls == []
    top = make_config()
    top._attn_implementation = "eager"
    top.enable_prefetch = True                          # config.json's top level, nothing else
    assert getattr(top.get_text_config(), "enable_prefetch", None) in (None, True)
    for route, cfg, env in (("config", top, None), ("environment", config, "1")):
        model, on, calls = run(cfg, env)
        assert torch.equal(on, off), route
        seen = {id(c.weight) for c in calls}
        for site, ws in _weights(model, plan).items():
            assert len(ws) == LAYERS, (route, site)
            assert all(id(w) in seen for w in ws), f"{route}: {site} did not fire on every layer"
    # the environment's 0 turns it off whatever the config says
    _, _, calls = run(top, "0")
    assert calls == []


def test_plans_of_default_configs_reload_and_hold_no_zero_dim(tmp_path):
    """cohere2_moe's MLP is built once with `intermediate_size=config.intermediate_size *
    config.num_shared_experts` (0 shared experts by default: never built) and once, in a layer
    whose `mlp_layer_types` entry is "dense", with `config.prefix_dense_intermediate_size` (null:
    `config.intermediate_size`); the plan takes the weight the model holds, [hidden,
    intermediate] = [8192, 22528] from the class defaults, and its own loader accepts it. The
    class's default layer kinds are all "sparse", so with them the MLP is built nowhere and the
    target is refused naming the condition (not planned on a weight no layer holds)."""
    layers = transformers.Cohere2MoeConfig().num_hidden_layers
    config = transformers.Cohere2MoeConfig(mlp_layer_types=["dense"] + ["sparse"] * (layers - 1))
    model_file, plan_path = _apply("cohere2_moe", config, ["Cohere2MoeMLP.down_proj"], tmp_path)
    site = load_plan(plan_path).sites[0]
    assert list(site.basis.dims) == [config.hidden_size, config.intermediate_size] == [8192, 22528]
    default = transformers.Cohere2MoeConfig()
    assert set(default.mlp_layer_types) == {"sparse"} and default.num_shared_experts == 0
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text(default.to_json_string(use_diff=False))
    res = runner.invoke(app, ["prefetch", "analyze", "--model-src", str(model_file),
                              "--model-config", str(tmp_path / "d" / "config.json"),
                              "--target", "Cohere2MoeMLP.down_proj", "--out",
                              str(tmp_path / "d" / "out")])
    assert res.exit_code == 2 and "is not built under this config" in res.output
