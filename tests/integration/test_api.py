"""The library face (api/): results carry their status, nothing is written until asked, and
the CLI's output is the API's value rendered. GENERATED profiles: tests/unit/report/profgen.py
and the bundled examples/llama3.2-1b-en (examples/synth)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cannbot_prefetch as cp
from cannbot_prefetch import api
from cannbot_prefetch.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "report"))
from profgen import Variant, write_plan, write_profile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "examples" / "llama3.2-1b-en"


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_status_values_are_the_contract_exit_codes():
    assert [(s.name, s.exit_code) for s in cp.Status] == [
        ("OK", 0), ("CHECK_FAILED", 1), ("UNUSABLE_INPUT", 2), ("MISMATCH", 3)]
    assert cp.InputError("x").status is cp.Status.UNUSABLE_INPUT


def test_unusable_input_raises_naming_the_file(tmp_path):
    missing = tmp_path / "no-such-profile"
    with pytest.raises(cp.InputError) as info:
        cp.Analysis.load(missing)
    assert info.value.status is cp.Status.UNUSABLE_INPUT and str(missing) in str(info.value)
    with pytest.raises(cp.InputError, match="PROFILE path is required"):
        cp.analyze(None, model_src="x.py")
    with pytest.raises(TypeError, match="unknown options: tpp"):
        cp.analyze(str(LLAMA / "profile"), tpp=2)


def test_analysis_writes_nothing_until_save(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    planned = cp.analyze(str(LLAMA / "profile"), model_src="transformers.models.llama.modeling_llama",
                         model_config=str(LLAMA / "config.json"), out=str(out))
    assert isinstance(planned, cp.Planned) and planned.status is cp.Status.OK
    assert planned.plan.sites and not out.exists()
    assert planned.analysis.top(1)[0].verdict == "memory-bound"
    written = planned.save()
    assert _tree(out) == ["prefetch_design.layer1.svg", "prefetch_design.md", "prefetch_plan.yaml"]
    assert (out / "prefetch_plan.yaml").read_text(encoding="utf-8") == planned.plan_text()
    doc = planned.to_json(written)
    assert doc["outputs"] == written and [c["site"] for c in doc["candidates"] if c["planned"]] \
        == [s.id for s in planned.plan.sites]
    # the command prints the same document for the same inputs
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(LLAMA / "profile"), "--json",
                                   "--model-src", "transformers.models.llama.modeling_llama",
                                   "--model-config", str(LLAMA / "config.json"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(doc, default=str))


def test_shortlist_and_windows_need_no_model_source():
    a = cp.Analysis.load(str(LLAMA / "profile"))
    short = a.shortlist(top=5)
    assert short.targets and short.to_json()["outputs"] == []
    w = a.windows()
    assert w.candidates and all(c.window.time_us > 0 for c in w.candidates)
    assert {c.target.sig_id for c in w.candidates} <= {s.sig_id for s in short.targets}


def test_report_mismatch_is_a_status_and_nothing_is_written_before_write(tmp_path):
    plan = write_plan(tmp_path)
    a = write_profile(tmp_path / "a", l2_hit=0.3)
    b = write_profile(tmp_path / "b", Variant(other_model=True, target_factor=0.8), seed=2)
    before = _tree(tmp_path)
    rep = api.report(plan, a, optimized=b)
    assert rep.status is cp.Status.MISMATCH and "different models" in rep.mismatch_text()
    assert _tree(tmp_path) == before
    written = rep.write(tmp_path / "o" / "report.md")
    assert sorted(Path(p).name for p in written) == sorted(p.name for p in (tmp_path / "o").iterdir())
    assert rep.to_json(written)["banners"]
    same = api.report(plan, a)
    assert same.status is cp.Status.OK and not same.banners
