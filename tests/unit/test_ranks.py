"""`analyze --rank all` (issue 12 "All ranks"): every rank read, per-rank statistics per
signature, and plan decisions that hold across ranks.

Folders: the two REAL ranks of ../shared's msinsight Level1 job plus GENERATED ranks, and the
GENERATED Llama example cut into ranks. `_generated_rank` below is this test's own generator: it
copies a rank and rewrites rows of its kernel_details.csv in the documented torch_npu format
(durations, PipeUtilization ratios), labelled GENERATED in the folder; it shares no code with
the tool.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cannbot_prefetch import reasons
from cannbot_prefetch.cli import app
from cannbot_prefetch import analyze
from cannbot_prefetch.ranks import CrossRank, RankSig, RankView, signature_key
from cannbot_prefetch.windows import Candidate, PredOp, TargetSig, Window, WindowResult
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "examples/llama3.2-1b-en"
L1 = "msinsight/pytorch_text_level1"


def _generated_rank(src: Path, dst: Path, rank: int, edit) -> Path:
    """Copy a *_ascend_pt folder as rank `rank`; `edit(row: dict) -> None` rewrites each
    kernel_details row in place. Marked GENERATED."""
    shutil.copytree(src, dst)
    for info in dst.glob("profiler_info*.json"):
        data = json.loads(info.read_text())
        data["rank_id"] = rank
        info.unlink()
        (dst / f"profiler_info_{rank}.json").write_text(json.dumps(data))
    kd = next(dst.rglob("kernel_details.csv"))
    text = kd.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    header = next(csv.reader(io.StringIO(text.splitlines()[0])))
    for row in rows:
        edit(row)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    kd.write_text(out.getvalue(), encoding="utf-8")
    (dst / "GENERATED.txt").write_text(
        f"GENERATED rank {rank}: a copy of {src.name} with rewritten kernel_details rows "
        "(tests/unit/test_ranks.py), not measured.\n")
    return dst


def _scale(factor: float, *, shapes: str | None = None, mac: float | None = None,
           mte2: float | None = None):
    def edit(row: dict) -> None:
        if shapes is not None and row.get("Input Shapes", "").strip('"') != shapes:
            return
        row["Duration(us)"] = f"{float(row['Duration(us)']) * factor:.3f}"
        if mac is not None:
            row["aic_mac_ratio"] = str(mac)
        if mte2 is not None:
            row["aic_mte2_ratio"] = str(mte2)
    return edit


# ---------------------------------------------------------------- real ranks + generated ones

@pytest.fixture
def real_job(samples, tmp_path) -> Path:
    job = tmp_path / "job"
    for r in (0, 1):
        shutil.copytree(samples / L1 / f"rank{r}_ascend_pt", job / f"rank{r}_ascend_pt")
    base = samples / L1 / "rank0_ascend_pt"
    _generated_rank(base, job / "rank2_ascend_pt", 2, _scale(1.3))      # the busiest
    _generated_rank(base, job / "rank3_ascend_pt", 3, _scale(0.9))
    return job


@pytest.mark.samples
def test_every_rank_read_with_per_rank_statistics(real_job):
    doc = analyze(str(real_job), rank="all", hardware="910B3").to_json()
    ranks = doc["ranks"]
    assert doc["profile"]["ranks"] == [0, 1, 2, 3] and doc["profile"]["path"] == str(real_job)
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1, 2, 3]
    assert all(r["rows"] > 100 for r in ranks["ranks"])
    busy = {r["rank"]: r["busy_us"] for r in ranks["ranks"]}
    assert ranks["reference"] == max(busy, key=busy.get) == 2 and doc["profile"]["rank"] == 2
    assert busy[2] > busy[0] > busy[3]
    top = doc["signatures"][0]
    per = {r["rank"]: r for r in top["per_rank"]}
    assert set(per) == {0, 1, 2, 3}
    # each rank's own numbers: rank 2 ran every kernel 1.3x longer than rank 0 (GENERATED)
    assert per[2]["total_us"] == pytest.approx(per[0]["total_us"] * 1.3, rel=1e-3)
    assert per[3]["total_us"] == pytest.approx(per[0]["total_us"] * 0.9, rel=1e-3)
    assert all(r["bytes"] == per[0]["bytes"] for r in per.values())
    assert any("--rank all: 4 rank(s) read" in n for n in doc["notes"])


@pytest.mark.samples
def test_rank_all_through_the_cli(real_job):
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(real_job), "--rank", "all",
                                   "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["profile"]["ranks"] == [0, 1, 2, 3]
    one = CliRunner().invoke(app, ["prefetch", "analyze", str(real_job), "--rank", "3", "--json"])
    assert json.loads(one.stdout)["profile"]["rank"] == 3
    bad = CliRunner().invoke(app, ["prefetch", "analyze", str(real_job), "--rank", "some",
                                   "--json"])
    assert bad.exit_code == 2 and "--rank" in json.loads(bad.stdout)["error"]["message"]


@pytest.mark.samples
def test_rank_all_on_one_profile_is_that_rank(samples):
    doc = analyze(str(samples / L1 / "rank1_ascend_pt"), rank="all",
                  hardware="910B3").to_json()
    assert [r["rank"] for r in doc["ranks"]["ranks"]] == [1]


# ---------------------------------------------------------------- plan decisions (Llama, GENERATED)

GATE_UP = "1,2048;8192,2048"      # gate_proj and up_proj: one signature on every rank


def _llama_job(tmp_path: Path, edits: dict) -> Path:
    src = next((LLAMA / "profile").glob("*_ascend_pt"))
    job = tmp_path / "job"
    for rank in range(3):
        _generated_rank(src, job / f"rank{rank}_ascend_pt", rank, edits.get(rank, _scale(1.0)))
    return job


def _plan(job: Path, tmp_path: Path) -> dict:
    planned = analyze(str(job), rank="all", model_src=str(_llama_source()),
                      model_config=str(LLAMA / "config.json"), out=str(tmp_path / "out"))
    return planned.to_json(planned.save())


def _llama_source() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("transformers is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "models/llama/modeling_llama.py"


def test_target_must_be_memory_bound_on_the_ranks_that_set_its_pace(tmp_path):
    """Rank 1 is the busiest (lm_head 2x), so it is analysed in full, and finds gate/up
    memory-bound; rank 2 spends the most time in gate/up and its counters say compute-bound:
    gate/up is not planned, with the rank named."""
    lm_head = "1,2048;128256,2048"
    one = _plan(_llama_job(tmp_path / "a", {}), tmp_path / "a")
    # same ranks everywhere: gate/up is a site (planned, or listed when another site expects
    # more at --max-sites 1) and no rank refuses it
    assert any(c["target"] in ("LlamaMLP.gate_proj", "LlamaMLP.up_proj") for c in one["candidates"])
    assert not any(r["reason_code"] == reasons.NOT_MEMORY_BOUND_ON_RANK for r in one["rejections"])
    doc = _plan(_llama_job(tmp_path / "b", {
        1: _scale(2.0, shapes=lm_head),
        2: _scale(1.2, shapes=GATE_UP, mac=0.9, mte2=0.2)}), tmp_path / "b")
    assert doc["ranks"]["reference"] == 1
    off = [r for r in doc["rejections"] if r["reason_code"] == reasons.NOT_MEMORY_BOUND_ON_RANK]
    assert off and GATE_UP in off[0]["signature"] and "rank 2" in off[0]["reason"]
    assert not any(c["target"] in ("LlamaMLP.gate_proj", "LlamaMLP.up_proj")
                   for c in doc["candidates"])
    design = (tmp_path / "b/out/prefetch_design.md").read_text()
    assert "Across ranks (3 ranks; rank 1" in design and "| 2 |" in design and "█" in design


def test_a_fast_rank_does_not_veto(tmp_path):
    """Compute-bound counters on a rank that spends far less time in gate/up (below the pace
    share) do not stop the plan."""
    doc = _plan(_llama_job(tmp_path, {2: _scale(0.5, shapes=GATE_UP, mac=0.9, mte2=0.2)}),
                tmp_path)
    assert not any(r["reason_code"] == reasons.NOT_MEMORY_BOUND_ON_RANK for r in doc["rejections"])
    per = {r["rank"]: r for s in doc["signatures"] if s["input_shapes"] == GATE_UP
           for r in s["per_rank"]}
    assert per[2]["verdict"] == "compute-bound" and per[0]["verdict"] == "memory-bound"


# ---------------------------------------------------------------- windows: the smallest

def _cand(t: TargetSig, time_us: float, cluster: int = 0) -> Candidate:
    op = PredOp("RmsNorm", "rms", "light", "light op", 3.0, 1)
    return Candidate(t, cluster, 1, 32, 16.0, 20.0,
                     Window("3b", "input", op, (op,), time_us, time_us, time_us, 0.0, 32, "3b"))


def _view(rank: int, windows: dict, busy: float = 100.0) -> RankView:
    return RankView(rank, f"r{rank}", 10, 0, 100.0, busy, (1,), {}, windows=windows)


def test_window_is_the_smallest_across_ranks_and_a_closed_rank_rejects():
    t = TargetSig(0, "MatMulV3", "1,2048;2048,2048", "BF16;BF16", weight_shape=(2048, 2048))
    u = TargetSig(1, "MatMulV3", "1,2048;8192,2048", "BF16;BF16", weight_shape=(8192, 2048))
    kt, ku = (signature_key(t), 0), (signature_key(u), 0)
    cross = CrossRank((_view(0, {kt: (9.0, "ok"), ku: (6.0, "ok")}),
                       _view(1, {kt: (4.5, "ok"), ku: (None, "communication overlaps")}),
                       _view(2, {kt: (7.0, "ok")})), reference=0, pace_share=0.95)
    res = cross.windows(WindowResult((_cand(t, 9.0), _cand(u, 6.0)), ()))
    (c,) = res.candidates
    assert c.target is t and c.window.time_us == 4.5 and "rank 1" in c.window.reason
    (r,) = res.rejections
    assert r.reason_code == reasons.NO_SAFE_WINDOW_ON_RANK and "rank 1" in r.reason


def test_pace_ranks_follow_the_time_in_the_signature():
    t = TargetSig(0, "MatMulV3", "1,2048;2048,2048", "BF16", weight_shape=(2048, 2048))
    key = signature_key(t)

    def v(rank, total, verdict):
        view = _view(rank, {})
        view.sigs[key] = RankSig(rank, 10, total, total / 10, verdict, "counters", 1, 1, "")
        return view
    cross = CrossRank((v(0, 100.0, "memory-bound"), v(1, 96.0, "compute-bound"),
                       v(2, 50.0, "compute-bound")), reference=0, pace_share=0.95)
    assert [r.rank for r in cross.pace_ranks(t)] == [0, 1]
    kept, off = cross.targets([t])
    assert not kept and off[0].reason_code == reasons.NOT_MEMORY_BOUND_ON_RANK
    assert "rank 1" in off[0].reason


def test_busy_time_leaves_out_communication_rows(samples):
    """busy_us (which rank sets the pace) judges kinds per distinct value; it must equal the
    per-row rule windows/classes.kind_of(type, name, core) on a REAL rank with HCCL rows."""
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.ranks import _busy_us
    from cannbot_prefetch.windows.classes import default_rules

    df = load_profile(samples / L1 / "rank0_ascend_pt").table.df
    rules = default_rules(POLICY)
    comm = [rules.kind_of(t, n, c) == "communication"
            for t, n, c in df.select("type", "name", "core").iter_rows()]
    assert any(comm) and not all(comm)
    expected = sum(d or 0.0 for d, c in zip(df["dur_us"].to_list(), comm) if not c)
    assert _busy_us(df, POLICY) == pytest.approx(expected)
    assert _busy_us(df, POLICY) < float(df["dur_us"].sum())
