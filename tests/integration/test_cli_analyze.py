"""`cannbot prefetch analyze` end to end through the CLI: every real sample, JSON schema, errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from cannbot_prefetch.cli import app

runner = CliRunner()

# Every sample folder / file of ../shared/profiling-samples that analyze must accept, with the
# layout it must be recognised as.
SAMPLE_PATHS = [
    ("msinsight/pytorch_text_level1/rank0_ascend_pt", "ascend_pt"),
    ("msinsight/pytorch_text_level1", "ascend_pt"),                      # a folder of ranks
    ("msinsight/pytorch_text_level0/rank0_ascend_pt", "ascend_pt"),
    ("msinsight/pytorch_text_level2/rank0_ascend_pt", "ascend_pt"),
    ("msinsight/pytorch_db_level1/rank0_ascend_pt", "ascend_pt_db"),
    ("msinsight/server_test_kernel_parse/op_summary_1.csv", "op_summary_csv"),
    ("msinsight/server_test_rank_0", "ascend_pt"),
    ("mstt/advisor_compute_advice_pipe/kernel_details.csv", "kernel_csv"),
    ("mstt/advisor_backend_compute_advice_arith/kernel_details.csv", "kernel_csv"),
    ("mstt/advisor_timeline_advice/trace_view.json", "trace_view"),
    ("vllm-ascend-msprof-group/PROF_GROUP_20260823_165254", "msprof_group"),
]


def _schema() -> dict:
    text = resources.files("cannbot_prefetch").joinpath("schemas/analyze.schema.json").read_text()
    return json.loads(text)


def _analyze_json(*args: str) -> dict:
    res = runner.invoke(app, ["prefetch", "analyze", *args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, _schema())
    return doc


@pytest.mark.parametrize("rel, layout", SAMPLE_PATHS)
def test_every_real_sample_analyzes(samples, rel, layout):
    doc = _analyze_json(str(samples / rel))
    assert doc["profile"]["layout"] == layout
    assert doc["profile"]["rows"] > 0
    assert doc["hardware"]["name"]


def test_level1_sample_lists_memory_bound_matmuls_with_both_verdicts(samples):
    doc = _analyze_json(str(samples / "msinsight/pytorch_text_level1/rank0_ascend_pt"))
    assert doc["profile"]["level"] == "Level1"
    assert doc["profile"]["aic_metrics"] == "PipeUtilization"
    mm = [s for s in doc["signatures"] if s["type"].lower().startswith("matmul")]
    assert mm, "the Level1 sample has MatMulV2/V3 rows"
    big = [s for s in mm if s["input_shapes"] == "32,9216;4096,9216;4096"]
    assert big and big[0]["measured_verdict"] == "memory-bound"   # mte2 0.983 vs mac 0.152
    assert big[0]["flops"] == pytest.approx(2 * 32 * 9216 * 4096)


def test_ranks_folder_defaults_to_lowest_and_rank_flag_chooses(samples):
    root = str(samples / "msinsight/pytorch_text_level1")
    assert _analyze_json(root)["profile"]["rank"] == 0
    assert _analyze_json(root, "--rank", "1")["profile"]["rank"] == 1


def test_level0_says_what_to_collect(samples):
    doc = _analyze_json(str(samples / "msinsight/pytorch_text_level0/rank0_ascend_pt"))
    text = " ".join(doc["notes"])
    assert "Level1" in text and "PipeUtilization" in text


def test_human_output_names_the_hardware_numbers(samples):
    res = runner.invoke(app, ["prefetch", "analyze",
                              str(samples / "msinsight/pytorch_text_level1/rank0_ascend_pt"),
                              "--hardware", "910B4"])
    assert res.exit_code == 0, res.output
    assert "910B4" in res.output and "TB/s" in res.output


def test_overrides_are_recorded(samples):
    doc = _analyze_json(str(samples / "mstt/advisor_compute_advice_pipe/kernel_details.csv"),
                        "--hardware", "910B3", "--hbm-bw", "1.2", "--peak-tflops", "bf16=250")
    assert doc["hardware"]["hbm_bw"] == pytest.approx(1.2)
    assert doc["hardware"]["peaks"]["bf16"] == pytest.approx(250)
    assert doc["hardware"]["overrides"]


@pytest.mark.parametrize("args, needle", [
    (["/nonexistent/profile"], "/nonexistent/profile"),
    (["--steps", "x:y", "."], "--steps"),
    (["--peak-tflops", "bf16", "."], "--peak-tflops"),
    (["--lang", "fr", "."], "--lang"),
    ([], "PROFILE"),
])
def test_user_mistakes_are_one_line_exit_2(args, needle, tmp_path):
    res = runner.invoke(app, ["prefetch", "analyze", *args])
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in res.output


def test_empty_file_and_bad_json(tmp_path):
    empty = tmp_path / "kernel_details.csv"
    empty.write_text("")
    notrace = tmp_path / "trace_view.json"
    notrace.write_text('{"hello": 1}')
    for p in (empty, notrace):
        res = runner.invoke(app, ["prefetch", "analyze", str(p)])
        assert res.exit_code == 2, res.output
        assert str(p) in res.stderr and "Traceback" not in res.output


def test_debug_shows_a_traceback(tmp_path):
    res = runner.invoke(app, ["prefetch", "analyze", str(tmp_path / "missing"), "--debug"])
    assert res.exit_code == 2
    assert "Traceback" in res.stderr


def test_real_cuda_trace_of_llama_decode():
    trace = Path(__file__).resolve().parents[2] / "examples/h200-llama3.2-1b-cuda/trace.json.gz"
    doc = _analyze_json(str(trace), "--hardware", "H200")
    assert doc["profile"]["layout"] == "torch_trace"
    assert doc["profile"]["warmup_excluded"], "ProfilerStep#1 is the warm-up"
    lm_head = [s for s in doc["signatures"] if s.get("weight_shape") == [128256, 2048]]
    assert lm_head and lm_head[0]["verdict"] == "memory-bound"


@pytest.mark.parametrize("mode, call, rc, words", [
    ("eager", "side_stream", 0, None), ("npugraph_ex", "direct", 0, None),
    ("eager", "bogus", 2, "--call must be one of direct, side_stream"),
    ("ge_graph", "side_stream", 2, "not a ge_graph form")])
def test_call_form_option(tmp_path, mode, call, rc, words):
    """Issue 30: both call forms are offered; the plan records the one asked for."""
    import yaml

    transformers = pytest.importorskip("transformers")
    src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    (tmp_path / "src").mkdir()
    model = tmp_path / "src" / "modeling_llama.py"
    model.write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    config = Path(__file__).resolve().parents[2] / "examples" / "llama3.2-1b-en" / "config.json"
    res = runner.invoke(app, ["prefetch", "analyze", "--target", "LlamaMLP.gate_proj",
                              "--model-src", str(model), "--model-config", str(config),
                              "--mode", mode, "--call", call, "--out", str(tmp_path / "out"),
                              "--json"])
    assert res.exit_code == rc, res.output
    if words is not None:
        assert words in json.loads(res.stdout)["error"]["message"]
        assert not (tmp_path / "out").exists()
        return
    plan = yaml.safe_load((tmp_path / "out" / "prefetch_plan.yaml").read_text(encoding="utf-8"))
    assert plan["call"] == call
    design = (tmp_path / "out" / "prefetch_design.md").read_text(encoding="utf-8")
    assert f"call form `{call}`" in design and "not the mode's recommended" in design
