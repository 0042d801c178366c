"""`cannbot prefetch report` end to end through the CLI, on GENERATED profiles (tests/unit/report/
profgen.py) and on the bundled Llama-3.2-1B example (examples/llama3.2-1b-en, also generated)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cannbot_prefetch.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "report"))
from profgen import Variant, plan_dict, write_plan, write_profile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
OUT_NAMES = ["prefetch_plan.next.yaml", "report.md", "report.roofline.png", "run_prefetch_ab.py"]


def _run(*args):
    return runner.invoke(app, ["prefetch", "report", *map(str, args)])


def _pair(tmp, optimized=Variant(target_factor=0.8), opt_kw=None, **plan_kw):
    plan = write_plan(tmp, **plan_kw)
    a = write_profile(tmp / "a", l2_hit=0.3)
    b = write_profile(tmp / "b", optimized, seed=2, l2_hit=0.7, **(opt_kw or {}))
    return plan, a, b


def test_ab_report_writes_every_output(tmp_path):
    plan, a, b = _pair(tmp_path)
    out = tmp_path / "out" / "report.md"
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.parent.iterdir()) == OUT_NAMES
    assert (out.parent / "report.roofline.png").read_bytes()[:4] == b"\x89PNG"
    text = out.read_text()
    # a gain without --verify-result: not confirmed (outputs identical is a required guard)
    assert "GAIN NOT CONFIRMED" in text and "SUCCESS" not in text
    assert "L2 hit rate" in text and "70.0%" in text
    nxt = yaml.safe_load((out.parent / "prefetch_plan.next.yaml").read_text())
    assert nxt["status"] == "proposed"
    assert nxt["sites"][0]["basis"]["coefficient"] == 0.7
    assert "raise" in res.output or "GAIN NOT CONFIRMED" in res.output


def test_json_result(tmp_path):
    plan, a, b = _pair(tmp_path, Variant(window_factor=1.1, cmo_us=10))
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--out", tmp_path / "o" / "r.md", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["mode"] == "ab" and doc["overall"] == "not_successful"
    site = doc["sites"][0]
    assert site["action"] == "lower" and site["coefficient"] == [0.5, 0.3]
    assert {c["key"]: c["ok"] for c in site["checks"]}["window_stable"] is False
    assert "report.md" not in doc["files"] and "r.md" in doc["files"]


def test_verify_result_counts_and_chinese(tmp_path):
    plan, a, b = _pair(tmp_path, Variant())
    v = tmp_path / "verify.json"
    v.write_text(json.dumps({"passed": True, "checks": [{"name": "outputs equal", "passed": True}]}))
    out = tmp_path / "zh" / "report.md"
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--verify-result", v, "--out", out,
               "--lang", "zh")
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "成功标准" in text and "功能结果无差异" in text and "outputs equal" in text
    # outputs identical and the window held, but nothing got faster: no change, never success
    assert "无变化" in text and "成功：每个" not in text


def test_baseline_only_says_not_worth_enabling(tmp_path):
    plan = write_plan(tmp_path, saving=(0.05, 0.1, 0.2))
    a = write_profile(tmp_path / "a")
    out = tmp_path / "o" / "report.md"
    res = _run("--plan", plan, "--baseline", a, "--out", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "Not worth enabling" in text and "vllm-ascend PR 2550" in text
    assert sorted(p.name for p in out.parent.iterdir()) == OUT_NAMES


@pytest.mark.parametrize("variant,opt_kw,plan_kw,needle", [
    (Variant(other_model=True, target_factor=0.8), {}, {}, "different models"),
    (Variant(target_factor=0.8), {"mhz": 1500}, {}, "different hardware"),
    (Variant(drop_target=True), {}, {}, "missing from the optimized profile"),
    (Variant(target_factor=0.8), {}, {"shapes": "3,5;7,5"}, "in neither profile"),
])
def test_mismatch_writes_the_report_with_a_banner_and_exits_3(tmp_path, variant, opt_kw, plan_kw, needle):
    plan, a, b = _pair(tmp_path, variant, opt_kw, **plan_kw)
    out = tmp_path / "o" / "report.md"
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--out", out)
    assert res.exit_code == 3, res.output
    assert needle in res.output
    text = out.read_text()
    assert text.splitlines()[2].startswith("> **⚠ MISMATCH")
    assert needle in text
    assert sorted(p.name for p in out.parent.iterdir()) == OUT_NAMES


def test_mismatch_with_json_still_prints_the_document(tmp_path):
    plan, a, b = _pair(tmp_path, Variant(drop_target=True))
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--out", tmp_path / "o" / "r.md", "--json")
    assert res.exit_code == 3
    doc = json.loads(res.stdout)
    assert [x["code"] for x in doc["banners"]] == ["site_not_in_optimized"]
    assert doc["overall"] == "inconclusive" and doc["sites"] == []
    text = (tmp_path / "o" / "r.md").read_text()
    assert "INCONCLUSIVE" in text and "no verdict" in text


def _bad_plan(tmp):
    p = tmp / "bad.yaml"
    d = plan_dict()
    d["sites"][0]["max_size"] = -1
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("case", ["plan_invalid", "plan_missing", "baseline_missing", "optimized_empty",
                                  "verify_not_json", "verify_missing"])
def test_unreadable_input_exits_2_and_writes_nothing(tmp_path, case):
    plan, a, b = _pair(tmp_path)
    args = {"--plan": plan, "--baseline": a, "--optimized": b}
    if case == "plan_invalid":
        args["--plan"] = _bad_plan(tmp_path)
    elif case == "plan_missing":
        args["--plan"] = tmp_path / "nope.yaml"
    elif case == "baseline_missing":
        args["--baseline"] = tmp_path / "nowhere"
    elif case == "optimized_empty":
        empty = tmp_path / "empty" / "kernel_details.csv"
        empty.parent.mkdir()
        empty.write_text("")
        args["--optimized"] = empty
    elif case == "verify_not_json":
        v = tmp_path / "verify.json"
        v.write_text("passed: yes")
        args["--verify-result"] = v
    elif case == "verify_missing":
        args["--verify-result"] = tmp_path / "verify.json"
    out = tmp_path / "o" / "report.md"
    flat = [str(x) for kv in args.items() for x in kv]
    res = _run(*flat, "--out", out)
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and "Traceback" not in res.output
    assert not out.parent.exists()


def test_bad_lang_and_steps(tmp_path):
    plan, a, b = _pair(tmp_path)
    assert _run("--plan", plan, "--baseline", a, "--lang", "fr").exit_code == 2
    res = _run("--plan", plan, "--baseline", a, "--steps", "x", "--out", tmp_path / "o" / "r.md")
    assert res.exit_code == 2 and not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the bundled example

LLAMA = REPO / "examples" / "llama3.2-1b-en"


@pytest.mark.skipif(not (LLAMA / "profile").is_dir(), reason="bundled example profile absent")
def test_bundled_llama_example_baseline_only(tmp_path):
    # a plan for gate_proj as `analyze` would write it (signature and window of the example)
    plan = write_plan(tmp_path, window_ops=("Add", "RmsNorm"), saving=(4.0, 7.0, 9.0))
    out = tmp_path / "o" / "report.md"
    res = _run("--plan", plan, "--baseline", LLAMA / "profile", "--out", out, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    site = doc["expected"]["sites"][0]
    # the gain counts the plan's call site (4 per step in this plan), the baseline measures 16
    # kernels (16 layers; up_proj, same shape, excluded): noted, never mixed
    assert site["found"] and site["per_step"] == 4 and site["measured_per_step"] == 16
    assert "counts 4 (its call site)" in site["note"]
    assert 25 < site["target_us"] < 40
    assert doc["hardware"]["name"] == "910B3"
    text = out.read_text()
    roofline = text.split("## 2. Roofline conclusions")[1].split("## 3.")[0]
    assert "`MatMulV3 1,2048;8192,2048`" in roofline and "| ★ |" in roofline
    assert (out.parent / "report.roofline.png").stat().st_size > 5000


@pytest.mark.skipif(not (REPO / "examples" / "synth" / "writer.py").is_file(), reason="synth generator absent")
def test_bundled_llama_example_ab_with_the_synth_generator(tmp_path):
    from synth.writer import generate
    cfg = LLAMA / "config.json"
    a = generate(cfg, tmp_path / "a", steps=6, layers=4, stacks="outer", seed=1)
    b = generate(cfg, tmp_path / "b", steps=6, layers=4, stacks="outer", seed=2,
                 prefetch={"LlamaMLP.gate_proj": (1.3, 1.0)})
    plan = write_plan(tmp_path)
    out = tmp_path / "o" / "report.md"
    res = _run("--plan", plan, "--baseline", a, "--optimized", b, "--out", out, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    checks = {c["key"]: c["ok"] for c in doc["sites"][0]["checks"]}
    assert checks["target_faster"] and checks["window_stable"]
    cmo = [s for s in doc["optimized"]["streams"] if s["cmo_kernels"]]
    assert cmo, "the generator's CMO tasks appear on a side stream"
    # the generator times each CMO task at 285 GB/s (+3 us launch) for prefetch_coef 0.5 of the
    # weight, the plan's max_size: report calibrates the rate from them (issue 10 item 5) ...
    rate = doc["cmo_rate"]
    assert 240 < rate["gbps"] < 285 and rate["tasks_per_step"] == pytest.approx(4)
    # ... and with it a 10 us window carries ~2.7 MB, far below 0.7 x 32 MiB: the next step is a
    # longer window, not a larger size
    assert doc["sites"][0]["action"] == "move_dependency"


# ------------------------------------------------------------- the plan alone (no profile)

def _manual_plan(tmp_path):
    """A manual-mode plan made without a profile, on a copy of transformers' real Llama file."""
    import shutil

    transformers = pytest.importorskip("transformers")
    src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    shutil.copy(src, tmp_path / "modeling_llama.py")
    shutil.copy(LLAMA / "config.json", tmp_path / "config.json")
    res = runner.invoke(app, ["prefetch", "analyze", "--target", "LlamaMLP.down_proj", "--model-src",
                              str(tmp_path / "modeling_llama.py"), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    return tmp_path / "out" / "prefetch_plan.yaml"


def test_plan_alone_writes_the_expected_gain_and_the_ab_script(tmp_path):
    # issue 9 (agent paths) / CONTRACTS report: with the plan alone, the expected-gain analysis
    # from the plan's shapes and hardware, "unknown" where a profile is needed, and the A/B script
    plan = _manual_plan(tmp_path)
    out = tmp_path / "r" / "report.md"
    res = _run("--plan", plan, "--out", out, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["mode"] == "plan" and doc["overall"] == "expected_only" and doc["baseline"] is None
    site = doc["expected"]["sites"][0]
    assert site["saving_per_step_us"] is None and site["gain_source"] == "unknown"
    # at most: 16 MiB at 1.6 TB/s, (1 - 1/4.2) of it saved from L2, the op at the HBM roof
    assert site["bound_per_op_us"][1] == pytest.approx(16 * 2**20 / 1.6e12 * 1e6 * (1 - 1 / 4.2), abs=0.01)
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.md", "run_prefetch_ab.py"]
    text = out.read_text()
    assert "unknown (no profile)" in text and "EXPECTED GAIN ONLY" in text
    assert "0.00 / 0.00 / 0.00" not in text and "`None`" not in text
    assert "LlamaMLP.gate_proj" in text.split("## 7.")[1]          # the overlap risk


def test_plan_alone_gives_the_plans_own_number(tmp_path):
    # an analyze plan records its benefit inputs: without any profile the report still shows the
    # plan's per-step saving, computed by the same function for the plan's hardware
    from cannbot_prefetch import analyze
    transformers = pytest.importorskip("transformers")
    site_packages = str(Path(transformers.__file__).resolve().parents[1])
    analyze(str(LLAMA / "profile"), model_src="transformers.models.llama.modeling_llama",
            model_config=str(LLAMA / "config.json"), out=str(tmp_path / "a"),
            src_map=(("/usr/local/lib/python3.10/site-packages", site_packages),)).save()
    plan = yaml.safe_load((tmp_path / "a" / "prefetch_plan.yaml").read_text())
    res = _run("--plan", tmp_path / "a" / "prefetch_plan.yaml", "--out", tmp_path / "r" / "report.md", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    want = plan["sites"][0]["saving_us"]
    assert doc["expected"]["sites"][0]["saving_per_step_us"] == [want["low"], want["mid"], want["high"]]


def test_optimized_without_baseline_is_unusable_input(tmp_path):
    plan = write_plan(tmp_path)
    b = write_profile(tmp_path / "b")
    res = _run("--plan", plan, "--optimized", b, "--out", tmp_path / "o" / "r.md")
    assert res.exit_code == 2 and not (tmp_path / "o").exists()
