"""`verify PLAN --model-config config.json` without a factory (verify/factory.py), on REAL
transformers model files copied into tmp_path (relative imports and all), planned in manual mode
and rewritten by `apply`; and on the CPU example's plain-PyTorch model (a dataclass config).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app
from cannbot_prefetch.policy import Policy

TINY = Policy.load()["verify"]["tiny_model"]   # the shipped caps, as verify passes them

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _copy(family: str, dest: Path) -> Path:
    src = Path(transformers.__file__).parent / "models" / family / f"modeling_{family}.py"
    if not src.is_file():
        pytest.skip(f"transformers has no {src.name}")
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, dest / src.name))


def _plan_and_apply(model: Path, config: Path, target: str, out: Path) -> Path:
    res = runner.invoke(app, ["prefetch", "analyze", "--target", target, "--model-src", str(model),
                              "--model-config", str(config), "--out", str(out)])
    assert res.exit_code == 0, res.output
    plan = out / "prefetch_plan.yaml"
    res = runner.invoke(app, ["prefetch", "apply", str(plan), "--write", "--yes"])
    assert res.exit_code == 0, res.output
    return plan


@pytest.fixture(autouse=True)
def _in_project(tmp_path, monkeypatch):
    """apply's default root is the folder it runs in: each test's project is its tmp_path."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _clean_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if "_cannbot_verify_" in name or name in ("_cannbot_prefetch",):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("family, example, target", [
    ("llama", "llama3.2-1b-en", "LlamaMLP.down_proj"),
    ("qwen2", "qwen2.5-3b-zh", "Qwen2Attention.o_proj"),
    ("qwen3_moe", "qwen3-moe", "Qwen3MoeAttention.o_proj"),
])
def test_builtin_factory_on_a_copied_transformers_file(tmp_path, family, example, target):
    config = REPO / "examples" / example / "config.json"
    model = _copy(family, tmp_path / "src")
    plan = _plan_and_apply(model, config, target, tmp_path)
    res = runner.invoke(app, ["prefetch", "verify", str(plan), "--model-config", str(config),
                              "--json", "--out", str(tmp_path / "verify.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["passed"] is True and doc["factory"].startswith("built-in")
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["outputs off == on"]["passed"]
    assert "fired 2/2" in checks["fires"]["detail"]        # two tiny layers, one call each
    # The per-layer make_fx replay runs on a copy of the layer's inputs as captured (the KV
    # cache before the call grew it): the graph-order check runs, it is not skipped.
    graph = checks["graph order"]
    assert graph["passed"] and not graph["skipped"], graph
    # torch.compile compiles the model under the decode step (its cache copied outside the
    # graph): these run, at decode batches 1, 8 and 256 of the prefilled cache
    for name in ("compile eager", "compile aot_eager", "captured prefetch", "recompiles"):
        assert checks[name]["passed"] and not checks[name]["skipped"], checks[name]
    assert "prefetches per forward [2, 2, 2]" in checks["recompiles"]["detail"]
    # the switch turned on as a user does, on fresh models: the environment alone, the top of
    # the config alone (routes.py)
    routes = {n: c for n, c in checks.items() if n.startswith("switch by ")}
    assert len(routes) == 2 and all(c["passed"] and not c["skipped"] for c in routes.values())


def test_decode_step_keeps_the_cache_state(tmp_path):
    """Two calls of the decode step see the same cache (a copy each time): equal outputs."""
    import torch

    from cannbot_prefetch.verify.factory import build

    config = REPO / "examples" / "llama3.2-1b-en" / "config.json"
    model = _copy("llama", tmp_path / "src")
    plan = _plan_and_apply(model, config, "LlamaMLP.down_proj", tmp_path)
    step, inputs = build(plan, config)
    assert type(step).__name__ == "DecodeStep" and inputs[0].shape == (1, 1)
    with torch.no_grad():
        a, b = step(*inputs), step(*inputs)
    assert torch.equal(a, b) and a.shape[:2] == (1, 1)
    inner = step.model
    assert inner.config.num_hidden_layers == 2 and inner.config.hidden_size == 64
    assert sum(p.numel() for p in inner.parameters()) < 200_000


def test_builtin_factory_on_the_cpu_example_model(tmp_path):
    """A plain PyTorch model with a dataclass config and no past_key_values argument."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(REPO / "examples" / "cpu-tiny-llama" / "model.py", src / "modeling_tiny_llama.py")
    config = REPO / "examples" / "cpu-tiny-llama" / "config.json"
    plan = _plan_and_apply(src / "modeling_tiny_llama.py", config, "TinyLlamaMLP.down_proj",
                           tmp_path)
    res = runner.invoke(app, ["prefetch", "verify", str(plan), "--model-config", str(config),
                              "--json"])
    assert res.exit_code == 0, res.output
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["graph order"]["passed"] and checks["outputs off == on"]["passed"]


def test_without_factory_or_config_says_what_to_pass(tmp_path):
    model = _copy("llama", tmp_path / "src")
    config = REPO / "examples" / "llama3.2-1b-en" / "config.json"
    plan = _plan_and_apply(model, config, "LlamaMLP.down_proj", tmp_path)
    res = runner.invoke(app, ["prefetch", "verify", str(plan), "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["error"]
    assert "--factory MODULE:FUNC" in err["message"] and "--model-config" in err["message"]


def test_tiny_config_is_consistent():
    from cannbot_prefetch.verify.factory import tiny_config

    for example in ("llama3.2-1b-en", "qwen2.5-3b-zh", "qwen3-moe", "cpu-tiny-llama"):
        data = json.loads((REPO / "examples" / example / "config.json").read_text())
        tiny = tiny_config(data, TINY)
        heads, kv = tiny["num_attention_heads"], tiny["num_key_value_heads"]
        assert heads <= 4 and heads % kv == 0, example
        assert tiny["num_hidden_layers"] == 2 and tiny["vocab_size"] <= 512
        assert tiny["hidden_size"] == heads * 16
        assert data["num_attention_heads"] // data["num_key_value_heads"] >= heads // kv
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            v = tiny.get(key)
            assert v is None or v < tiny["vocab_size"], (example, key)
        assert "torch_dtype" not in tiny
    moe = tiny_config(json.loads((REPO / "examples" / "qwen3-moe" / "config.json").read_text()),
                      TINY)
    assert moe["num_experts"] == 4 and moe["num_experts_per_tok"] == 2


def test_verify_prints_no_transformers_deprecation_warning(tmp_path):
    """Issue 34: the decode step passes the KV cache by its current name (`cache` where the
    model takes it): transformers 5.x warned "`past_key_values`/`cache_params` are deprecated"
    on every verify of a transformers model. A process of its own: transformers warns once."""
    import subprocess

    config = REPO / "examples" / "llama3.2-1b-en" / "config.json"
    model = _copy("llama", tmp_path / "src")
    plan = _plan_and_apply(model, config, "LlamaMLP.down_proj", tmp_path)
    res = subprocess.run([sys.executable, "-c", "from cannbot_prefetch.cli import main; main()",
                          "prefetch", "verify", str(plan), "--model-config", str(config),
                          "--out", str(tmp_path / "verify.json")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "deprecated" not in res.stderr.lower(), res.stderr


def _lm_head_plan(tmp_path):
    """Issue 30 part 1: the LM head's site after `self.model(...)` (window: the final norm),
    with the MLP's gate_proj, planned and applied on the REAL modeling_llama.py."""
    config = REPO / "examples" / "llama3.2-1b-en" / "config.json"
    model = _copy("llama", tmp_path / "src")
    res = runner.invoke(app, ["prefetch", "analyze", "--target", "LlamaForCausalLM.lm_head",
                              "--window", "LlamaModel.norm", "--target", "LlamaMLP.gate_proj",
                              "--window", "self.post_attention_layernorm", "--model-src", str(model),
                              "--model-config", str(config), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    plan = tmp_path / "out" / "prefetch_plan.yaml"
    res = runner.invoke(app, ["prefetch", "apply", str(plan), "--write", "--yes", "--root",
                              str(tmp_path)])
    assert res.exit_code == 0, res.output
    return config, model, plan


def test_lm_head_after_the_model_call_fires_with_a_tensor(tmp_path):
    config, model, plan = _lm_head_plan(tmp_path)
    text = model.read_text()
    assert "self.lm_head.weight, outputs.last_hidden_state," in text
    res = runner.invoke(app, ["prefetch", "verify", str(plan), "--model-config", str(config),
                              "--json"])
    doc = json.loads(res.stdout)
    fires = {c["site"]: c for c in doc["checks"] if c["name"] == "fires"}
    # every planned site fired, the LM head's included (one model, one call; two layers)
    assert set(fires) == {"llamaforcausallm-lm_head", "llamamlp-gate_proj"}, doc["checks"]
    assert all(c["passed"] for c in fires.values()), fires
    assert "fired 1/1" in fires["llamaforcausallm-lm_head"]["detail"]
    assert "fired 2/2" in fires["llamamlp-gate_proj"]["detail"]
    assert res.exit_code == 0, res.output


def test_a_site_that_raises_is_a_failed_check_naming_it(tmp_path):
    """The rewritten line edited to depend on the model output object itself (what analyze
    planned before the fix): verify exits 1 with a failed check naming the site, no error."""
    config, model, plan = _lm_head_plan(tmp_path)
    text = model.read_text()
    bad = text.replace("self.lm_head.weight, outputs.last_hidden_state,",
                       "self.lm_head.weight, outputs,")
    assert bad != text
    model.write_text(bad)
    res = runner.invoke(app, ["prefetch", "verify", str(plan), "--model-config", str(config),
                              "--json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert "error" not in doc and doc["passed"] is False
    (run,) = [c for c in doc["checks"] if c["name"] == "switch on: runs"]
    assert run["site"] == "llamaforcausallm-lm_head" and not run["passed"]
    assert "BaseModelOutputWithPast" in run["detail"]
