"""Markdown (en / zh with the seed's terms), the chart PNG, the A/B script, verify.json parsing."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from profgen import Variant

from cannbot_prefetch.errors import InputError
from cannbot_prefetch.report import parse_verify
from cannbot_prefetch.report.abscript import ab_script
from cannbot_prefetch.report.chart import Point, Roof, render_png
from cannbot_prefetch.report.markdown import render
from cannbot_prefetch.report.output import render_outputs

SEVEN_EN = ["## 1. Target ops and why", "## 2. Roofline conclusions", "## 3. Why each dependency window",
            "## 4. Switches and code path", "## 5. max_size basis", "## 6. Validations done",
            "## 7. Risks and next steps"]
SEED_TERMS_ZH = ["目标算子", "依赖窗口", "关键路径", "成功标准", "后续调优建议", "验证检查清单",
                 "max_size 取值依据", "如何运行测试", "前序窗口没有明显退化", "功能结果无差异"]


def test_english_report_has_the_seven_items_tables_and_sources(make_report):
    d = make_report(Variant(target_factor=0.8), verify=None)
    text = render(d, "en", {"chart": "report.roofline.png", "next_plan": "prefetch_plan.next.yaml",
                            "ab_script": "run_prefetch_ab.py"})
    pos = [text.index(h) for h in SEVEN_EN]
    assert pos == sorted(pos)
    assert "![Roofline" in text and "report.roofline.png" in text
    assert "Verification checklist and success rule" in text
    assert "gain measured, a guard not checked: not confirmed" in text   # no --verify-result
    assert "step_trace_time.csv" in text          # where the critical path came from
    assert re.search(r"target op µs per kernel \| 39\.\d\d ± [\d.]+ \(n=5\) \| 3[12]\.\d\d ± [\d.]+ \(n=5\) \| -(19|20)\.\d%", text)
    assert "raise max_size" in text and "prefetch_plan.next.yaml" in text
    assert "python run_prefetch_ab.py" in text
    assert "## Where the numbers come from" in text
    assert "MISMATCH" not in text


def test_chinese_report_uses_the_seed_terms(make_report):
    d = make_report(Variant(window_factor=1.10, cmo_us=10))
    text = render(d, "zh", {"next_plan": "prefetch_plan.next.yaml"})
    for term in SEED_TERMS_ZH:
        assert term in text, term
    assert "减小 max_size" in text and "未达成功标准" in text
    assert "目标算子没快，前序窗口反而变慢" in text     # the seed's failure signal in its words (full-width marks)
    assert "依赖窗口明显退化：max_size 过大，争抢带宽" in text   # the reason, translated
    assert "the window ops slowed down" not in text


def test_mismatch_banner_in_both_languages(make_report):
    d = make_report(Variant(other_model=True))
    assert "⚠ MISMATCH — Profiles from different models" in render(d, "en", {})
    assert "输入不匹配" in render(d, "zh", {})


def test_outputs_are_rendered_in_memory_with_a_png_chart(make_report, tmp_path):
    d = make_report(Variant(target_factor=0.8))
    outs = render_outputs(d, tmp_path / "out" / "r.md", "en")
    names = sorted(p.name for p in outs)
    assert names == ["prefetch_plan.next.yaml", "r.md", "r.roofline.png", "run_prefetch_ab.py"]
    png = next(v for p, v in outs.items() if p.suffix == ".png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert not (tmp_path / "out").exists()       # nothing written yet


def test_chart_draws_targets_and_roof():
    pts = [Point("MatMulV3 1,2048;8192,2048", 1.0, 0.8, True), Point("x", 50.0, 40.0)]
    png = render_png(pts, Roof("910B3", 294.9, "bf16 peak 294.9 TFLOPS", 1.6), "t",
                     {"x": "x", "y": "y", "roof": "roof", "target": "targets", "other": "other"})
    assert png.startswith(b"\x89PNG")


def test_ab_script_compiles_and_profiles_level1_pipeutilization(tmp_path):
    text = ab_script("prefetch_plan.yaml", "enable_prefetch", "zh")
    compile(text, "run_prefetch_ab.py", "exec")
    for needle in ("ProfilerLevel.Level1", "AiCMetrics.PipeUtilization", "with_stack=True",
                   '"prefetch", "report"', "--optimized", "enable_prefetch"):
        assert needle in text
    assert "import torch_npu" not in text.split("def profile_run")[0]   # only inside main's path
    script = tmp_path / "run_prefetch_ab.py"
    script.write_text(text)
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--factory" in r.stdout


def test_ab_script_sets_the_switch_on_modules(tmp_path, monkeypatch):
    ns: dict = {"__name__": "ab", "__file__": str(tmp_path / "run_prefetch_ab.py")}
    exec(compile(ab_script("p.yaml", "enable_prefetch"), "ab", "exec"), ns)

    class M:
        enable_prefetch = False

        def __init__(self):
            self.kids = [self]

        def modules(self):
            return iter(self.kids)

    model, inputs = ns["build"](lambda: (M(), (1,)), True)
    assert model.enable_prefetch is True and inputs == (1,)
    model, _ = ns["build"](lambda enable_prefetch: (M(), ()), False)
    assert model.enable_prefetch is False


@pytest.mark.parametrize("text,passed,n", [
    ('{"passed": true, "checks": [{"name": "outputs", "passed": true, "max_abs_diff": 0.0}]}', True, 1),
    ('{"passed": false, "checks": {"outputs": {"passed": false, "detail": "diff"}, "order": true}}', False, 2),
    ('{"passed": true, "checks": "weird"}', True, 0),
    ('{"passed": true, "results": [1, {"id": "graph", "ok": true}]}', True, 1),
])
def test_verify_result_read_defensively(text, passed, n):
    v = parse_verify(text, "verify.json")
    assert v.passed is passed and len(v.checks) == n


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"checks": []}', '{"passed": "yes"}'])
def test_unusable_verify_result_is_an_input_error(text):
    with pytest.raises(InputError):
        parse_verify(text, "verify.json")
