"""One truth for plan and apply (issue 14): analyze asks apply's own per-site checks before it
plans, so a site apply would refuse becomes a rejection with apply's reason; and a planned site
apply does refuse (the plan was edited, the source allows less) makes `apply` exit 1 naming it,
never exit 0 with "nothing to change". On the REAL transformers glm file (copied at test time)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cannbot_prefetch.cli import app

runner = CliRunner()
SMALL = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}


@pytest.fixture
def glm(tmp_path):
    transformers = pytest.importorskip("transformers")
    src = Path(transformers.__file__).parent / "models" / "glm" / "modeling_glm.py"
    if not src.is_file():
        pytest.skip("transformers has no glm")
    shutil.copyfile(src, tmp_path / src.name)
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    return tmp_path


def _analyze(root: Path, *targets: str, window: str | None = None):
    args = ["prefetch", "analyze", "--model-src", str(root / "modeling_glm.py"), "--model-config",
            str(root / "config.json"), "--out", str(root / "out"), "--json"]
    for t in targets:
        args += ["--target", t]
    if window:
        args += ["--window", window]
    res = runner.invoke(app, args)
    return res.exit_code, json.loads(res.stdout)


def test_apply_exits_1_naming_the_refused_site(glm):
    rc, doc = _analyze(glm, "GlmMLP.down_proj", "GlmAttention.o_proj")
    assert rc == 0 and doc["rejections"] == []
    plan_path = glm / "out" / "prefetch_plan.yaml"
    plan = yaml.safe_load(plan_path.read_text())
    site = next(s for s in plan["sites"] if s["id"] == "glmmlp-down_proj")
    # what analyze planned before this fix: join at the end of the MLP, whose value is
    # computed inside `return` (the join would run before the target's matmul)
    assert site["join"] == {"class": "GlmDecoderLayer", "method": "forward", "where": "after:self.mlp"}
    site["join"] = {"class": "GlmMLP", "method": "forward", "where": "end"}
    plan_path.write_text(yaml.safe_dump(plan, sort_keys=False))
    res = runner.invoke(app, ["prefetch", "apply", str(plan_path), "--write", "--yes",
                              "--root", str(glm)])
    assert res.exit_code == 1
    assert "glmmlp-down_proj" in res.stderr and "inside `return`" in res.stderr
    assert "glmattention-o_proj" in (glm / "modeling_glm.py").read_text()   # the other site went in
    res = runner.invoke(app, ["prefetch", "apply", str(plan_path), "--json", "--root", str(glm)])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert [r["site"] for r in doc["refused"]] == ["glmmlp-down_proj"]


def test_what_apply_would_refuse_is_a_rejection_with_its_reason(glm):
    """A hand-written prefetch of the same weight where the site would go: apply refuses to
    duplicate it, so analyze does not plan it, and says why; the other target is planned."""
    src = glm / "modeling_glm.py"
    text = src.read_text()
    anchor = "        hidden_states = self.post_attention_layernorm(hidden_states)\n"
    assert text.count(anchor) == 1
    src.write_text(text.replace(anchor, "        torch_npu.npu_prefetch(self.mlp.gate_up_proj.weight, "
                                        "hidden_states, 1024)\n" + anchor))
    rc, doc = _analyze(glm, "GlmMLP.gate_up_proj", "GlmAttention.o_proj",
                       window="GlmDecoderLayer.post_attention_layernorm")
    assert rc == 0
    assert [c["target"] for c in doc["candidates"] if c["planned"]] == ["GlmAttention.o_proj"]
    (rej,) = [r for r in doc["rejections"] if "gate_up_proj" in r.get("site", "")]
    assert rej["reason_code"] == "unmapped" and "already prefetched" in rej["reason"]
    res = runner.invoke(app, ["prefetch", "apply", str(glm / "out" / "prefetch_plan.yaml"),
                              "--root", str(glm)])
    assert res.exit_code == 0, res.output


def test_every_target_refused_is_exit_2_with_the_reason(glm):
    rc, doc = _analyze(glm, "GlmMLP.nope_proj")
    assert rc == 2 and "nope_proj" in doc["error"]["message"]
