"""End to end on CPU: examples/cpu-tiny-llama/run.py --small, one test per stage.

The example profiles a small Llama-style model with torch.profiler, calibrates a `cpu` hardware
profile, then runs analyze -> apply -> verify -> report through the real `cannbot` command.
Each stage's outcome comes from OUT/run_summary.json; a stage that failed fails its test, a stage
skipped only because an earlier one failed is skipped here (the earlier test already fails).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the CPU example needs torch (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cpu-tiny-llama"
STAGES = ("prepare", "profile", "calibrate", "analyze", "apply", "verify", "report")

pytestmark = pytest.mark.slow


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu-tiny-llama")
    before = _sha(EXAMPLE / "model.py")
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run.py"), "--small", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    summary_path = out / "run_summary.json"
    assert summary_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    stages = {s["name"]: s for s in json.loads(summary_path.read_text())["stages"]}
    return {"out": out, "proc": proc, "stages": stages, "model_sha_before": before}


def _stage(run, name):
    st = run["stages"].get(name)
    if st is None:
        pytest.fail(f"stage {name} missing from run_summary.json\n{run['proc'].stdout[-3000:]}")
    if st["status"] == "not-built":
        pytest.skip(f"{name}: command not built yet ({st['detail']})")
    if st["status"] == "stopped":
        pytest.skip(f"{name}: the workflow stopped honestly before it ({st['detail']})")
    if st["status"] == "skipped":
        pytest.skip(f"{name}: skipped because an earlier stage did not finish ({st['detail']})")
    assert st["status"] == "ok", f"{name}: {st['detail']}\n{run['proc'].stdout[-4000:]}"
    return st


def test_prepare(run):
    st = _stage(run, "prepare")
    src = run["out"] / "src"
    assert (src / "modeling_tiny_llama.py").exists() and (src / "config.json").exists()
    cfg = json.loads((src / "config.json").read_text())
    assert cfg["hidden_size"] == 512                      # --small sizes
    assert st["files"]


def test_profile_trace_has_shapes_stacks_and_steps(run):
    _stage(run, "profile")
    trace = run["out"] / "trace" / "tiny_llama_decode.pt.trace.json"
    events = json.loads(trace.read_text())["traceEvents"]
    linears = [e for e in events if e.get("name") == "aten::linear"]
    assert linears and all("Input Dims" in e.get("args", {}) for e in linears)
    assert any(e.get("cat") == "python_function" and "modeling_tiny_llama.py" in e.get("name", "")
               for e in events)
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert len(steps) == 3


def test_calibrate(run):
    st = _stage(run, "calibrate")
    assert st["rc"] == 0
    doc = json.loads((run["out"] / "hardware_cpu.json").read_text())
    assert doc.get("measured") is True
    assert list((run["out"] / "hardware").glob("*.yaml"))


def test_analyze_writes_plan_and_design(run):
    st = _stage(run, "analyze")
    assert st["rc"] == 0
    doc = json.loads((run["out"] / "analyze.json").read_text())
    assert doc["hardware"]["name"].lower() == "cpu"
    assert any(s["verdict"] == "memory-bound" for s in doc["signatures"])
    plan = run["out"] / "plan" / "prefetch_plan.yaml"
    assert plan.exists() and (run["out"] / "plan" / "prefetch_design.md").exists()
    planned = [c for c in doc["candidates"] if c.get("planned")]
    # CPU timings decide the windows: when nothing qualifies the workflow must stop and say why.
    assert planned or doc["rejections"], doc
    if not planned:
        assert run["stages"]["apply"]["status"] == "stopped"
    for c in planned:
        assert c["max_size"] > 0 and c["window"]["branch"] in ("3a", "3b")


def test_apply_rewrites_the_copy_only(run):
    st = _stage(run, "apply")
    assert st["rc"] == 0                                  # the last call: apply --check, nothing pending
    copy = run["out"] / "src" / "modeling_tiny_llama.py"
    text = copy.read_text()
    assert "# cannbot-prefetch:" in text and "enable_prefetch" in text
    compile(text, str(copy), "exec")
    assert (run["out"] / "src" / "_cannbot_prefetch.py").exists()
    assert (run["out"] / "apply_diff.patch").read_text().startswith("--- ")
    assert _sha(EXAMPLE / "model.py") == run["model_sha_before"]   # committed model untouched
    committed = (EXAMPLE / "model.py").read_text()
    assert "self.enable_prefetch" not in committed and "# cannbot-prefetch:" not in committed


def test_verify_passes(run):
    st = _stage(run, "verify")
    assert st["rc"] == 0
    doc = json.loads((run["out"] / "verify.json").read_text())
    assert doc["passed"] is True, doc["checks"]


def test_report_expected_gain_files(run):
    st = _stage(run, "report")
    assert st["rc"] == 0
    rep = run["out"] / "report"
    for name in ("report.md", "report.roofline.png", "prefetch_plan.next.yaml", "run_prefetch_ab.py"):
        assert (rep / name).exists(), name


def test_runner_exit_code_matches_stages(run):
    statuses = [run["stages"][s]["status"] for s in STAGES if s in run["stages"]]
    expected = 0 if all(s in ("ok", "stopped") for s in statuses) else 1
    assert run["proc"].returncode == expected, run["proc"].stdout[-2000:]
